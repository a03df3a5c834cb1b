// RUN: dlc-opt %s -p lower-tensor-to-loop | filecheck %s

builtin.module attributes {dlc.name = "lower_tensor_to_loop", dlc.stage = "raw"} {

// A returned compute writes straight into the output buffer; the intermediate is
// allocated and freed; output loops are parallel where the schedule says so.
// CHECK-LABEL: sym_name = "exp_log"
// CHECK-SAME:    function_type = (memref<2x3xf32>, memref<2x3xf32>) -> ()
// CHECK:       ^{{.*}}(%[[X:.*]]: memref<2x3xf32>, %[[OUT:.*]]: memref<2x3xf32>):
// CHECK:         %[[TMP:.*]] = "loop.alloc"() <{align = #builtin.int<64>}> : () -> memref<2x3xf32>
// CHECK:         "loop.for"({{.*}}) <{parallel}>
// CHECK:           "loop.for"({{.*}}) <{parallel}>
// CHECK:             %[[V:.*]] = "loop.load"(%[[X]], %{{.*}}, %{{.*}})
// CHECK-NEXT:        %[[E:.*]] = math.exp %[[V]] : f32
// CHECK-NEXT:        "loop.store"(%[[E]], %[[TMP]], %{{.*}}, %{{.*}})
// CHECK:             %[[W:.*]] = "loop.load"(%[[TMP]], %{{.*}}, %{{.*}})
// CHECK-NEXT:        %[[L:.*]] = math.log %[[W]] : f32
// CHECK-NEXT:        "loop.store"(%[[L]], %[[OUT]], %{{.*}}, %{{.*}})
// CHECK:         "loop.dealloc"(%[[TMP]])
// CHECK-NEXT:    "loop.return"()
  "tensor.func"() <{sym_name = "exp_log", function_type = (!graph.tensor<2x3xf32>) -> !graph.tensor<2x3xf32>}> ({
  ^bb0(%x: !graph.tensor<2x3xf32>):
    %e = "tensor.compute"(%x) <{operandSegmentSizes = array<i32: 1, 0>, schedule = #schedule.nest<parallel [d0, d1]>}> ({
    ^bb1(%i: i64, %j: i64):
      %v = "tensor.read"(%x, %i, %j) : (!graph.tensor<2x3xf32>, i64, i64) -> f32
      %r = math.exp %v : f32
      "tensor.yield"(%r) : (f32) -> ()
    }) : (!graph.tensor<2x3xf32>) -> !graph.tensor<2x3xf32>
    %l = "tensor.compute"(%e) <{operandSegmentSizes = array<i32: 1, 0>, schedule = #schedule.nest<parallel [d0, d1]>}> ({
    ^bb2(%i2: i64, %j2: i64):
      %w = "tensor.read"(%e, %i2, %j2) : (!graph.tensor<2x3xf32>, i64, i64) -> f32
      %s = math.log %w : f32
      "tensor.yield"(%s) : (f32) -> ()
    }) : (!graph.tensor<2x3xf32>) -> !graph.tensor<2x3xf32>
    "tensor.return"(%l) : (!graph.tensor<2x3xf32>) -> ()
  }) : () -> ()

// A reduction is an inner loop carrying the accumulator, started at init_value; a float
// add over the contiguous innermost axis may be reassociated (vectorized).
// CHECK-LABEL: sym_name = "row_sum"
// CHECK:         "loop.for"({{.*}}) <{parallel}> ({
// CHECK-NEXT:    ^{{.*}}(%[[I:.*]]: i64):
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK:           %[[SUM:.*]] = "loop.for"(%{{.*}}, %{{.*}}, %{{.*}}, %[[ZERO]]) ({
// CHECK-NEXT:      ^{{.*}}(%[[K:.*]]: i64, %[[ACC:.*]]: f64):
// CHECK-NEXT:        %[[V:.*]] = "loop.load"(%{{.*}}, %[[I]], %[[K]])
// CHECK-NEXT:        %[[NEXT:.*]] = arith.addf %[[ACC]], %[[V]] fastmath<reassoc> : f64
// CHECK-NEXT:        "loop.yield"(%[[NEXT]]) : (f64) -> ()
// CHECK:           "loop.store"(%[[SUM]], %{{.*}}, %[[I]])
  "tensor.func"() <{sym_name = "row_sum", function_type = (!graph.tensor<4x5xf64>) -> !graph.tensor<4xf64>}> ({
  ^bb0(%x: !graph.tensor<4x5xf64>):
    %s = "tensor.compute"(%x) <{reduction = [#builtin.int<5>], combinator = "add", init_value = 0.0 : f64, operandSegmentSizes = array<i32: 1, 0>, schedule = #schedule.nest<parallel [d0]>}> ({
    ^bb1(%i: i64, %k: i64):
      %v = "tensor.read"(%x, %i, %k) : (!graph.tensor<4x5xf64>, i64, i64) -> f64
      "tensor.yield"(%v) : (f64) -> ()
    }) : (!graph.tensor<4x5xf64>) -> !graph.tensor<4xf64>
    "tensor.return"(%s) : (!graph.tensor<4xf64>) -> ()
  }) : () -> ()

// Bool tensors are i8 buffers: loads truncate to i1, stores zero-extend. A returned
// argument and a value returned twice are copied.
// CHECK-LABEL: sym_name = "bools"
// CHECK-SAME:    function_type = (memref<3xi8>, memref<3xi8>, memref<3xi8>, memref<3xi8>) -> ()
// CHECK:       ^{{.*}}(%[[M:.*]]: memref<3xi8>, %[[O0:.*]]: memref<3xi8>, %[[O1:.*]]: memref<3xi8>, %[[O2:.*]]: memref<3xi8>):
// CHECK:           %[[B:.*]] = "loop.load"(%[[M]], %{{.*}}) : (memref<3xi8>, i64) -> i8
// CHECK-NEXT:      %[[T:.*]] = arith.trunci %[[B]] : i8 to i1
// CHECK:           %[[N:.*]] = arith.xori %[[T]], %{{.*}} : i1
// CHECK-NEXT:      %[[Z:.*]] = arith.extui %[[N]] : i1 to i8
// CHECK-NEXT:      "loop.store"(%[[Z]], %[[O0]], %{{.*}})
// CHECK:         "loop.copy"(%[[M]], %[[O1]])
// CHECK-NEXT:    "loop.copy"(%[[O0]], %[[O2]])
// CHECK-NOT:     "loop.alloc"
// CHECK:         "loop.return"()
  "tensor.func"() <{sym_name = "bools", function_type = (!graph.tensor<3xbool>) -> (!graph.tensor<3xbool>, !graph.tensor<3xbool>, !graph.tensor<3xbool>)}> ({
  ^bb0(%m: !graph.tensor<3xbool>):
    %n = "tensor.compute"(%m) <{operandSegmentSizes = array<i32: 1, 0>}> ({
    ^bb1(%i: i64):
      %v = "tensor.read"(%m, %i) : (!graph.tensor<3xbool>, i64) -> i1
      %t = arith.constant true
      %r = arith.xori %v, %t : i1
      "tensor.yield"(%r) : (i1) -> ()
    }) : (!graph.tensor<3xbool>) -> !graph.tensor<3xbool>
    "tensor.return"(%n, %m, %n) : (!graph.tensor<3xbool>, !graph.tensor<3xbool>, !graph.tensor<3xbool>) -> ()
  }) : () -> ()
}
