// RUN: dlc-opt %s -p 'lower-tensor-to-loop{kernels=true}' | filecheck %s

// Two products alike (the same content up to their operands) in one function and a
// third in another are lowered once, into a `dlc.kernel` function taking the result
// buffer then the buffers it reads; each place calls it with its own buffers.
// Elementwise computes stay in place, even when alike.
// CHECK-LABEL: loop.func @two_products(
// CHECK-SAME:    %[[A:.*]]: memref<4x5xf32>, %[[B:.*]]: memref<5x3xf32>, %[[C:.*]]: memref<5x3xf32>, %{{.*}}: memref<4x3xf32>, %{{.*}}: memref<4x3xf32>) {
// CHECK:         %[[P:.*]] = loop.alloc : memref<4x3xf32>
// CHECK-NEXT:    loop.call @[[K:two_products\.kernel0]](%[[P]], %[[A]], %[[B]])
// CHECK-NEXT:    %[[Q:.*]] = loop.alloc : memref<4x3xf32>
// CHECK-NEXT:    loop.call @[[K]](%[[Q]], %[[A]], %[[C]])
// CHECK:         loop.for
// CHECK:           loop.load %[[P]]
// CHECK:         loop.for
// CHECK:           loop.load %[[P]]
// CHECK-NOT:     loop.call
// CHECK:         loop.return
tensor.func @two_products(%a: !graph.tensor<4x5xf32>, %b: !graph.tensor<5x3xf32>, %c: !graph.tensor<5x3xf32>) -> (!graph.tensor<4x3xf32>, !graph.tensor<4x3xf32>) {
    %p = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<4x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x3xf32>
      %m = arith.mulf %x, %y : f32
      tensor.yield %m : f32
    } : (!graph.tensor<4x5xf32>, !graph.tensor<5x3xf32>) -> !graph.tensor<4x3xf32>
    %q = tensor.compute(%a, %c) reduce [5] by "add" init 0.0 : f32 {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<4x5xf32>
      %y = tensor.read %c[%k, %j] : !graph.tensor<5x3xf32>
      %m = arith.mulf %x, %y : f32
      tensor.yield %m : f32
    } : (!graph.tensor<4x5xf32>, !graph.tensor<5x3xf32>) -> !graph.tensor<4x3xf32>
    %s = tensor.compute(%p, %q) {
    ^bb0(%i: i64, %j: i64):
      %x = tensor.read %p[%i, %j] : !graph.tensor<4x3xf32>
      %y = tensor.read %q[%i, %j] : !graph.tensor<4x3xf32>
      %m = arith.addf %x, %y : f32
      tensor.yield %m : f32
    } : (!graph.tensor<4x3xf32>, !graph.tensor<4x3xf32>) -> !graph.tensor<4x3xf32>
    %t = tensor.compute(%p, %q) {
    ^bb0(%i: i64, %j: i64):
      %x = tensor.read %p[%i, %j] : !graph.tensor<4x3xf32>
      %y = tensor.read %q[%i, %j] : !graph.tensor<4x3xf32>
      %m = arith.addf %x, %y : f32
      tensor.yield %m : f32
    } : (!graph.tensor<4x3xf32>, !graph.tensor<4x3xf32>) -> !graph.tensor<4x3xf32>
    tensor.return %s, %t : !graph.tensor<4x3xf32>, !graph.tensor<4x3xf32>
}

// A product of another shape is no other's: it stays in place.
// CHECK-LABEL: loop.func @other_shape(
// CHECK-NOT:     loop.call
// CHECK:         loop.for
// CHECK:           loop.for
// CHECK:             loop.for
// CHECK:               arith.mulf
// CHECK:         loop.return
tensor.func @other_shape(%a: !graph.tensor<4x5xf32>, %b: !graph.tensor<5x2xf32>) -> !graph.tensor<4x2xf32> {
    %p = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<4x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x2xf32>
      %m = arith.mulf %x, %y : f32
      tensor.yield %m : f32
    } : (!graph.tensor<4x5xf32>, !graph.tensor<5x2xf32>) -> !graph.tensor<4x2xf32>
    tensor.return %p : !graph.tensor<4x2xf32>
}

// CHECK-LABEL: loop.func @same_product_elsewhere(
// CHECK-SAME:    %[[A:.*]]: memref<4x5xf32>, %[[B:.*]]: memref<5x3xf32>, %[[OUT:.*]]: memref<4x3xf32>) {
// CHECK-NEXT:    loop.call @two_products.kernel0(%[[OUT]], %[[A]], %[[B]])
// CHECK-NEXT:    loop.return

// CHECK-LABEL: loop.func @two_products.kernel0(
// CHECK-SAME:    %[[OUT:.*]]: memref<4x3xf32>, %[[A:.*]]: memref<4x5xf32>, %[[B:.*]]: memref<5x3xf32>) attributes {dlc.kernel} {
// CHECK:         loop.for
// CHECK:               loop.load %[[A]]
// CHECK:               loop.load %[[B]]
// CHECK:               arith.mulf
// CHECK:             loop.store %{{.*}}, %[[OUT]]
// CHECK:         loop.return
tensor.func @same_product_elsewhere(%a: !graph.tensor<4x5xf32>, %b: !graph.tensor<5x3xf32>) -> !graph.tensor<4x3xf32> {
    %p = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<4x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x3xf32>
      %m = arith.mulf %x, %y : f32
      tensor.yield %m : f32
    } : (!graph.tensor<4x5xf32>, !graph.tensor<5x3xf32>) -> !graph.tensor<4x3xf32>
    tensor.return %p : !graph.tensor<4x3xf32>
}
