// RUN: dlc-opt %s > %t.1
// RUN: filecheck %s < %t.1
// RUN: dlc-opt -f mlir < %t.1 | filecheck %s
// RUN: dlc-opt %s --print-op-generic | dlc-opt -f mlir | filecheck %s

// Every op of the tensor dialect in its custom syntax: parsed, printed, parsed again
// (and from the generic form) to the same text.

builtin.module {

// A compute shows its inputs, reduction extents, combinator, init (a constant or an
// operand), schedule and extra attributes; its body's index arguments keep their names.
// CHECK-LABEL: tensor.func @compute(
// CHECK-SAME:    %[[X:.*]]: !graph.tensor<4x8xf32>, %[[W:.*]]: !graph.tensor<8x2xf32>, %[[INIT:.*]]: !graph.tensor<f32>) -> (!graph.tensor<4x2xf32>, !graph.tensor<4xf32>) {
// CHECK-NEXT:    %[[Y:.*]] = tensor.compute(%[[X]], %[[W]]) reduce [8] by "add" init 0.000000e+00 : f32 schedule #schedule.nest<interchange [d0, r0, d1], parallel [d0, d1]> {
// CHECK-NEXT:    ^bb0(%[[I:.*]]: i64, %[[J:.*]]: i64, %[[K:.*]]: i64):
// CHECK-NEXT:      %[[A:.*]] = tensor.read %[[X]][%[[I]], %[[K]]] : !graph.tensor<4x8xf32>
// CHECK-NEXT:      %[[B:.*]] = tensor.read %[[W]][%[[K]], %[[J]]] : !graph.tensor<8x2xf32>
// CHECK-NEXT:      %[[P:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT:      tensor.yield %[[P]] : f32
// CHECK-NEXT:    } : (!graph.tensor<4x8xf32>, !graph.tensor<8x2xf32>) -> !graph.tensor<4x2xf32>
// CHECK-NEXT:    %[[M:.*]] = tensor.compute(%[[X]]) reduce [8] by "max" init %[[INIT]] : !graph.tensor<f32> attributes {note = "kept"} {
// CHECK-NEXT:    ^bb0(%[[I2:.*]]: i64, %[[K2:.*]]: i64):
// CHECK-NEXT:      %[[A2:.*]] = tensor.read %[[X]][%[[I2]], %[[K2]]] : !graph.tensor<4x8xf32>
// CHECK-NEXT:      tensor.yield %[[A2]] : f32
// CHECK-NEXT:    } : (!graph.tensor<4x8xf32>) -> !graph.tensor<4xf32>
// CHECK-NEXT:    tensor.return %[[Y]], %[[M]] : !graph.tensor<4x2xf32>, !graph.tensor<4xf32>
// CHECK-NEXT:  }
  tensor.func @compute(%x: !graph.tensor<4x8xf32>, %w: !graph.tensor<8x2xf32>, %init: !graph.tensor<f32>) -> (!graph.tensor<4x2xf32>, !graph.tensor<4xf32>) {
    %y = tensor.compute(%x, %w) reduce [8] by "add" init 0.0 : f32 schedule #schedule.nest<interchange [d0, r0, d1], parallel [d0, d1]> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %a = tensor.read %x[%i, %k] : !graph.tensor<4x8xf32>
      %b = tensor.read %w[%k, %j] : !graph.tensor<8x2xf32>
      %p = arith.mulf %a, %b : f32
      tensor.yield %p : f32
    } : (!graph.tensor<4x8xf32>, !graph.tensor<8x2xf32>) -> !graph.tensor<4x2xf32>
    %m = tensor.compute(%x) reduce [8] by "max" init %init : !graph.tensor<f32> attributes {note = "kept"} {
    ^bb0(%i: i64, %k: i64):
      %a = tensor.read %x[%i, %k] : !graph.tensor<4x8xf32>
      tensor.yield %a : f32
    } : (!graph.tensor<4x8xf32>) -> !graph.tensor<4xf32>
    tensor.return %y, %m : !graph.tensor<4x2xf32>, !graph.tensor<4xf32>
  }

