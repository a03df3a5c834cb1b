// RUN: dlc-opt %s -p 'lower-loop-to-llvm{openmp=true}' | filecheck %s
// RUN: dlc-opt %s -p lower-loop-to-llvm | filecheck %s --check-prefix=SERIAL

builtin.module attributes {dlc.name = "par", dlc.stage = "raw"} {

// A parallel loop becomes a call of GOMP_parallel on an outlined worker when the call
// context asks for more than one thread, a plain call of the worker otherwise. The
// worker runs the whole range when it is alone; in a team it takes chunks of libgomp's
// dynamic schedule until none is left (so a descheduled thread delays only its own
// chunk), then leaves the work share without waiting.
// CHECK-LABEL: llvm.func @scale(
// CHECK:         llvm.icmp "sgt" %{{.*}}, %{{.*}} : i32
// CHECK:         llvm.call @GOMP_parallel(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
// CHECK:         llvm.call @scale.omp0(%{{.*}}) : (!llvm.ptr) -> ()
// CHECK:       llvm.func internal @scale.omp0(
// CHECK:         %[[N:.*]] = llvm.call @omp_get_num_threads() : () -> i32
// CHECK:         llvm.store %{{.*}}, %[[BEGIN:.*]] {alignment = 8 : i64} : i64, !llvm.ptr
// CHECK:         %{{.*}} = llvm.call @GOMP_loop_dynamic_start(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[BEGIN]], %{{.*}}) : (i64, i64, i64, i64, !llvm.ptr, !llvm.ptr) -> i8
// CHECK:         llvm.fmul
// CHECK:         llvm.call @GOMP_loop_dynamic_next(%[[BEGIN]], %{{.*}}) : (!llvm.ptr, !llvm.ptr) -> i8
// CHECK:         llvm.call @GOMP_loop_end_nowait() : () -> ()
// CHECK:         llvm.return
// CHECK-DAG:   llvm.func @GOMP_loop_dynamic_start(i64, i64, i64, i64, !llvm.ptr, !llvm.ptr) -> i8
// CHECK-DAG:   llvm.func @GOMP_loop_end_nowait()

// Without an OpenMP runtime the loop stays in the function, serial.
// SERIAL-LABEL: llvm.func @scale(
// SERIAL-NOT:     GOMP
// SERIAL-NOT:     omp0
// SERIAL:         llvm.fmul
  loop.func @scale(%x: memref<1024xf32>, %y: memref<1024xf32>) {
    %lb = arith.constant 0 : i64
    %ub = arith.constant 1024 : i64
    %st = arith.constant 1 : i64
    loop.for %i = %lb to %ub step %st parallel {
      %v = loop.load %x[%i] : memref<1024xf32>
      %w = arith.mulf %v, %v : f32
      loop.store %w, %y[%i] : memref<1024xf32>
    }
    loop.return
  }
}
