// RUN: dlc-opt %s --split-input-file --verify-diagnostics | filecheck %s

// An attribute or type that does not verify while MLIR input is parsed is located at
// the op it is in (it was one unlocated line, "dlc-opt: error: ...").

// CHECK: mlir-invalid-attributes.mlir:[[# @LINE + 2]]:3: error: parameter 'count' does not verify: 2 : i64 should be of base attribute builtin.int
builtin.module attributes {dlc.name = "m", dlc.stage = "raw"} {
  "graph.var"() <{sym_name = "g", var_type = !graph.array<2, !graph.tensor<f32>>}> : () -> ()
}

// -----

// CHECK: mlir-invalid-attributes.mlir:[[# @LINE + 4]]:5: error: Integer value 18446744073709551616 is out of range for type i64
builtin.module {
  "loop.func"() <{sym_name = "f", function_type = () -> ()}> ({
  ^bb0:
    %0 = arith.constant 18446744073709551616 : i64
    "loop.return"() : () -> ()
  }) : () -> ()
}
