// RUN: dlc-opt %s -p lower-tensor-to-loop | filecheck %s

// `pack [1]`: GOTO's nest (column blocks of 8, K blocks of 2, 4 x 4 register tiles)
// copies each K x column block of B into 4-wide panels of a scratch buffer (3 panels
// cover the 9 columns, 2 rows of K each) right before the row blocks: full panels by
// a constant-trip loop, the last partial panel with a clamped read and zeros past
// column 9. The microkernel then reads one panel row per k: `packed[j / 4][k - kb][j % 4]`.
// CHECK-LABEL: loop.func @gemm(
// CHECK-SAME:    %[[A:.*]]: memref<7x5xf32>, %[[B:.*]]: memref<5x9xf32>, %[[C:.*]]: memref<7x9xf32>) {
// CHECK:         %[[P:.*]] = loop.alloc : memref<3x2x4xf32>
// The parallel column-block loop peels its partial last block inside: each iteration
// branches to a full block or the remainder (not a serial block after the loop).
// CHECK:         loop.for %[[JB:.*]] = %{{.*}} to %{{.*}} step %{{.*}} parallel {
// CHECK:           %[[FULL:.*]] = arith.cmpi slt, %[[JB]], %{{.*}} : i64
// CHECK-NEXT:      loop.if %[[FULL]] {
// CHECK:           loop.for %[[KB:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// full panels: packed[p][kk][r] = B[kb + kk][p * 4 + r]
// CHECK:             loop.for %[[PF:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:          loop.for %[[KF:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:            loop.for %[[RF:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:                   %[[V:.*]] = loop.load %[[B]][%{{.*}}, %{{.*}}] : memref<5x9xf32>
// CHECK-NEXT:              loop.store %[[V]], %[[P]][%[[PF]], %[[KF]], %[[RF]]] : memref<3x2x4xf32>
// the partial panel: a clamped column, zero past the end
// CHECK:             loop.for %[[PT:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:                   %[[COL:.*]] = arith.minsi
// CHECK:                   %[[W:.*]] = loop.load %[[B]][%{{.*}}, %[[COL]]] : memref<5x9xf32>
// CHECK:                   %[[IN:.*]] = arith.cmpi slt
// CHECK:                   %[[Z:.*]] = arith.select %[[IN]], %[[W]], %{{.*}} : f32
// CHECK-NEXT:              loop.store %[[Z]], %[[P]][%[[PT]], %{{.*}}, %{{.*}}] : memref<3x2x4xf32>
// then the row blocks, reading B only from the panels
// CHECK:             loop.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NOT:           loop.load %[[B]]
// CHECK:               %{{.*}} = arith.divui
// CHECK-NEXT:          %{{.*}} = arith.remui
// CHECK-NEXT:          %{{.*}} = arith.subi %{{.*}}, %[[KB]] : i64
// CHECK-NEXT:          %{{.*}} = loop.vload %[[P]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<3x2x4xf32> -> vector<4xf32>
// CHECK:         } else {
// the last column block (1 column) packs its panel the same way
// CHECK:           loop.store %{{.*}}, %[[P]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<3x2x4xf32>
// and, its panel being zero-padded, computes whole 4-lane vectors (no column tail),
// loading (after the first K block) and storing only the valid column of C:
// CHECK:           loop.vload %[[C]][%{{.*}}, %{{.*}}] : memref<7x9xf32> -> vector<1xf32>
// CHECK:           loop.vload %[[P]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<3x2x4xf32> -> vector<4xf32>
// CHECK:           %[[ONE:.*]] = loop.shuffle %{{.*}}, %{{.*}} [0] : vector<4xf32> -> vector<1xf32>
// CHECK-NEXT:      loop.vstore %[[ONE]], %[[C]][%{{.*}}, %{{.*}}] : vector<1xf32>, memref<7x9xf32>
// CHECK:         loop.dealloc %[[P]] : memref<3x2x4xf32>
// CHECK-NEXT:    loop.return
tensor.func @gemm(%a: !graph.tensor<7x5xf32>, %b: !graph.tensor<5x9xf32>) -> !graph.tensor<7x9xf32> {
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<tile [d0 = [4], d1 = [8, 4], r0 = [2]], interchange [d1.0, r0.0, d0.0, d1.1, r0.1, d0.1, d1.2], parallel [d1.0], unroll [d0.1, d1.2], vectorize d1.2 x 4, pack [1]> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<7x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x9xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<7x5xf32>, !graph.tensor<5x9xf32>) -> !graph.tensor<7x9xf32>
    tensor.return %c : !graph.tensor<7x9xf32>
}
