// RUN: dlc-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Errors of the loop dialect's custom syntax, located where the parser stopped.

// CHECK: loop-invalid.mlir:[[# @LINE + 1]]:11: error: loop.func: arguments and results take no attributes
loop.func @f(%x: memref<f32> {llvm.noalias}) {
  loop.return
}

// -----

// CHECK: loop-invalid.mlir:[[# @LINE + 5]]:42: error: expected 1 operand types but had 2
loop.func @f(%x: memref<f32>) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %z = arith.constant 0.0 : f32
  %s = loop.for %i = %c0 to %c1 step %c1 iter_args(%a = %z, %b = %z) -> (f32) {
    loop.yield %a : f32
  }
  loop.return
}

// -----

// CHECK: loop-invalid.mlir:[[# @LINE + 3]]:3: error: IR does not verify in the input: loop.load: 1 indices for a rank-2 memref memref<2x2xf32>
loop.func @f(%x: memref<2x2xf32>) {
  %c0 = arith.constant 0 : i64
  %v = loop.load %x[%c0] : memref<2x2xf32>
  loop.return
}

// -----

// CHECK: loop-invalid.mlir:[[# @LINE + 3]]:3: error: IR does not verify in the input: loop.vload: expected a 1-D vector of f32, got vector<4xf64>
loop.func @f(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : i64
  %v = loop.vload %x[%c0] : memref<8xf32> -> vector<4xf64>
  loop.return
}

// -----

// CHECK: loop-invalid.mlir:[[# @LINE + 3]]:3: error: IR does not verify in the input: loop.broadcast: f64 cannot fill vector<4xf32>
loop.func @f(%x: memref<8xf32>) {
  %z = arith.constant 0.0 : f64
  %b = loop.broadcast %z : f64 -> vector<4xf32>
  loop.return
}

// -----

// CHECK: loop-invalid.mlir:[[# @LINE + 5]]:3: error: IR does not verify in the input: loop.shuffle: operands and result must be vectors of one type
loop.func @f(%x: memref<8xf32>, %y: memref<8xf64>) {
  %c0 = arith.constant 0 : i64
  %v = loop.vload %x[%c0] : memref<8xf32> -> vector<4xf32>
  %w = loop.vload %y[%c0] : memref<8xf64> -> vector<4xf64>
  %p = "loop.shuffle"(%v, %w) <{mask = array<i32: 0>}> : (vector<4xf32>, vector<4xf64>) -> vector<1xf32>
  loop.return
}

// -----

// CHECK: loop-invalid.mlir:[[# @LINE + 4]]:21: error: loop.shuffle: the result of 2 lanes is vector<2xf32>
loop.func @f(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : i64
  %v = loop.vload %x[%c0] : memref<8xf32> -> vector<4xf32>
  %p = loop.shuffle %v, %v [0, 1] : vector<4xf32> -> vector<1xf32>
  loop.return
}

// -----

// CHECK: loop-invalid.mlir:[[# @LINE + 4]]:3: error: IR does not verify in the input: loop.shuffle: each mask entry must be in [0, 8)
loop.func @f(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : i64
  %v = loop.vload %x[%c0] : memref<8xf32> -> vector<4xf32>
  %p = loop.shuffle %v, %v [8] : vector<4xf32> -> vector<1xf32>
  loop.return
}

// -----

// CHECK: loop-invalid.mlir:[[# @LINE + 2]]:3: error: IR does not verify in the input: loop.const_copy: data of f32 with shape (3,) does not fill memref<4xf32>
loop.func @f(%x: memref<4xf32>) {
  loop.const_copy dense<[1.0, 2.0, 3.0]> : tensor<3xf32> to %x : memref<4xf32>
  loop.return
}

// -----

// CHECK: loop-invalid.mlir:[[# @LINE + 2]]:3: error: IR does not verify in the input: loop.const_buffer: data of f64 with shape (2,) is not a memref<2xf32>
loop.func @f() {
  %t = loop.const_buffer dense<[1.0, 2.0]> : tensor<2xf64> : memref<2xf32>
  loop.return
}

// -----

// CHECK: loop-invalid.mlir:[[# @LINE + 4]]:3: error: IR does not verify in the input: loop.vcmpf: operands must be one vector type and the result its i1 mask
loop.func @f(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : i64
  %v = loop.vload %x[%c0] : memref<8xf32> -> vector<4xf32>
  %m = "loop.vcmpf"(%v, %v) <{predicate = 4 : i64}> : (vector<4xf32>, vector<4xf32>) -> vector<4xi8>
  loop.return
}

// -----

// CHECK: loop-invalid.mlir:[[# @LINE + 5]]:3: error: IR does not verify in the input: loop.vselect: the mask must be vector<4xi1>
loop.func @f(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : i64
  %v = loop.vload %x[%c0] : memref<8xf32> -> vector<4xf32>
  %b = loop.broadcast %c0 : i64 -> vector<4xi64>
  %r = "loop.vselect"(%b, %v, %v) : (vector<4xi64>, vector<4xf32>, vector<4xf32>) -> vector<4xf32>
  loop.return
}

// -----

// CHECK: loop-invalid.mlir:[[# @LINE + 4]]:19: error: loop.vcmpf: unknown predicate 'lt'
loop.func @f(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : i64
  %v = loop.vload %x[%c0] : memref<8xf32> -> vector<4xf32>
  %m = loop.vcmpf lt, %v, %v : vector<4xf32>
  loop.return
}
