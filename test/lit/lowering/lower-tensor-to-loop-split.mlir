// RUN: dlc-opt %s -p lower-tensor-to-loop | filecheck %s

// `split [d0 = [4, 11]]`: the loop of d0 is three loops, over [0, 4), [4, 11) and
// [11, 16), in order, each of constant bounds, the index offset by the piece's start.

builtin.module {
// CHECK-LABEL: loop.func @pieces(
// CHECK-SAME:    %[[X:.*]]: memref<16xf32>, %[[Y:.*]]: memref<16xf32>)
// CHECK-DAG:     %[[N0:.*]] = arith.constant 4 : i64
// CHECK-DAG:     %[[N1:.*]] = arith.constant 7 : i64
// CHECK-DAG:     %[[N2:.*]] = arith.constant 5 : i64
// CHECK-DAG:     %[[S2:.*]] = arith.constant 11 : i64
// CHECK:         loop.for %[[I0:.*]] = %{{.*}} to %[[N0]] step
// CHECK-NEXT:      loop.load %[[X]][%[[I0]]]
// CHECK:         loop.for %[[I1:.*]] = %{{.*}} to %[[N1]] step
// CHECK-NEXT:      %[[J1:.*]] = arith.addi %[[I1]], %[[N0]] : i64
// CHECK-NEXT:      loop.load %[[X]][%[[J1]]]
// CHECK:         loop.for %[[I2:.*]] = %{{.*}} to %[[N2]] step
// CHECK-NEXT:      %[[J2:.*]] = arith.addi %[[I2]], %[[S2]] : i64
// CHECK-NEXT:      loop.load %[[X]][%[[J2]]]
// CHECK-NOT:     loop.for
// CHECK:         loop.return
  tensor.func @pieces(%x: !graph.tensor<16xf32>) -> !graph.tensor<16xf32> {
    %y = tensor.compute(%x) schedule #schedule.nest<split [d0 = [4, 11]]> {
    ^bb0(%j: i64):
      %v = tensor.read %x[%j] : !graph.tensor<16xf32>
      tensor.yield %v : f32
    } : (!graph.tensor<16xf32>) -> !graph.tensor<16xf32>
    tensor.return %y : !graph.tensor<16xf32>
  }
}