// A constant's result type follows from its data (bool data is i1); a rank-0 compute
// has no index arguments.
// CHECK-LABEL: tensor.func @scalars() -> (!graph.tensor<3xi8>, !graph.tensor<2xbool>, !graph.tensor<f64>) {
// CHECK-NEXT:    %[[C:.*]] = tensor.constant dense<[1, -2, 3]> : tensor<3xi8>
// CHECK-NEXT:    %[[B:.*]] = tensor.constant dense<[true, false]> : tensor<2xi1>
// CHECK-NEXT:    %[[Z:.*]] = tensor.compute() {
// CHECK-NEXT:      %[[V:.*]] = arith.constant 1.500000e+00 : f64
// CHECK-NEXT:      tensor.yield %[[V]] : f64
// CHECK-NEXT:    } : () -> !graph.tensor<f64>
// CHECK-NEXT:    tensor.return %[[C]], %[[B]], %[[Z]] : !graph.tensor<3xi8>, !graph.tensor<2xbool>, !graph.tensor<f64>
  tensor.func @scalars() -> (!graph.tensor<3xi8>, !graph.tensor<2xbool>, !graph.tensor<f64>) {
    %c = tensor.constant dense<[1, -2, 3]> : tensor<3xi8>
    %b = tensor.constant dense<[true, false]> : tensor<2xi1>
    %z = tensor.compute() {
      %v = arith.constant 1.5 : f64
      tensor.yield %v : f64
    } : () -> !graph.tensor<f64>
    tensor.return %c, %b, %z : !graph.tensor<3xi8>, !graph.tensor<2xbool>, !graph.tensor<f64>
  }

// CHECK-LABEL: tensor.func @scan(
// CHECK-SAME:    %[[X:.*]]: !graph.tensor<3x4xf32>) -> !graph.tensor<3x4xf32> {
// CHECK-NEXT:    %[[S:.*]] = tensor.scan %[[X]] dim 1 by "@plus" : !graph.tensor<3x4xf32>
// CHECK-NEXT:    tensor.return %[[S]] : !graph.tensor<3x4xf32>
  tensor.func @scan(%x: !graph.tensor<3x4xf32>) -> !graph.tensor<3x4xf32> {
    %s = tensor.scan %x dim 1 by "@plus" : !graph.tensor<3x4xf32>
    tensor.return %s : !graph.tensor<3x4xf32>
  }

// CHECK-LABEL: tensor.func @plus(
// CHECK-SAME:    %[[A:.*]]: !graph.tensor<f32>, %[[B:.*]]: !graph.tensor<f32>) -> !graph.tensor<f32> {
// CHECK-NEXT:    %[[S:.*]] = tensor.call @plus(%[[A]], %[[B]]) : (!graph.tensor<f32>, !graph.tensor<f32>) -> !graph.tensor<f32>
// CHECK-NEXT:    %[[E:.*]] = tensor.call @expf(%[[S]]) extern : (!graph.tensor<f32>) -> !graph.tensor<f32>
// CHECK-NEXT:    tensor.return %[[E]] : !graph.tensor<f32>
  tensor.func @plus(%a: !graph.tensor<f32>, %b: !graph.tensor<f32>) -> !graph.tensor<f32> {
    %s = tensor.call @plus(%a, %b) : (!graph.tensor<f32>, !graph.tensor<f32>) -> !graph.tensor<f32>
    %e = tensor.call @expf(%s) extern : (!graph.tensor<f32>) -> !graph.tensor<f32>
    tensor.return %e : !graph.tensor<f32>
  }

