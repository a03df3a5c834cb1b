// RUN: dlc-opt %s -p 'schedule{target=haswell}' | filecheck %s

// Index-set splitting (`split`, dlc/passes/tensor/schedule_split.py): an element-wise
// nest whose body compares its last index with constants runs its last loop in pieces
// at the points where the comparisons change.

builtin.module {

// Columns 3 <= j - 1 < 10 are kept (j - 1 >= 3 changes at 4, j - 1 < 10 at 11), the
// others are 0: pieces [0, 4), [4, 11), [11, 16).
// CHECK-LABEL: tensor.func @split_window(
// CHECK:         schedule #schedule.nest<split [d1 = [4, 11]]>
  tensor.func @split_window(%x: !graph.tensor<4x16xf32>) -> !graph.tensor<4x16xf32> {
    %y = tensor.compute(%x) {
    ^bb0(%i: i64, %j: i64):
      %one = arith.constant 1 : i64
      %lo = arith.constant 3 : i64
      %hi = arith.constant 10 : i64
      %s = arith.subi %j, %one : i64
      %a = arith.cmpi sge, %s, %lo : i64
      %b = arith.cmpi slt, %s, %hi : i64
      %in = arith.andi %a, %b : i1
      %v = tensor.read %x[%i, %j] : !graph.tensor<4x16xf32>
      %z = arith.constant 0.0 : f32
      %r = arith.select %in, %v, %z : f32
      tensor.yield %r : f32
    } : (!graph.tensor<4x16xf32>) -> !graph.tensor<4x16xf32>
    tensor.return %y : !graph.tensor<4x16xf32>
  }

// Not split: the comparison is of the row index i (not the last), and a comparison
// of j with another index is not against a constant.
// CHECK-LABEL: tensor.func @no_split(
// CHECK-NOT:     split
// CHECK:         tensor.return
  tensor.func @no_split(%x: !graph.tensor<4x16xf32>) -> !graph.tensor<4x16xf32> {
    %y = tensor.compute(%x) {
    ^bb0(%i: i64, %j: i64):
      %two = arith.constant 2 : i64
      %a = arith.cmpi slt, %i, %two : i64
      %b = arith.cmpi slt, %j, %i : i64
      %in = arith.andi %a, %b : i1
      %v = tensor.read %x[%i, %j] : !graph.tensor<4x16xf32>
      %z = arith.constant 0.0 : f32
      %r = arith.select %in, %v, %z : f32
      tensor.yield %r : f32
    } : (!graph.tensor<4x16xf32>) -> !graph.tensor<4x16xf32>
    tensor.return %y : !graph.tensor<4x16xf32>
  }
}
