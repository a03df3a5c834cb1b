// RUN: dlc-opt %s -p lower-tensor-to-loop | filecheck %s

builtin.module attributes {dlc.name = "lower_tensor_to_loop", dlc.stage = "raw"} {

// A returned compute writes straight into the output buffer; the intermediate is
// allocated and freed; output loops are parallel where the schedule says so.
// CHECK-LABEL: loop.func @exp_log(
// CHECK-SAME:    %[[X:.*]]: memref<2x3xf32>, %[[OUT:.*]]: memref<2x3xf32>) {
// CHECK:         %[[TMP:.*]] = loop.alloc : memref<2x3xf32>
// CHECK:         loop.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} parallel {
// CHECK:           loop.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} parallel {
// CHECK:             %[[V:.*]] = loop.load %[[X]][%[[I]], %[[J]]] : memref<2x3xf32>
// CHECK-NEXT:        %[[E:.*]] = math.exp %[[V]] : f32
// CHECK-NEXT:        loop.store %[[E]], %[[TMP]][%[[I]], %[[J]]] : memref<2x3xf32>
// CHECK:         loop.for %[[I2:.*]] = %{{.*}} to %{{.*}} step %{{.*}} parallel {
// CHECK:           loop.for %[[J2:.*]] = %{{.*}} to %{{.*}} step %{{.*}} parallel {
// CHECK:             %[[W:.*]] = loop.load %[[TMP]][%[[I2]], %[[J2]]] : memref<2x3xf32>
// CHECK-NEXT:        %[[L:.*]] = math.log %[[W]] : f32
// CHECK-NEXT:        loop.store %[[L]], %[[OUT]][%[[I2]], %[[J2]]] : memref<2x3xf32>
// CHECK:         loop.dealloc %[[TMP]] : memref<2x3xf32>
// CHECK-NEXT:    loop.return
  tensor.func @exp_log(%x: !graph.tensor<2x3xf32>) -> !graph.tensor<2x3xf32> {
    %e = tensor.compute(%x) schedule #schedule.nest<parallel [d0, d1]> {
    ^bb0(%i: i64, %j: i64):
      %v = tensor.read %x[%i, %j] : !graph.tensor<2x3xf32>
      %r = math.exp %v : f32
      tensor.yield %r : f32
    } : (!graph.tensor<2x3xf32>) -> !graph.tensor<2x3xf32>
    %l = tensor.compute(%e) schedule #schedule.nest<parallel [d0, d1]> {
    ^bb0(%i2: i64, %j2: i64):
      %w = tensor.read %e[%i2, %j2] : !graph.tensor<2x3xf32>
      %s = math.log %w : f32
      tensor.yield %s : f32
    } : (!graph.tensor<2x3xf32>) -> !graph.tensor<2x3xf32>
    tensor.return %l : !graph.tensor<2x3xf32>
  }

// A reduction is an inner loop carrying the accumulator, started at init_value; a float
// add over the contiguous innermost axis may be reassociated (vectorized).
// CHECK-LABEL: loop.func @row_sum(
// CHECK:         loop.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} parallel {
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK:           %[[SUM:.*]] = loop.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[ZERO]]) -> (f64) {
// CHECK-NEXT:        %[[V:.*]] = loop.load %{{.*}}[%[[I]], %[[K]]] : memref<4x5xf64>
// CHECK-NEXT:        %[[NEXT:.*]] = arith.addf %[[ACC]], %[[V]] fastmath<reassoc> : f64
// CHECK-NEXT:        loop.yield %[[NEXT]] : f64
// CHECK:           loop.store %[[SUM]], %{{.*}}[%[[I]]] : memref<4xf64>
  tensor.func @row_sum(%x: !graph.tensor<4x5xf64>) -> !graph.tensor<4xf64> {
    %s = tensor.compute(%x) reduce [5] by "add" init 0.0 : f64 schedule #schedule.nest<parallel [d0]> {
    ^bb0(%i: i64, %k: i64):
      %v = tensor.read %x[%i, %k] : !graph.tensor<4x5xf64>
      tensor.yield %v : f64
    } : (!graph.tensor<4x5xf64>) -> !graph.tensor<4xf64>
    tensor.return %s : !graph.tensor<4xf64>
  }

