// RUN: dlc-opt %s -p 'lower-loop-to-llvm{profile=true}' | filecheck %s
// RUN: dlc-opt %s -p 'lower-loop-to-llvm' | filecheck %s --check-prefix=OFF

builtin.module attributes {dlc.name = "profile", dlc.stage = "raw"} {

// A function's call and each of its top-level nests are bracketed by clock reads whose
// events go to the buffer @_dlc_profile points to; the module describes the kernels.
// CHECK:       dlc.profile = "[{\22name\22: \22nest_between_marks\22, \22kind\22: \22function\22
// CHECK-LABEL: llvm.func @dlc.fn.nest_between_marks(
// CHECK:         llvm.call @clock_gettime
// CHECK:         llvm.mlir.addressof @_dlc_profile
// CHECK:         llvm.call @clock_gettime
// CHECK:         llvm.load
// CHECK:         llvm.fmul
// CHECK:         llvm.call @clock_gettime
// CHECK:         llvm.call @clock_gettime
// CHECK:         llvm.return
// CHECK:       llvm.mlir.global common @_dlc_profile
// Without profile, no marks and no buffer.
// OFF-NOT:     clock_gettime
// OFF-NOT:     _dlc_profile
  loop.func @nest_between_marks(%x: memref<8xf32>, %y: memref<8xf32>) {
    %lb = arith.constant 0 : i64
    %ub = arith.constant 8 : i64
    %st = arith.constant 1 : i64
    %two = arith.constant 2.0 : f32
    loop.for %i = %lb to %ub step %st {
      %v = loop.load %x[%i] : memref<8xf32>
      %w = arith.mulf %v, %two : f32
      loop.store %w, %y[%i] : memref<8xf32>
    }
    loop.return
  }
}
