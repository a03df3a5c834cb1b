// RUN: dlc-opt %s -p lower-tensor-to-loop | filecheck %s

// `epilogue 1`: the bias + relu compute after a register-tiled product runs on the
// tile's accumulators, as 4-lane vectors, right after the reduction loop: only its
// result is stored (the product's own buffer is never written, nothing else reads
// it), and it gets no loop nest of its own.
// CHECK-LABEL: loop.func @mm_bias_relu(
// CHECK-SAME:    %[[A:.*]]: memref<7x5xf32>, %[[B:.*]]: memref<5x8xf32>, %[[BIAS:.*]]: memref<8xf32>, %[[OUT:.*]]: memref<7x8xf32>) {
// CHECK:         %[[C:.*]] = loop.alloc : memref<7x8xf32>
// CHECK:         loop.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:           %[[ACC:.*]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} = loop.for
// CHECK:             arith.addf %{{.*}}, %{{.*}} : vector<4xf32>
// CHECK:             loop.yield
// CHECK-NEXT:      }
// CHECK-NEXT:      %[[BV:.*]] = loop.vload %[[BIAS]][%[[J:.*]]] : memref<8xf32> -> vector<4xf32>
// CHECK-NEXT:      %[[SUM:.*]] = arith.addf %[[ACC]], %[[BV]] : vector<4xf32>
// CHECK:           %[[RELU:.*]] = arith.maximumf %[[SUM]], %{{.*}} : vector<4xf32>
// CHECK-NEXT:      loop.vstore %[[RELU]], %[[OUT]][%[[I]], %[[J]]] : vector<4xf32>, memref<7x8xf32>
// CHECK-NOT:       loop.vstore %{{.*}}, %[[C]]
// The last row (7 = 4 + 3) is the peeled remainder block, with the same epilogue.
// CHECK:         arith.maximumf %{{.*}}, %{{.*}} : vector<4xf32>
// CHECK-NOT:     loop.store
// CHECK-NOT:     loop.vstore %{{.*}}, %[[C]]
// CHECK:         loop.dealloc %[[C]]
// CHECK-NEXT:    loop.return
tensor.func @mm_bias_relu(%a: !graph.tensor<7x5xf32>, %b: !graph.tensor<5x8xf32>, %bias: !graph.tensor<8xf32>) -> !graph.tensor<7x8xf32> {
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<tile [d0 = [4], d1 = [8]], interchange [d0.0, d1.0, r0, d0.1, d1.1], unroll [d0.1, d1.1], vectorize d1.1 x 4, epilogue 1> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<7x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x8xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<7x5xf32>, !graph.tensor<5x8xf32>) -> !graph.tensor<7x8xf32>
    %r = tensor.compute(%c, %bias) {
    ^bb0(%i: i64, %j: i64):
      %v = tensor.read %c[%i, %j] : !graph.tensor<7x8xf32>
      %w = tensor.read %bias[%j] : !graph.tensor<8xf32>
      %s = arith.addf %v, %w : f32
      %zero = arith.constant 0.0 : f32
      %m = arith.maximumf %s, %zero : f32
      tensor.yield %m : f32
    } : (!graph.tensor<7x8xf32>, !graph.tensor<8xf32>) -> !graph.tensor<7x8xf32>
    tensor.return %r : !graph.tensor<7x8xf32>
}

// With K blocks outside the tile, the accumulators are final only in the last K
// block: the tile branches on it, to the epilogue (a residual add) or to storing the
// partial sums. The product is returned too, so it is stored in both branches.
// CHECK-LABEL: loop.func @mm_kblocks_residual(
// CHECK-SAME:    %[[A:.*]]: memref<4x5xf32>, %[[B:.*]]: memref<5x4xf32>, %[[R:.*]]: memref<4x4xf32>, %[[S:.*]]: memref<4x4xf32>, %[[C:.*]]: memref<4x4xf32>) {
// CHECK:         %[[K:.*]] = arith.constant 5 : i64
// CHECK:         loop.for %[[KB:.*]] = %{{.*}} to %[[K]] step %{{.*}} {
// CHECK:           %[[KC:.*]] = arith.minsi
// CHECK:           %[[ACC0:.*]], %[[ACC1:.*]] = loop.for
// CHECK:           %[[END:.*]] = arith.addi %[[KB]], %[[KC]] : i64
// CHECK-NEXT:      %[[LAST:.*]] = arith.cmpi sge, %[[END]], %[[K]] : i64
// CHECK-NEXT:      loop.if %[[LAST]] {
// CHECK-NEXT:        loop.vstore %[[ACC0]], %[[C]]
// CHECK-NEXT:        %[[RV:.*]] = loop.vload %[[R]]
// CHECK-NEXT:        %[[SUM:.*]] = arith.addf %[[ACC0]], %[[RV]] : vector<4xf32>
// CHECK-NEXT:        loop.vstore %[[SUM]], %[[S]]
// CHECK:           } else {
// CHECK-NEXT:        loop.vstore %[[ACC0]], %[[C]]
// CHECK-NEXT:        loop.vstore %[[ACC1]], %[[C]]
// CHECK-NEXT:      }
tensor.func @mm_kblocks_residual(%a: !graph.tensor<4x5xf32>, %b: !graph.tensor<5x4xf32>, %r: !graph.tensor<4x4xf32>) -> (!graph.tensor<4x4xf32>, !graph.tensor<4x4xf32>) {
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<tile [d0 = [2], r0 = [2]], interchange [r0.0, d0.0, r0.1, d0.1, d1], unroll [d0.1, d1], vectorize d1 x 4, epilogue 1> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<4x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x4xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<4x5xf32>, !graph.tensor<5x4xf32>) -> !graph.tensor<4x4xf32>
    %s = tensor.compute(%c, %r) {
    ^bb0(%i: i64, %j: i64):
      %v = tensor.read %c[%i, %j] : !graph.tensor<4x4xf32>
      %w = tensor.read %r[%i, %j] : !graph.tensor<4x4xf32>
      %t = arith.addf %v, %w : f32
      tensor.yield %t : f32
    } : (!graph.tensor<4x4xf32>, !graph.tensor<4x4xf32>) -> !graph.tensor<4x4xf32>
    tensor.return %s, %c : !graph.tensor<4x4xf32>, !graph.tensor<4x4xf32>
}