// Bool tensors are i8 buffers: loads truncate to i1, stores zero-extend. A returned
// argument and a value returned twice are copied.
// CHECK-LABEL: loop.func @bools(
// CHECK-SAME:    %[[M:.*]]: memref<3xi8>, %[[O0:.*]]: memref<3xi8>, %[[O1:.*]]: memref<3xi8>, %[[O2:.*]]: memref<3xi8>) {
// CHECK:           %[[B:.*]] = loop.load %[[M]][%{{.*}}] : memref<3xi8>
// CHECK-NEXT:      %[[T:.*]] = arith.trunci %[[B]] : i8 to i1
// CHECK:           %[[N:.*]] = arith.xori %[[T]], %{{.*}} : i1
// CHECK-NEXT:      %[[Z:.*]] = arith.extui %[[N]] : i1 to i8
// CHECK-NEXT:      loop.store %[[Z]], %[[O0]][%{{.*}}] : memref<3xi8>
// CHECK:         loop.copy %[[M]] to %[[O1]] : memref<3xi8> to memref<3xi8>
// CHECK-NEXT:    loop.copy %[[O0]] to %[[O2]] : memref<3xi8> to memref<3xi8>
// CHECK-NOT:     loop.alloc
// CHECK:         loop.return
  tensor.func @bools(%m: !graph.tensor<3xbool>) -> (!graph.tensor<3xbool>, !graph.tensor<3xbool>, !graph.tensor<3xbool>) {
    %n = tensor.compute(%m) {
    ^bb0(%i: i64):
      %v = tensor.read %m[%i] : !graph.tensor<3xbool>
      %t = arith.constant true
      %r = arith.xori %v, %t : i1
      tensor.yield %r : i1
    } : (!graph.tensor<3xbool>) -> !graph.tensor<3xbool>
    tensor.return %n, %m, %n : !graph.tensor<3xbool>, !graph.tensor<3xbool>, !graph.tensor<3xbool>
  }

// A fusion group's element-wise member with loops of its own, vectorized: the row's
// sum, an earlier member's value in a register, is broadcast to the lanes.
// CHECK-LABEL: loop.func @group_vector(
// CHECK:         loop.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} parallel {
// CHECK:           %[[S:.*]] = loop.for %{{.*}} iter_args
// CHECK:           loop.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:        %[[V:.*]] = loop.vload %{{.*}}[%[[I]], %[[J]]] : memref<2x8xf32> -> vector<4xf32>
// CHECK-NEXT:        %[[SV:.*]] = loop.broadcast %[[S]] : f32 -> vector<4xf32>
// CHECK-NEXT:        %[[D:.*]] = arith.subf %[[V]], %[[SV]] : vector<4xf32>
// CHECK-NEXT:        loop.vstore %[[D]], %{{.*}}[%[[I]], %[[J]]] : vector<4xf32>, memref<2x8xf32>
  tensor.func @group_vector(%x: !graph.tensor<2x8xf32>) -> !graph.tensor<2x8xf32> {
    %s = tensor.compute(%x) reduce [8] by "add" init 0.0 : f32 schedule #schedule.nest<parallel [d0], group 0 at 1 internal> {
    ^bb0(%i: i64, %k: i64):
      %v = tensor.read %x[%i, %k] : !graph.tensor<2x8xf32>
      tensor.yield %v : f32
    } : (!graph.tensor<2x8xf32>) -> !graph.tensor<2xf32>
    %d = tensor.compute(%x, %s) schedule #schedule.nest<tile [d1 = [8]], interchange [d0, d1.0, d1.1], parallel [d0], unroll [d1.1], vectorize d1.1 x 4, group 0 at 1> {
    ^bb0(%i: i64, %j: i64):
      %v = tensor.read %x[%i, %j] : !graph.tensor<2x8xf32>
      %m = tensor.read %s[%i] : !graph.tensor<2xf32>
      %r = arith.subf %v, %m : f32
      tensor.yield %r : f32
    } : (!graph.tensor<2x8xf32>, !graph.tensor<2xf32>) -> !graph.tensor<2x8xf32>
    tensor.return %d : !graph.tensor<2x8xf32>
  }

