// RUN: dlc-opt %s -p lower-loop-to-llvm > %t.1
// RUN: filecheck %s < %t.1
// RUN: dlc-opt -f mlir < %t.1 | filecheck %s
// RUN: dlc-opt %s -p lower-loop-to-llvm -t llvm | filecheck %s --check-prefix=IR

// Lane-wise compares and selects lower to `llvm.fcmp` / `llvm.select` on whole vectors
// (MLIR's forms; dlc's llvm dialect accepts them where xDSL's takes scalars only), so
// the lowered module verifies, prints and reads back.
builtin.module attributes {dlc.name = "lanes", dlc.stage = "raw"} {
// CHECK-LABEL: llvm.func @dlc.fn.masks(
// CHECK:         %[[M:.*]] = llvm.fcmp "olt" %[[A:.*]], %[[B:.*]] : vector<4xf32>
// CHECK:         llvm.select %[[M]], %[[A]], %[[B]] : vector<4xi1>, vector<4xf32>
// IR:            fcmp olt <4 x float>
// IR:            select <4 x i1>
  loop.func @masks(%x: memref<8xf32>) {
    %i = arith.constant 0 : i64
    %j = arith.constant 4 : i64
    %a = loop.vload %x[%i] : memref<8xf32> -> vector<4xf32>
    %b = loop.vload %x[%j] : memref<8xf32> -> vector<4xf32>
    %m = loop.vcmpf olt, %a, %b : vector<4xf32>
    %r = loop.vselect %m, %a, %b : vector<4xf32>
    loop.vstore %r, %x[%i] : vector<4xf32>, memref<8xf32>
    loop.return
  }
}
