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

// -----

// A `#graph.lit` payload of the wrong shape was an internal IndexError in the literal check.
// CHECK: mlir-invalid-attributes.mlir:[[# @LINE + 4]]:{{[0-9]+}}: error: malformed #graph.lit payload
builtin.module attributes {dlc.name = "m", dlc.stage = "raw"} {
  "graph.func"() <{sym_name = "f", function_type = !graph.fn<[], !graph.tensor<f32>>}> ({
  ^entry:
    %x = "graph.literal"() <{value = #graph.lit<"[\22int\22]">}> : () -> !graph.tensor<f32>
    "graph.return"(%x) : (!graph.tensor<f32>) -> ()
  }) : () -> ()
}

// -----

// CHECK: mlir-invalid-attributes.mlir:[[# @LINE + 4]]:5: error: literal element refers to operand 18446744073709551616, but the literal has 1
builtin.module attributes {dlc.name = "m", dlc.stage = "raw"} {
  "graph.func"() <{sym_name = "f", function_type = !graph.fn<[!graph.tensor<f32>], !graph.tuple<!graph.tensor<f32>>>}> ({
  ^entry(%a: !graph.tensor<f32>):
    %x = "graph.literal"(%a) <{value = #graph.lit<"[\22tuple\22, [[\22operand\22, 18446744073709551616]]]">}> : (!graph.tensor<f32>) -> !graph.tuple<!graph.tensor<f32>>
    "graph.return"(%x) : (!graph.tuple<!graph.tensor<f32>>) -> ()
  }) : () -> ()
}

// -----

// CHECK: mlir-invalid-attributes.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: graph tensor dimensions must be static
builtin.module attributes {dlc.name = "m", dlc.stage = "raw"} {
  "graph.var"() <{sym_name = "g", var_type = !graph.tensor<?x3xf32>}> : () -> ()
}

// -----

// A dense payload whose base64 is malformed, or whose bytes do not fill the type.
// CHECK: mlir-invalid-attributes.mlir:[[# @LINE + 4]]:{{[0-9]+}}: error: malformed #graph.lit payload
builtin.module attributes {dlc.name = "m", dlc.stage = "raw"} {
  "graph.func"() <{sym_name = "f", function_type = !graph.fn<[], !graph.tensor<2xf32>>}> ({
  ^entry:
    %x = "graph.literal"() <{value = #graph.lit<"[\22dense\22, {\22base64\22: \22AAA!\22}]">}> : () -> !graph.tensor<2xf32>
    "graph.return"(%x) : (!graph.tensor<2xf32>) -> ()
  }) : () -> ()
}

// -----

// CHECK: mlir-invalid-attributes.mlir:[[# @LINE + 4]]:5: error: dense literal has 4 bytes, <2 x f32> takes 8
builtin.module attributes {dlc.name = "m", dlc.stage = "raw"} {
  "graph.func"() <{sym_name = "f", function_type = !graph.fn<[], !graph.tensor<2xf32>>}> ({
  ^entry:
    %x = "graph.literal"() <{value = #graph.lit<"[\22dense\22, {\22base64\22: \22AACAPw==\22}]">}> : () -> !graph.tensor<2xf32>
    "graph.return"(%x) : (!graph.tensor<2xf32>) -> ()
  }) : () -> ()
}