// A vectorized register tile: 2 rows x 8 columns as 2 x 2 vectors of 4 lanes, carried
// through the K loop; A's element is loaded once per row and broadcast, B's row is a
// vector load; the partial last panel (2 columns of 10) is one narrower vector of 2
// lanes per row (no scalar cliff).
// CHECK-LABEL: loop.func @tile(
// CHECK:         %[[Z:.*]] = loop.broadcast %{{.*}} : f32 -> vector<4xf32>
// CHECK:         loop.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[Z]], %{{.*}} = %[[Z]], %{{.*}} = %[[Z]], %{{.*}} = %[[Z]]) -> (vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>) {
// CHECK:           %[[A:.*]] = loop.load %{{.*}}[%{{.*}}, %[[K]]] : memref<4x6xf32>
// CHECK-NEXT:      %[[B:.*]] = loop.vload %{{.*}}[%[[K]], %{{.*}}] : memref<6x10xf32> -> vector<4xf32>
// CHECK-NEXT:      %[[AV:.*]] = loop.broadcast %[[A]] : f32 -> vector<4xf32>
// CHECK-NEXT:      %[[P:.*]] = arith.mulf %[[AV]], %[[B]] : vector<4xf32>
// CHECK-NEXT:      %{{.*}} = arith.addf %{{.*}}, %[[P]] : vector<4xf32>
// CHECK:         loop.vstore %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : vector<4xf32>, memref<4x10xf32>
// CHECK:         %[[Z2:.*]] = loop.broadcast %{{.*}} : f32 -> vector<2xf32>
// CHECK:         loop.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[Z2]], %{{.*}} = %[[Z2]]) -> (vector<2xf32>, vector<2xf32>) {
// CHECK:           loop.vload %{{.*}}[%{{.*}}, %{{.*}}] : memref<6x10xf32> -> vector<2xf32>
// CHECK:         loop.vstore %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : vector<2xf32>, memref<4x10xf32>
  tensor.func @tile(%a: !graph.tensor<4x6xf32>, %w: !graph.tensor<6x10xf32>) -> !graph.tensor<4x10xf32> {
    %c = tensor.compute(%a, %w) reduce [6] by "add" init 0.000000e+00 : f32 schedule #schedule.nest<tile [d0 = [2], d1 = [8]], interchange [d0.0, d1.0, r0, d0.1, d1.1], unroll [d0.1, d1.1], vectorize d1.1 x 4> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<4x6xf32>
      %y = tensor.read %w[%k, %j] : !graph.tensor<6x10xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<4x6xf32>, !graph.tensor<6x10xf32>) -> !graph.tensor<4x10xf32>
    tensor.return %c : !graph.tensor<4x10xf32>
  }
// A vectorized element-wise nest stores every lane of its vectors: 10 columns as a
// vector of 8 and one of 2 (regression: all but lane 0 were dropped by a one-lane
// shuffle before the store).
// CHECK-LABEL: loop.func @vector_rows(
// CHECK-NOT:     loop.shuffle
// CHECK:         %[[V:.*]] = loop.vload %{{.*}}[%{{.*}}, %{{.*}}] : memref<3x10xf32> -> vector<8xf32>
// CHECK-NEXT:    %[[S:.*]] = arith.addf %[[V]], %[[V]] : vector<8xf32>
// CHECK-NEXT:    loop.vstore %[[S]], %{{.*}}[%{{.*}}, %{{.*}}] : vector<8xf32>, memref<3x10xf32>
// CHECK:         loop.vstore %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : vector<2xf32>, memref<3x10xf32>
// CHECK-NOT:     loop.shuffle
// CHECK:         loop.return
  tensor.func @vector_rows(%a: !graph.tensor<3x10xf32>) -> !graph.tensor<3x10xf32> {
    %c = tensor.compute(%a) schedule #schedule.nest<tile [d1 = [10]], interchange [d0, d1.0, d1.1], unroll [d1.1], vectorize d1.1 x 8> {
    ^bb0(%i: i64, %j: i64):
      %x = tensor.read %a[%i, %j] : !graph.tensor<3x10xf32>
      %y = arith.addf %x, %x : f32
      tensor.yield %y : f32
    } : (!graph.tensor<3x10xf32>) -> !graph.tensor<3x10xf32>
    tensor.return %c : !graph.tensor<3x10xf32>
  }
// K blocks outside the register tile: no nest sets the output to 0 first; the chain
// of the first K block starts from 0, later ones from the partial sums in the buffer.
// CHECK-LABEL: loop.func @kblocks(
// CHECK-NOT:     loop.store
// CHECK:         loop.for %[[KB:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:           %[[FIRST:.*]] = arith.cmpi eq, %{{.*}}, %{{.*}} : i64
// CHECK:           %[[OLD:.*]] = loop.vload %{{.*}}[%{{.*}}, %{{.*}}] : memref<2x4xf32> -> vector<4xf32>
// CHECK:           %{{.*}} = arith.select %[[FIRST]], %{{.*}}, %[[OLD]] : vector<4xf32>
  tensor.func @kblocks(%a: !graph.tensor<2x8xf32>, %w: !graph.tensor<8x4xf32>) -> !graph.tensor<2x4xf32> {
    %c = tensor.compute(%a, %w) reduce [8] by "add" init 0.000000e+00 : f32 schedule #schedule.nest<tile [r0 = [4]], interchange [r0.0, d0, r0.1, d1], unroll [d1], vectorize d1 x 4> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<2x8xf32>
      %y = tensor.read %w[%k, %j] : !graph.tensor<8x4xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<2x8xf32>, !graph.tensor<8x4xf32>) -> !graph.tensor<2x4xf32>
    tensor.return %c : !graph.tensor<2x4xf32>
  }
}
