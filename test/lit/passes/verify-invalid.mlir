// RUN: dlc-opt %s -p verify --split-input-file --verify-diagnostics | filecheck %s

// Graph-level IR written in MLIR syntax goes through the same verifier as `.dl` input.

// CHECK: error: add: shapes <2 x 3 x f32> and <3 x 2 x f32> are not broadcastable
builtin.module attributes {dlc.name = "m", dlc.stage = "raw"} {
  "graph.func"() <{sym_name = "f", function_type = !graph.fn<[!graph.tensor<2x3xf32>, !graph.tensor<3x2xf32>], !graph.tensor<2x3xf32>>}> ({
  ^entry(%x: !graph.tensor<2x3xf32>, %z: !graph.tensor<3x2xf32>):
    %y = "graph.add"(%x, %z) : (!graph.tensor<2x3xf32>, !graph.tensor<3x2xf32>) -> !graph.tensor<2x3xf32>
    "graph.return"(%y) : (!graph.tensor<2x3xf32>) -> ()
  }) : () -> ()
}

// -----

// CHECK: {{^}}// {{-----}}
// CHECK-NEXT: module "m"
// CHECK-NEXT: stage raw
// CHECK-EMPTY:
// CHECK-NEXT: func @g: (f32) -> f32 {
builtin.module attributes {dlc.name = "m", dlc.stage = "raw"} {
  "graph.func"() <{sym_name = "g", function_type = !graph.fn<[!graph.tensor<f32>], !graph.tensor<f32>>}> ({
  ^entry(%x: !graph.tensor<f32>):
    "graph.return"(%x) : (!graph.tensor<f32>) -> ()
  }) : () -> ()
}

// -----

