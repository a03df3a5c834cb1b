// RUN: dlc-opt %s -p lower-loop-to-llvm | filecheck %s

builtin.module attributes {dlc.name = "lower_loop_to_llvm", dlc.stage = "raw"} {

// The call context comes first; buffers become noalias pointers, loops become blocks
// with an i64 induction variable, loads and stores address elements with GEPs and
// carry an explicit alignment.
// CHECK-LABEL: llvm.func @dlc.fn.scale(
// CHECK-SAME:    %[[CTX:.*]]: !llvm.ptr {llvm.noalias}, %[[X:.*]]: !llvm.ptr {llvm.noalias}, %[[Y:.*]]: !llvm.ptr {llvm.noalias})
// CHECK:         llvm.br ^[[HEAD:.*]](%{{.*}} : i64)
// CHECK:       ^[[HEAD]](%[[I:.*]]: i64):
// CHECK:         llvm.icmp "slt" %[[I]], %{{.*}} : i64
// CHECK:         %[[P:.*]] = llvm.getelementptr inbounds %[[X]][%[[I]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    %[[V:.*]] = llvm.load %[[P]] {alignment = 4 : i64} : !llvm.ptr -> f32
// CHECK-NEXT:    %[[W:.*]] = llvm.fmul %[[V]], %[[V]] : f32
// CHECK-NEXT:    %[[Q:.*]] = llvm.getelementptr inbounds %[[Y]][%[[I]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    llvm.store %[[W]], %[[Q]] {alignment = 4 : i64} : f32, !llvm.ptr
// CHECK:         llvm.return
  loop.func @scale(%x: memref<8xf32>, %y: memref<8xf32>) {
    %lb = arith.constant 0 : i64
    %ub = arith.constant 8 : i64
    %st = arith.constant 1 : i64
    loop.for %i = %lb to %ub step %st parallel {
      %v = loop.load %x[%i] : memref<8xf32>
      %w = arith.mulf %v, %v : f32
      loop.store %w, %y[%i] : memref<8xf32>
    }
    loop.return
  }

// A row-major 2-D access: the flat index is i * 3 + j, computed in i64.
// CHECK-LABEL: llvm.func @dlc.fn.copy2d(
// CHECK:         %[[ROW:.*]] = llvm.mul %{{.*}}, %{{.*}} : i64
// CHECK:         %[[FLAT:.*]] = llvm.add %[[ROW]], %{{.*}} : i64
// CHECK:         llvm.getelementptr inbounds %{{.*}}[%[[FLAT]]] : (!llvm.ptr, i64) -> !llvm.ptr, f64
// CHECK:         llvm.return
  loop.func @copy2d(%a: memref<2x3xf64>, %b: memref<2x3xf64>) {
    %i = arith.constant 1 : i64
    %j = arith.constant 2 : i64
    %v = loop.load %a[%i, %j] : memref<2x3xf64>
    loop.store %v, %b[%i, %j] : memref<2x3xf64>
    loop.return
  }

// Vector accesses load and store whole registers with the element's alignment; a
// broadcast is an insertelement and a zero shufflevector.
// CHECK-LABEL: llvm.func @dlc.fn.lanes(
// CHECK:         %[[P:.*]] = llvm.getelementptr inbounds %{{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    %[[V:.*]] = llvm.load %[[P]] {alignment = 4 : i64} : !llvm.ptr -> vector<4xf32>
// CHECK:         %[[E:.*]] = llvm.insertelement %{{.*}}, %{{.*}}[%{{.*}} : i32] : vector<4xf32>
// CHECK-NEXT:    %[[B:.*]] = llvm.shufflevector %[[E]], %[[E]] [0, 0, 0, 0] : vector<4xf32>
// CHECK-NEXT:    %[[S:.*]] = llvm.fadd %[[V]], %[[B]] : vector<4xf32>
// CHECK:         llvm.store %[[S]], %{{.*}} {alignment = 4 : i64} : vector<4xf32>, !llvm.ptr
  loop.func @lanes(%x: memref<2x8xf32>, %y: memref<2x8xf32>) {
    %i = arith.constant 1 : i64
    %j = arith.constant 4 : i64
    %v = loop.vload %x[%i, %j] : memref<2x8xf32> -> vector<4xf32>
    %h = arith.constant 0.5 : f32
    %b = loop.broadcast %h : f32 -> vector<4xf32>
    %s = arith.addf %v, %b : vector<4xf32>
    loop.vstore %s, %y[%i, %j] : vector<4xf32>, memref<2x8xf32>
    loop.return
  }

// A shuffle is a shufflevector with the same mask.
// CHECK-LABEL: llvm.func @dlc.fn.shuffle(
// CHECK:         %{{.*}} = llvm.shufflevector %[[V:.*]], %[[V]] [2, 7] : vector<4xf32>
  loop.func @shuffle(%x: memref<4xf32>, %y: memref<2xf32>) {
    %i = arith.constant 0 : i64
    %v = loop.vload %x[%i] : memref<4xf32> -> vector<4xf32>
    %p = loop.shuffle %v, %v [2, 7] : vector<4xf32> -> vector<2xf32>
    loop.vstore %p, %y[%i] : vector<2xf32>, memref<2xf32>
    loop.return
  }

// Literal data is a read-only global of the object file, copied into the buffer.
// CHECK-LABEL: llvm.func @dlc.fn.weights(
// CHECK:         %[[G:.*]] = llvm.mlir.addressof @__dlc_const_0 : !llvm.ptr
// CHECK:         %[[A:.*]] = llvm.ptrtoint %[[G]] : !llvm.ptr to i64
// CHECK:         %[[P:.*]] = llvm.inttoptr %[[A]] : i64 to !llvm.ptr
// CHECK:         llvm.call_intrinsic "llvm.memcpy.p0.p0.i64"(%{{.*}}, %[[P]], %{{.*}}, %{{.*}})
  loop.func @weights(%y: memref<4xf32>) {
    loop.const_copy dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32> to %y : memref<4xf32>
    loop.return
  }

// A read-only buffer is the global itself: loads address it directly.
// CHECK-LABEL: llvm.func @dlc.fn.table(
// CHECK:         %[[T:.*]] = llvm.mlir.addressof @__dlc_const_1 : !llvm.ptr
// CHECK:         %[[A:.*]] = llvm.ptrtoint %[[T]] : !llvm.ptr to i64
// CHECK:         %[[P:.*]] = llvm.inttoptr %[[A]] : i64 to !llvm.ptr
// CHECK:         llvm.getelementptr inbounds %[[P]][%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// The module's read-only data follows its functions.
// CHECK:       llvm.mlir.global internal constant @__dlc_const_0(dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>) {addr_space = 0 : i32} : !llvm.array<4 x f32>
// CHECK:       llvm.mlir.global internal constant @__dlc_const_1(dense<[5.000000e-01, 1.500000e+00]> : tensor<2xf32>) {addr_space = 0 : i32} : !llvm.array<2 x f32>
  loop.func @table(%y: memref<f32>) {
    %t = loop.const_buffer dense<[0.5, 1.5]> : tensor<2xf32> : memref<2xf32>
    %c1 = arith.constant 1 : i64
    %v = loop.load %t[%c1] : memref<2xf32>
    loop.store %v, %y[] : memref<f32>
    loop.return
  }
}
