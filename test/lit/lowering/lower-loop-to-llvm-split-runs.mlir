// RUN: dlc-opt %s -p 'lower-loop-to-llvm{split_ops=0 split_chunk=1}' | filecheck %s

builtin.module attributes {dlc.name = "runs", dlc.stage = "raw"} {

// Runs of a split function that are alike (the same ops, the same constants, the same
// way of using what they receive) share one outlined function: the second run is a
// call of the first's function with its own buffers.
// CHECK-LABEL: llvm.func @dlc.fn.alike_runs_share_a_function(
// CHECK-SAME:    %{{[^:]*}}: !llvm.ptr {llvm.noalias}, %[[X:[^:]*]]: !llvm.ptr {llvm.noalias}, %[[Y:[^:]*]]: !llvm.ptr {llvm.noalias}, %[[Z:[^:]*]]: !llvm.ptr {llvm.noalias})
// CHECK:         llvm.call @dlc.fn.alike_runs_share_a_function$nest0(%{{.*}}, %{{.*}}, %[[X]], %[[Y]])
// CHECK:         llvm.call @dlc.fn.alike_runs_share_a_function$nest0(%{{.*}}, %{{.*}}, %[[Y]], %[[Z]])
// CHECK-NOT:     llvm.call @alike_runs_share_a_function.nest
// CHECK:         llvm.return
// CHECK:       llvm.func internal @dlc.fn.alike_runs_share_a_function$nest0(
// CHECK-NOT:   llvm.func internal @alike_runs_share_a_function.nest
// Runs that differ (here in a constant) keep a function each.
// CHECK-LABEL: llvm.func @dlc.fn.different_runs_do_not(
// CHECK:         llvm.call @dlc.fn.different_runs_do_not$nest0(
// CHECK:         llvm.call @dlc.fn.different_runs_do_not$nest1(
// CHECK:       llvm.func internal @dlc.fn.different_runs_do_not$nest0(
// CHECK:         llvm.mlir.constant(2.000000e+00 : f32)
// CHECK:       llvm.func internal @dlc.fn.different_runs_do_not$nest1(
// CHECK:         llvm.mlir.constant(3.000000e+00 : f32)
  loop.func @alike_runs_share_a_function(%x: memref<8xf32>, %y: memref<8xf32>, %z: memref<8xf32>) {
    %lb = arith.constant 0 : i64
    %ub = arith.constant 8 : i64
    %st = arith.constant 1 : i64
    %two = arith.constant 2.0 : f32
    loop.for %i = %lb to %ub step %st {
      %v = loop.load %x[%i] : memref<8xf32>
      %w = arith.mulf %v, %two : f32
      loop.store %w, %y[%i] : memref<8xf32>
    }
    loop.for %j = %lb to %ub step %st {
      %v = loop.load %y[%j] : memref<8xf32>
      %w = arith.mulf %v, %two : f32
      loop.store %w, %z[%j] : memref<8xf32>
    }
    loop.return
  }
  loop.func @different_runs_do_not(%x: memref<8xf32>, %y: memref<8xf32>, %z: memref<8xf32>) {
    %lb = arith.constant 0 : i64
    %ub = arith.constant 8 : i64
    %st = arith.constant 1 : i64
    %two = arith.constant 2.0 : f32
    %three = arith.constant 3.0 : f32
    loop.for %i = %lb to %ub step %st {
      %v = loop.load %x[%i] : memref<8xf32>
      %w = arith.mulf %v, %two : f32
      loop.store %w, %y[%i] : memref<8xf32>
    }
    loop.for %j = %lb to %ub step %st {
      %v = loop.load %y[%j] : memref<8xf32>
      %w = arith.mulf %v, %three : f32
      loop.store %w, %z[%j] : memref<8xf32>
    }
    loop.return
  }

// A run neither takes nor gives a vector value (values cross into an outlined run in
// 8-byte slots): the vector sum here is defined before the nest that stores it, so
// nothing is outlined (this raised an internal KeyError on VectorType).
// CHECK-LABEL: llvm.func @dlc.fn.vectors_are_not_outlined(
// CHECK:         %[[V:.*]] = llvm.load %{{.*}} -> vector<4xf32>
// CHECK-NEXT:    %[[W:.*]] = llvm.fadd %[[V]], %[[V]] : vector<4xf32>
// CHECK-NOT:     llvm.call
// CHECK:         llvm.store %[[W]], %{{.*}} : vector<4xf32>, !llvm.ptr
// CHECK-NOT:     llvm.call
// CHECK:         llvm.return
  loop.func @vectors_are_not_outlined(%x: memref<8xf32>) {
    %c0 = arith.constant 0 : i64
    %c1 = arith.constant 1 : i64
    %c2 = arith.constant 2 : i64
    %v = loop.vload %x[%c0] : memref<8xf32> -> vector<4xf32>
    %w = arith.addf %v, %v : vector<4xf32>
    loop.for %i = %c0 to %c2 step %c1 {
      loop.vstore %w, %x[%i] : vector<4xf32>, memref<8xf32>
    }
    loop.return
  }
}