// Without `epilogue`, the same bias + relu is a nest of its own after the product's
// (the input that must not change: two top-level loop nests, the product stored).
// CHECK-LABEL: loop.func @mm_then_relu(
// CHECK:         loop.for
// CHECK:           loop.vstore %{{.*}}, %[[C:.*]][%{{.*}}, %{{.*}}] : vector<4xf32>, memref<4x8xf32>
// CHECK:         loop.for
// CHECK:           loop.load %[[C]]
// CHECK:           arith.maximumf %{{.*}}, %{{.*}} : f32
tensor.func @mm_then_relu(%a: !graph.tensor<4x5xf32>, %b: !graph.tensor<5x8xf32>) -> !graph.tensor<4x8xf32> {
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<tile [d0 = [4], d1 = [8]], interchange [d0.0, d1.0, r0, d0.1, d1.1], unroll [d0.1, d1.1], vectorize d1.1 x 4> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<4x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x8xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<4x5xf32>, !graph.tensor<5x8xf32>) -> !graph.tensor<4x8xf32>
    %r = tensor.compute(%c) {
    ^bb0(%i: i64, %j: i64):
      %v = tensor.read %c[%i, %j] : !graph.tensor<4x8xf32>
      %zero = arith.constant 0.0 : f32
      %m = arith.maximumf %v, %zero : f32
      tensor.yield %m : f32
    } : (!graph.tensor<4x8xf32>) -> !graph.tensor<4x8xf32>
    tensor.return %r : !graph.tensor<4x8xf32>
}

// Compares, selects and math functions in an epilogue run on whole vectors: a lane
// mask (`loop.vcmpf`) picks lanes (`loop.vselect`), erf is `math.erf` on the vector
// (math-approx expands it later).
// CHECK-LABEL: loop.func @mm_leaky_erf(
// CHECK:         %[[ACC:[0-9]+]], %{{.*}} = loop.for
// CHECK:         %[[POS:.*]] = loop.vcmpf ogt, %[[ACC]], %[[ZERO:.*]] : vector<4xf32>
// CHECK:         %[[LEAK:.*]] = arith.mulf %[[ACC]], %{{.*}} : vector<4xf32>
// CHECK-NEXT:    %[[SEL:.*]] = loop.vselect %[[POS]], %[[ACC]], %[[LEAK]] : vector<4xf32>
// CHECK-NEXT:    %[[ERF:.*]] = math.erf %[[SEL]] : vector<4xf32>
// CHECK-NEXT:    loop.vstore %[[ERF]]
tensor.func @mm_leaky_erf(%a: !graph.tensor<4x5xf32>, %b: !graph.tensor<5x8xf32>) -> !graph.tensor<4x8xf32> {
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<tile [d0 = [4], d1 = [8]], interchange [d0.0, d1.0, r0, d0.1, d1.1], unroll [d0.1, d1.1], vectorize d1.1 x 4, epilogue 1> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<4x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x8xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<4x5xf32>, !graph.tensor<5x8xf32>) -> !graph.tensor<4x8xf32>
    %r = tensor.compute(%c) {
    ^bb0(%i: i64, %j: i64):
      %v = tensor.read %c[%i, %j] : !graph.tensor<4x8xf32>
      %zero = arith.constant 0.0 : f32
      %alpha = arith.constant 0.1 : f32
      %pos = arith.cmpf ogt, %v, %zero : f32
      %leak = arith.mulf %v, %alpha : f32
      %m = arith.select %pos, %v, %leak : f32
      %e = math.erf %m : f32
      tensor.yield %e : f32
    } : (!graph.tensor<4x8xf32>) -> !graph.tensor<4x8xf32>
    tensor.return %r : !graph.tensor<4x8xf32>
}
