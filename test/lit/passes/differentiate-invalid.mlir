// RUN: dlc-opt %s -p differentiate --split-input-file --verify-diagnostics | filecheck %s

// Located diagnostics of the differentiate pass on MLIR input, whose blocks may have no
// names: the loop diagnostic names the block as the printer does ('bb1), never 'None.

// CHECK: differentiate-invalid.mlir:[[# @LINE + 6]]:5: error: cannot differentiate @loop: the branch to 'bb1 closes a loop; loops are not supported by autodiff yet
builtin.module attributes {dlc.name = "m", dlc.stage = "raw"} {
  "graph.func"() <{sym_name = "loop", function_type = !graph.fn<[!graph.tensor<f32>, !graph.tensor<bool>], !graph.tensor<f32>>}> ({
  ^entry(%x: !graph.tensor<f32>, %c: !graph.tensor<bool>):
    "graph.branch"()[^bb1] : () -> ()
  ^bb1:
    "graph.conditional"(%c)[^bb1, ^bb2] <{operandSegmentSizes = array<i32: 1, 0, 0>}> : (!graph.tensor<bool>) -> ()
  ^bb2:
    "graph.return"(%x) : (!graph.tensor<f32>) -> ()
  }) : () -> ()
  "graph.func"() <{sym_name = "dloop", function_type = !graph.fn<[!graph.tensor<f32>, !graph.tensor<bool>], !graph.tuple<!graph.tensor<f32>>>, decl = "adjoint", primal = "loop", wrt = [#builtin.int<0>]}> ({
  }) : () -> ()
}
