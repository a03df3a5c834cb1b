// RUN: dlc-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Errors of the tensor dialect's custom syntax, located where the parser stopped.

// CHECK: tensor-invalid.mlir:[[# @LINE + 1]]:13: error: tensor.func: arguments and results take no attributes
tensor.func @f(%x: !graph.tensor<f32> {dlc.arg}) -> !graph.tensor<f32> {
  tensor.return %x : !graph.tensor<f32>
}

// -----

// CHECK: tensor-invalid.mlir:[[# @LINE + 2]]:24: error: tensor.constant: expected dense data
tensor.func @f() -> !graph.tensor<f32> {
  %c = tensor.constant 1.0 : f32
  tensor.return %c : !graph.tensor<f32>
}

// -----

// CHECK: tensor-invalid.mlir:[[# @LINE + 2]]:24: error: tensor.constant: no tensor of index
tensor.func @f() -> !graph.tensor<2xi64> {
  %c = tensor.constant dense<[1, 2]> : tensor<2xindex>
  tensor.return %c : !graph.tensor<2xi64>
}

// -----

// CHECK: tensor-invalid.mlir:[[# @LINE + 6]]:7: error: tensor.compute: expected one result type
tensor.func @f(%x: !graph.tensor<2xf32>) -> !graph.tensor<2xf32> {
  %y = tensor.compute(%x) {
  ^bb0(%i: i64):
    %v = tensor.read %x[%i] : !graph.tensor<2xf32>
    tensor.yield %v : f32
  } : (!graph.tensor<2xf32>) -> (!graph.tensor<2xf32>, !graph.tensor<2xf32>)
  tensor.return %y : !graph.tensor<2xf32>
}

// -----

// CHECK: tensor-invalid.mlir:[[# @LINE + 4]]:31: error: tensor.read: expected a tensor type, got memref<2xf32>
tensor.func @f(%x: !graph.tensor<2xf32>) -> !graph.tensor<2xf32> {
  %y = tensor.compute(%x) {
  ^bb0(%i: i64):
    %v = tensor.read %x[%i] : memref<2xf32>
    tensor.yield %v : f32
  } : (!graph.tensor<2xf32>) -> !graph.tensor<2xf32>
  tensor.return %y : !graph.tensor<2xf32>
}