// Structs in MLIR syntax may refer to later ones: a cycle of them holding each other by
// value (no enum on it to hold the recursion in boxes) is reported at the first one declared.
// CHECK: verify-invalid.mlir:[[# @LINE + 4]]:3: error: recursive type $A has infinite size: it contains itself by value through $B, $C (hold it through a pointer, a box or an enum case)
builtin.module attributes {dlc.name = "m", dlc.stage = "raw"} {
  "graph.struct"() <{sym_name = "Ok", field_names = ["a"], field_types = [!graph.ptr<!graph.nominal<"Ok", "struct">>]}> : () -> ()
  "graph.enum"() <{sym_name = "E", case_names = ["c", "d"], case_types = [[!graph.nominal<"A", "struct">], []]}> : () -> ()
  "graph.struct"() <{sym_name = "A", field_names = ["b"], field_types = [!graph.tuple<!graph.nominal<"B", "struct">>]}> : () -> ()
  "graph.struct"() <{sym_name = "B", field_names = ["c"], field_types = [!graph.array<#builtin.int<2>, !graph.nominal<"C", "struct">>]}> : () -> ()
  "graph.struct"() <{sym_name = "C", field_names = ["a", "e"], field_types = [!graph.nominal<"A", "struct">, !graph.nominal<"E", "enum">]}> : () -> ()
}

// -----

// CHECK: verify-invalid.mlir:[[# @LINE + 4]]:5: error: float literal 1e+39 is out of range for f32
builtin.module attributes {dlc.name = "m", dlc.stage = "raw"} {
  "graph.func"() <{sym_name = "f", function_type = !graph.fn<[], !graph.tensor<f32>>}> ({
  ^entry:
    %x = "graph.literal"() <{value = #graph.lit<"[\22float\22, 1e39]">}> : () -> !graph.tensor<f32>
    "graph.return"(%x) : (!graph.tensor<f32>) -> ()
  }) : () -> ()
}

// -----

// CHECK: verify-invalid.mlir:[[# @LINE + 4]]:5: error: integer literal 65520 is out of range for f16
builtin.module attributes {dlc.name = "m", dlc.stage = "raw"} {
  "graph.func"() <{sym_name = "f", function_type = !graph.fn<[], !graph.tensor<2xf16>>}> ({
  ^entry:
    %x = "graph.literal"() <{value = #graph.lit<"[\22tensor\22, [[\22float\22, 1.0], [\22int\22, 65520]]]">}> : () -> !graph.tensor<2xf16>
    "graph.return"(%x) : (!graph.tensor<2xf16>) -> ()
  }) : () -> ()
}

// -----

// CHECK: verify-invalid.mlir:[[# @LINE + 4]]:72: error: float 1e400 in #graph.lit is out of range for f64
builtin.module attributes {dlc.name = "m", dlc.stage = "raw"} {
  "graph.func"() <{sym_name = "f", function_type = !graph.fn<[], !graph.tensor<f64>>}> ({
  ^entry:
    %x = "graph.literal"() <{value = #graph.lit<"[\22float\22, 1e400]">}> : () -> !graph.tensor<f64>
    "graph.return"(%x) : (!graph.tensor<f64>) -> ()
  }) : () -> ()
}

// -----

// CHECK: verify-invalid.mlir:[[# @LINE + 2]]:3: error: array size must be non-negative, got -1
builtin.module attributes {dlc.name = "m", dlc.stage = "raw"} {
  "graph.var"() <{sym_name = "g", var_type = !graph.array<#builtin.int<-1>, !graph.tensor<f32>>}> : () -> ()
}

// -----

// CHECK: verify-invalid.mlir:[[# @LINE + 2]]:3: error: tensor type <0 x 18446744073709551616 x f32> has more than 2^40 elements in its nonzero dimensions
builtin.module attributes {dlc.name = "m", dlc.stage = "raw"} {
  "graph.var"() <{sym_name = "g", var_type = !graph.tensor<0x18446744073709551616xf32>}> : () -> ()
}

// -----

// Unnamed blocks (`^bb1` carries no name in xDSL) are not redefinitions of each other;
// diagnostics and the printer call them 'bb<index>.
// CHECK: verify-invalid.mlir:[[# @LINE + 6]]:5: error: branch: 'bb2 takes 1 arguments, got 2
builtin.module attributes {dlc.name = "m", dlc.stage = "raw"} {
  "graph.func"() <{sym_name = "f", function_type = !graph.fn<[!graph.tensor<f32>], !graph.tensor<f32>>}> ({
  ^entry(%x: !graph.tensor<f32>):
    "graph.branch"(%x)[^bb1] : (!graph.tensor<f32>) -> ()
  ^bb1(%y: !graph.tensor<f32>):
    "graph.branch"(%y, %y)[^bb2] : (!graph.tensor<f32>, !graph.tensor<f32>) -> ()
  ^bb2(%z: !graph.tensor<f32>):
    "graph.return"(%z) : (!graph.tensor<f32>) -> ()
  }) : () -> ()
}

// -----

// CHECK: func @g: (f32) -> f32 {
// CHECK-NEXT: 'entry(%x: f32):
// CHECK-NEXT:     branch 'bb1(%x: f32)
// CHECK-NEXT: 'bb1(%y: f32):
// CHECK-NEXT:     branch 'bb2(%y: f32)
// CHECK-NEXT: 'bb2(%z: f32):
// CHECK-NEXT:     return %z: f32
builtin.module attributes {dlc.name = "m", dlc.stage = "raw"} {
  "graph.func"() <{sym_name = "g", function_type = !graph.fn<[!graph.tensor<f32>], !graph.tensor<f32>>}> ({
  ^entry(%x: !graph.tensor<f32>):
    "graph.branch"(%x)[^bb1] : (!graph.tensor<f32>) -> ()
  ^bb1(%y: !graph.tensor<f32>):
    "graph.branch"(%y)[^bb2] : (!graph.tensor<f32>) -> ()
  ^bb2(%z: !graph.tensor<f32>):
    "graph.return"(%z) : (!graph.tensor<f32>) -> ()
  }) : () -> ()
}

// -----

// Generated code names its functions and variables 'dlc:...' (the box retain/release of
// recursive enums): a program's own names cannot take them.
// CHECK: verify-invalid.mlir:[[# @LINE + 2]]:3: error: the name @dlc:release is reserved: 'dlc:' names the compiler's own
builtin.module attributes {dlc.name = "m", dlc.stage = "raw"} {
  "graph.func"() <{sym_name = "dlc:release", function_type = !graph.fn<[!graph.tensor<i64>], !graph.tensor<i64>>}> ({
  ^entry(%x: !graph.tensor<i64>):
    "graph.return"(%x) : (!graph.tensor<i64>) -> ()
  }) : () -> ()
}
