// RUN: dlc-opt %s -p 'lower-loop-to-llvm{outline=true}' | filecheck %s
// RUN: dlc-opt %s -p 'lower-loop-to-llvm' | filecheck %s --check-prefix=OFF

builtin.module attributes {dlc.name = "outline", dlc.stage = "raw"} {

// Nests alike up to their buffers (here in two functions) become one internal noinline
// kernel, called with each nest's own buffers; the kernel recomputes the constants.
// CHECK-LABEL: llvm.func @dlc.fn.alike_nests_share_a_kernel(
// CHECK-SAME:    %[[CTX:[^:]*]]: !llvm.ptr {llvm.noalias}, %[[X:[^:]*]]: !llvm.ptr {llvm.noalias}, %[[Y:[^:]*]]: !llvm.ptr {llvm.noalias}, %[[Z:[^:]*]]: !llvm.ptr {llvm.noalias})
// CHECK:         llvm.call @dlc.fn.alike_nests_share_a_kernel.kernel0(%[[CTX]], %[[X]], %[[Y]])
// CHECK:         llvm.call @dlc.fn.alike_nests_share_a_kernel.kernel0(%[[CTX]], %[[Y]], %[[Z]])
// CHECK-NOT:     llvm.call @dlc.fn.alike_nests_share_a_kernel.kernel
// CHECK:         llvm.return
// CHECK-LABEL: llvm.func @dlc.fn.another_function(
// CHECK-SAME:    %[[CTX2:[^:]*]]: !llvm.ptr {llvm.noalias}, %[[A:[^:]*]]: !llvm.ptr {llvm.noalias}, %[[B:[^:]*]]: !llvm.ptr {llvm.noalias})
// CHECK:         llvm.call @dlc.fn.alike_nests_share_a_kernel.kernel0(%[[CTX2]], %[[A]], %[[B]])
// OFF-NOT:     .kernel0
  loop.func @alike_nests_share_a_kernel(%x: memref<8xf32>, %y: memref<8xf32>, %z: memref<8xf32>) {
    %lb = arith.constant 0 : i64
    %ub = arith.constant 8 : i64
    %st = arith.constant 1 : i64
    %two = arith.constant 2.0 : f32
    loop.for %i = %lb to %ub step %st {
      %v = loop.load %x[%i] : memref<8xf32>
      %w = arith.mulf %v, %two : f32
      %u = arith.addf %w, %v : f32
      %t = arith.mulf %u, %u : f32
      %q = arith.subf %t, %v : f32
      loop.store %q, %y[%i] : memref<8xf32>
    }
    loop.for %j = %lb to %ub step %st {
      %v = loop.load %y[%j] : memref<8xf32>
      %w = arith.mulf %v, %two : f32
      %u = arith.addf %w, %v : f32
      %t = arith.mulf %u, %u : f32
      %q = arith.subf %t, %v : f32
      loop.store %q, %z[%j] : memref<8xf32>
    }
    loop.return
  }
  loop.func @another_function(%a: memref<8xf32>, %b: memref<8xf32>) {
    %c0 = arith.constant 0 : i64
    %c8 = arith.constant 8 : i64
    %c1 = arith.constant 1 : i64
    %c2 = arith.constant 2.0 : f32
    loop.for %i = %c0 to %c8 step %c1 {
      %v = loop.load %a[%i] : memref<8xf32>
      %w = arith.mulf %v, %c2 : f32
      %u = arith.addf %w, %v : f32
      %t = arith.mulf %u, %u : f32
      %q = arith.subf %t, %v : f32
      loop.store %q, %b[%i] : memref<8xf32>
    }
    loop.return
  }

// Nests that differ in a constant, a nest that reads a scalar computed outside it,
// and nests that read and write planned buffers sharing bytes (in place: their
// pointers cannot be `noalias` arguments) stay where they are.
// CHECK-LABEL: llvm.func @dlc.fn.different_nests_stay(
// CHECK-NOT:     llvm.call
// CHECK:         llvm.return
  loop.func @different_nests_stay(%x: memref<8xf32>, %y: memref<8xf32>, %z: memref<8xf32>) {
    %lb = arith.constant 0 : i64
    %ub = arith.constant 8 : i64
    %st = arith.constant 1 : i64
    %four = arith.constant 4.0 : f32
    %three = arith.constant 3.0 : f32
    loop.for %i = %lb to %ub step %st {
      %v = loop.load %x[%i] : memref<8xf32>
      %w = arith.mulf %v, %four : f32
      %u = arith.addf %w, %v : f32
      %t = arith.mulf %u, %u : f32
      %q = arith.subf %t, %v : f32
      loop.store %q, %y[%i] : memref<8xf32>
    }
    loop.for %j = %lb to %ub step %st {
      %v = loop.load %y[%j] : memref<8xf32>
      %w = arith.mulf %v, %three : f32
      %u = arith.addf %w, %v : f32
      %t = arith.mulf %u, %u : f32
      %q = arith.subf %t, %v : f32
      loop.store %q, %z[%j] : memref<8xf32>
    }
    loop.return
  }
  loop.func @scalar_from_outside_stays(%x: memref<8xf32>, %y: memref<8xf32>, %z: memref<8xf32>) {
    %lb = arith.constant 0 : i64
    %ub = arith.constant 8 : i64
    %st = arith.constant 1 : i64
    %s = loop.load %x[%lb] : memref<8xf32>
    loop.for %i = %lb to %ub step %st {
      %v = loop.load %x[%i] : memref<8xf32>
      %w = arith.mulf %v, %s : f32
      %u = arith.addf %w, %v : f32
      %t = arith.mulf %u, %u : f32
      %q = arith.subf %t, %v : f32
      loop.store %q, %y[%i] : memref<8xf32>
    }
    loop.for %j = %lb to %ub step %st {
      %v = loop.load %y[%j] : memref<8xf32>
      %w = arith.mulf %v, %s : f32
      %u = arith.addf %w, %v : f32
      %t = arith.mulf %u, %u : f32
      %q = arith.subf %t, %v : f32
      loop.store %q, %z[%j] : memref<8xf32>
    }
    loop.return
  }
  loop.func @in_place_stays(%x: memref<8xf32>, %z: memref<8xf32>) attributes {dlc.arena_bytes = #builtin.int<64>} {
    %lb = arith.constant 0 : i64
    %ub = arith.constant 8 : i64
    %st = arith.constant 1 : i64
    %two = arith.constant 2.0 : f32
    %a = loop.alloc {arena_offset = #builtin.int<0>} : memref<8xf32>
    %b = loop.alloc {arena_offset = #builtin.int<0>} : memref<8xf32>
    loop.for %i = %lb to %ub step %st {
      %v = loop.load %x[%i] : memref<8xf32>
      %w = arith.mulf %v, %two : f32
      %u = arith.addf %w, %v : f32
      %t = arith.mulf %u, %u : f32
      %q = arith.subf %t, %v : f32
      loop.store %q, %a[%i] : memref<8xf32>
    }
    loop.for %j = %lb to %ub step %st {
      %v = loop.load %a[%j] : memref<8xf32>
      %w = arith.mulf %v, %two : f32
      %u = arith.addf %w, %v : f32
      %t = arith.mulf %u, %u : f32
      %q = arith.subf %t, %v : f32
      loop.store %q, %b[%j] : memref<8xf32>
    }
    loop.for %k = %lb to %ub step %st {
      %v = loop.load %b[%k] : memref<8xf32>
      %w = arith.mulf %v, %two : f32
      %u = arith.addf %w, %v : f32
      %t = arith.mulf %u, %u : f32
      %q = arith.subf %t, %v : f32
      loop.store %q, %z[%k] : memref<8xf32>
    }
    loop.return
  }
// CHECK-LABEL: llvm.func @dlc.fn.scalar_from_outside_stays(
// CHECK-NOT:     llvm.call
// CHECK:         llvm.return
// The first and last nests of @in_place_stays use buffers that do not overlap: they
// share a kernel with @alike_nests_share_a_kernel's; the middle one reads and writes
// the same bytes and stays.
// CHECK-LABEL: llvm.func @dlc.fn.in_place_stays(
// CHECK:         llvm.call @dlc.fn.alike_nests_share_a_kernel.kernel0(
// CHECK-NOT:     llvm.call
// CHECK:         llvm.fmul
// CHECK:         llvm.call @dlc.fn.alike_nests_share_a_kernel.kernel0(

// Read-only data whose elements are all equal (a constant fill) is recomputed in the
// kernel like a constant, where LLVM can fold its loads: two nests reading the same
// fill share a kernel that holds it. Kernels come last, one per group.
// CHECK-LABEL: llvm.func @dlc.fn.fills_are_constants(
// CHECK-SAME:    %[[FCTX:[^:]*]]: !llvm.ptr {llvm.noalias}, %[[FX:[^:]*]]: !llvm.ptr {llvm.noalias}, %[[FY:[^:]*]]: !llvm.ptr {llvm.noalias}, %[[FZ:[^:]*]]: !llvm.ptr {llvm.noalias})
// CHECK:         llvm.call @dlc.fn.fills_are_constants.kernel{{[0-9]+}}(%[[FCTX]], %[[FX]], %[[FY]])
// CHECK:         llvm.call @dlc.fn.fills_are_constants.kernel{{[0-9]+}}(%[[FCTX]], %[[FY]], %[[FZ]])
  loop.func @fills_are_constants(%x: memref<8xf32>, %y: memref<8xf32>, %z: memref<8xf32>) {
    %lb = arith.constant 0 : i64
    %ub = arith.constant 8 : i64
    %st = arith.constant 1 : i64
    %w = loop.const_buffer dense<5.000000e-01> : tensor<8xf32> : memref<8xf32>
    loop.for %i = %lb to %ub step %st {
      %v = loop.load %x[%i] : memref<8xf32>
      %c = loop.load %w[%i] : memref<8xf32>
      %u = arith.addf %c, %v : f32
      %t = arith.mulf %u, %u : f32
      %q = arith.subf %t, %v : f32
      loop.store %q, %y[%i] : memref<8xf32>
    }
    loop.for %j = %lb to %ub step %st {
      %v = loop.load %y[%j] : memref<8xf32>
      %c = loop.load %w[%j] : memref<8xf32>
      %u = arith.addf %c, %v : f32
      %t = arith.mulf %u, %u : f32
      %q = arith.subf %t, %v : f32
      loop.store %q, %z[%j] : memref<8xf32>
    }
    loop.return
  }
// CHECK:       llvm.func internal @dlc.fn.alike_nests_share_a_kernel.kernel0(
// CHECK-SAME:    attributes {{.*}}no_inline
// CHECK:       llvm.func internal @dlc.fn.fills_are_constants.kernel0(
// CHECK-SAME:    attributes {{.*}}no_inline
// CHECK:         llvm.mlir.global internal constant
// CHECK-NOT:   llvm.func internal @dlc.fn.{{.*}}kernel
}
