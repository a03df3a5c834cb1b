// RUN: dlc-opt %s -p 'lower-loop-to-llvm{split_ops=0}' | filecheck %s
// RUN: dlc-opt %s -p lower-loop-to-llvm | filecheck %s --check-prefix=WHOLE
// RUN: dlc-opt %s -p 'lower-loop-to-llvm{split_ops=0 openmp=true}' | filecheck %s --check-prefix=OMP

builtin.module attributes {dlc.name = "split", dlc.stage = "raw"} {

// Runs of top-level nests (and scalar ops) of a function over `split_ops` ops become
// internal noinline functions taking a pointer to slots (ctx, the captured values,
// room for results), the arena's base and the function's buffers, these as noalias
// arguments again; the caller calls, returns if the status word is set and reads back
// the values later ops use. A store between the nests stays in the caller and ends the
// run. Constants are not captured: the bounds stay constants.
// CHECK-LABEL: llvm.func @dlc.fn.sum_then_scale(
// CHECK-SAME:    %[[CTX:[^:]*]]: !llvm.ptr {llvm.noalias}, %[[X:[^:]*]]: !llvm.ptr {llvm.noalias}, %[[Y:[^:]*]]: !llvm.ptr {llvm.noalias})
// CHECK:         llvm.alloca %{{.*}} x i64
// CHECK:         llvm.call @dlc.fn.sum_then_scale$nest0(%[[DATA:.*]], %{{.*}}, %[[X]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// CHECK:         llvm.icmp "ne"
// CHECK:         %[[SLOT:.*]] = llvm.getelementptr inbounds %[[DATA]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK:         %[[WORD:.*]] = llvm.load %[[SLOT]] {alignment = 8 : i64} : !llvm.ptr -> i64
// CHECK:         %[[AT:.*]] = llvm.getelementptr inbounds %[[Y]][%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    llvm.store %{{.*}}, %[[AT]] {alignment = 4 : i64} : f32, !llvm.ptr
// CHECK:         llvm.call @dlc.fn.sum_then_scale$nest1(%{{.*}}, %{{.*}}, %[[X]], %[[Y]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// CHECK:       llvm.func internal @dlc.fn.sum_then_scale$nest0(%[[D:[^:]*]]: !llvm.ptr, %{{[^:]*}}: !llvm.ptr {llvm.noalias}, %{{[^:]*}}: !llvm.ptr {llvm.noalias})
// CHECK-SAME:    no_inline
// CHECK:         llvm.icmp "slt" %{{.*}}, %{{.*}} : i64
// CHECK:         llvm.fadd
// CHECK:         llvm.getelementptr inbounds %[[D]][1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK:         llvm.return
// CHECK:       llvm.func internal @dlc.fn.sum_then_scale$nest1(
// CHECK-SAME:    no_inline
// CHECK:         llvm.fmul
// WHOLE-LABEL: llvm.func @dlc.fn.sum_then_scale(
// WHOLE-NOT:     nest
// WHOLE:         llvm.return
  loop.func @sum_then_scale(%x: memref<8xf32>, %y: memref<8xf32>) {
    %lb = arith.constant 0 : i64
    %ub = arith.constant 8 : i64
    %st = arith.constant 1 : i64
    %zero = arith.constant 0.0 : f32
    %sum = loop.for %i = %lb to %ub step %st iter_args(%acc = %zero) -> (f32) {
      %v = loop.load %x[%i] : memref<8xf32>
      %a = arith.addf %acc, %v : f32
      loop.yield %a : f32
    }
    loop.store %sum, %y[%lb] : memref<8xf32>
    loop.for %j = %lb to %ub step %st {
      %v = loop.load %x[%j] : memref<8xf32>
      %w = arith.mulf %v, %sum : f32
      loop.store %w, %y[%j] : memref<8xf32>
    }
    loop.return
  }

// Parallel loops in two outlined runs (different ones: alike runs share a function)
// are outlined again, named after their run (each run's own count starts at 0: named
// after the function, both were `@two_parallel.omp0`).
// OMP-LABEL: llvm.func @dlc.fn.two_parallel(
// OMP:         llvm.func internal @dlc.fn.two_parallel$nest0(
// OMP:         llvm.func internal @dlc.fn.two_parallel$nest0$omp0(
// OMP:         llvm.func internal @dlc.fn.two_parallel$nest2(
// OMP:         llvm.func internal @dlc.fn.two_parallel$nest2$omp0(
  loop.func @two_parallel(%x: memref<8xf32>, %y: memref<8xf32>) {
    %lb = arith.constant 0 : i64
    %ub = arith.constant 8 : i64
    %st = arith.constant 1 : i64
    loop.for %i = %lb to %ub step %st parallel {
      %v = loop.load %x[%i] : memref<8xf32>
      loop.store %v, %y[%i] : memref<8xf32>
    }
    %z = loop.load %y[%lb] : memref<8xf32>
    loop.store %z, %x[%lb] : memref<8xf32>
    loop.for %j = %lb to %ub step %st parallel {
      %v = loop.load %y[%j] : memref<8xf32>
      %w = arith.addf %v, %v : f32
      loop.store %w, %x[%j] : memref<8xf32>
    }
    loop.return
  }

// A nest chosen at run time (a `loop.if` between its threaded and serial versions, as
// lower-graph-to-loop emits it over symbolic sizes) is outlined like a `loop.for`,
// with the compare before it; the load of the size stays in the caller.
// CHECK-LABEL: llvm.func @dlc.fn.chosen(
// CHECK:         llvm.load
// CHECK:         llvm.call @dlc.fn.chosen$nest0(
// CHECK:       llvm.func internal @dlc.fn.chosen$nest0(
// CHECK-SAME:    no_inline
// CHECK:         llvm.icmp "sge"
// CHECK:         llvm.cond_br
// WHOLE-LABEL: llvm.func @dlc.fn.chosen(
// WHOLE-NOT:     nest
// WHOLE:         llvm.return
  loop.func @chosen(%x: memref<8xf32>, %y: memref<8xf32>, %n: memref<1xi64>) {
    %lb = arith.constant 0 : i64
    %st = arith.constant 1 : i64
    %big = arith.constant 4 : i64
    %ub = loop.load %n[%lb] : memref<1xi64>
    %many = arith.cmpi sge, %ub, %big : i64
    loop.if %many {
      loop.for %i = %lb to %ub step %st parallel {
        %v = loop.load %x[%i] : memref<8xf32>
        loop.store %v, %y[%i] : memref<8xf32>
      }
    } else {
      loop.for %i = %lb to %ub step %st {
        %v = loop.load %x[%i] : memref<8xf32>
        loop.store %v, %y[%i] : memref<8xf32>
      }
    }
    loop.return
  }
}