// A multi-block function: block arguments and branch operands with their types.
// CHECK-LABEL: tensor.func @cfg(
// CHECK-SAME:    %[[X:.*]]: !graph.tensor<4xf32>, %[[C:.*]]: !graph.tensor<bool>) -> !graph.tensor<4xf32> {
// CHECK-NEXT:    tensor.br ^[[HEAD:.*]](%[[X]] : !graph.tensor<4xf32>)
// CHECK-NEXT:  ^[[HEAD]](%[[V:.*]]: !graph.tensor<4xf32>):
// CHECK-NEXT:    tensor.cond_br %[[C]], ^[[HEAD]](%[[V]] : !graph.tensor<4xf32>), ^[[EXIT:.*]]
// CHECK-NEXT:  ^[[EXIT]]:
// CHECK-NEXT:    tensor.trap
// CHECK-NEXT:    tensor.return %[[V]] : !graph.tensor<4xf32>
  tensor.func @cfg(%x: !graph.tensor<4xf32>, %c: !graph.tensor<bool>) -> !graph.tensor<4xf32> {
    tensor.br ^head(%x : !graph.tensor<4xf32>)
  ^head(%v: !graph.tensor<4xf32>):
    tensor.cond_br %c, ^head(%v : !graph.tensor<4xf32>), ^exit
  ^exit:
    tensor.trap
    tensor.return %v : !graph.tensor<4xf32>
  }

// CHECK-LABEL: tensor.func @memory(
// CHECK-SAME:    %[[X:.*]]: !graph.tensor<2xf32>, %[[N:.*]]: !graph.tensor<i64>, %[[K:.*]]: !graph.tensor<i64>) -> !graph.tensor<2xi32> {
// CHECK-NEXT:    tensor.index_check %[[K]] count 4 what "extract index into <4 x f32>"
// CHECK-NEXT:    tensor.index_check %[[K]] count 4 from -4 what "gather index into axis 0 of <4 x f32>" always
// CHECK-NEXT:    %[[G:.*]] = tensor.global_address @counter size 16
// CHECK-NEXT:    %[[H:.*]] = tensor.heap_alloc %[[N]]
// CHECK-NEXT:    %[[END:.*]] = tensor.stack_alloc size 8
// CHECK-NEXT:    tensor.mem_write %[[X]], %[[H]], %[[H]], %[[END]] : !graph.tensor<2xf32>
// CHECK-NEXT:    %[[Y:.*]] = tensor.mem_read %[[H]], %[[H]], %[[END]] : !graph.tensor<2xf32>
// CHECK-NEXT:    tensor.mem_copy %[[G]], %[[G]], %[[END]], %[[H]], %[[H]], %[[END]], %[[N]]
// CHECK-NEXT:    %{{.*}} = tensor.stack_push %[[H]] nbytes 4 item "f32"
// CHECK-NEXT:    %{{.*}} = tensor.stack_pop %[[H]] nbytes 4 item "f32"
// CHECK-NEXT:    tensor.heap_free %[[H]]
// CHECK-NEXT:    %[[I:.*]] = tensor.bitcast %[[Y]] : !graph.tensor<2xf32> to !graph.tensor<2xi32>
// CHECK-NEXT:    tensor.return %[[I]] : !graph.tensor<2xi32>
  tensor.func @memory(%x: !graph.tensor<2xf32>, %n: !graph.tensor<i64>, %k: !graph.tensor<i64>) -> !graph.tensor<2xi32> {
    tensor.index_check %k count 4 what "extract index into <4 x f32>"
    tensor.index_check %k count 4 from -4 what "gather index into axis 0 of <4 x f32>" always
    %g = tensor.global_address @counter size 16
    %h = tensor.heap_alloc %n
    %end = tensor.stack_alloc size 8
    tensor.mem_write %x, %h, %h, %end : !graph.tensor<2xf32>
    %y = tensor.mem_read %h, %h, %end : !graph.tensor<2xf32>
    tensor.mem_copy %g, %g, %end, %h, %h, %end, %n
    %top = tensor.stack_push %h nbytes 4 item "f32"
    %old = tensor.stack_pop %h nbytes 4 item "f32"
    tensor.heap_free %h
    %i = tensor.bitcast %y : !graph.tensor<2xf32> to !graph.tensor<2xi32>
    tensor.return %i : !graph.tensor<2xi32>
  }
}
