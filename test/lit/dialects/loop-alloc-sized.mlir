// RUN: dlc-opt %s -f mlir | filecheck %s
// RUN: dlc-opt %s -f mlir -p lower-loop-to-llvm | filecheck %s --check-prefix=LLVM

// A buffer of a size known only at run time (symbolic dimensions), freed by loop.dealloc.

builtin.module {
  loop.func @f(%sizes: memref<1xi64>, %out: memref<?xf32>) {
    %c0 = arith.constant 0 : i64
    %n = loop.load %sizes[%c0] : memref<1xi64>
    %buf = loop.alloc_sized %n : memref<?xf32>
    loop.dealloc %buf : memref<?xf32>
    loop.return
  }
}

// CHECK:      %[[N:.*]] = loop.load %{{.*}}[%{{.*}}] : memref<1xi64>
// CHECK-NEXT: %[[B:.*]] = loop.alloc_sized %[[N]] : memref<?xf32>
// CHECK-NEXT: loop.dealloc %[[B]] : memref<?xf32>

// LLVM:       %[[BYTES:.*]] = llvm.mul %{{.*}}, %{{.*}} : i64
// LLVM:       llvm.call @aligned_alloc(%{{.*}}, %{{.*}}) : (i64, i64) -> !llvm.ptr
// LLVM:       llvm.call @free
