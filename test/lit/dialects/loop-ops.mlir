// RUN: dlc-opt %s > %t.1
// RUN: filecheck %s < %t.1
// RUN: dlc-opt -f mlir < %t.1 | filecheck %s
// RUN: dlc-opt %s --print-op-generic | dlc-opt -f mlir | filecheck %s

// Every op of the loop dialect in its custom syntax: parsed, printed, parsed again (and
// from the generic form) to the same text.

builtin.module {

// Loops name their induction variable and iteration arguments; an empty `loop.yield`
// is implicit; `loop.alloc` prints its alignment only when it is not 64 bytes.
// CHECK-LABEL: loop.func @nest(
// CHECK-SAME:    %[[X:.*]]: memref<4x8xf32>, %[[FLAG:.*]]: memref<i8>, %[[OUT:.*]]: memref<4xf32>) attributes {dlc.arena_bytes = #builtin.int<64>} {
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : i64
// CHECK-NEXT:    %[[C1:.*]] = arith.constant 1 : i64
// CHECK-NEXT:    %[[C4:.*]] = arith.constant 4 : i64
// CHECK-NEXT:    %[[C8:.*]] = arith.constant 8 : i64
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[TMP:.*]] = loop.alloc align 128 {arena_offset = #builtin.int<0>} : memref<4xf32>
// CHECK-NEXT:    %[[ANY:.*]] = loop.alloc : memref<2xf32>
// CHECK-NEXT:    loop.for %[[I:.*]] = %[[C0]] to %[[C4]] step %[[C1]] parallel {
// CHECK-NEXT:      %[[SUM:.*]] = loop.for %[[K:.*]] = %[[C0]] to %[[C8]] step %[[C1]] iter_args(%[[ACC:.*]] = %[[ZERO]]) -> (f32) {
// CHECK-NEXT:        %[[V:.*]] = loop.load %[[X]][%[[I]], %[[K]]] : memref<4x8xf32>
// CHECK-NEXT:        %[[NEXT:.*]] = arith.addf %[[ACC]], %[[V]] : f32
// CHECK-NEXT:        loop.yield %[[NEXT]] : f32
// CHECK-NEXT:      }
// CHECK-NEXT:      %[[F:.*]] = loop.load %[[FLAG]][] : memref<i8>
// CHECK-NEXT:      %[[C:.*]] = arith.trunci %[[F]] : i8 to i1
// CHECK-NEXT:      %[[R:.*]] = loop.if %[[C]] -> (f32) {
// CHECK-NEXT:        %[[E:.*]] = loop.erfc %[[SUM]] : f32
// CHECK-NEXT:        loop.yield %[[E]] : f32
// CHECK-NEXT:      } else {
// CHECK-NEXT:        %[[M:.*]] = loop.remf %[[SUM]], %[[SUM]] : f32
// CHECK-NEXT:        loop.yield %[[M]] : f32
// CHECK-NEXT:      }
// CHECK-NEXT:      loop.if %[[C]] {
// CHECK-NEXT:        loop.store %[[R]], %[[TMP]][%[[I]]] : memref<4xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:      loop.for %{{.*}} = %[[C0]] to %[[C0]] step %[[C1]] {
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    loop.copy %[[TMP]] to %[[OUT]] : memref<4xf32> to memref<4xf32>
// CHECK-NEXT:    loop.dealloc %[[ANY]] : memref<2xf32>
// CHECK-NEXT:    loop.dealloc %[[TMP]] : memref<4xf32>
// CHECK-NEXT:    loop.return
// CHECK-NEXT:  }
  loop.func @nest(%x: memref<4x8xf32>, %flag: memref<i8>, %out: memref<4xf32>) attributes {dlc.arena_bytes = #builtin.int<64>} {
    %c0 = arith.constant 0 : i64
    %c1 = arith.constant 1 : i64
    %c4 = arith.constant 4 : i64
    %c8 = arith.constant 8 : i64
    %zero = arith.constant 0.0 : f32
    %tmp = loop.alloc align 128 {arena_offset = #builtin.int<0>} : memref<4xf32>
    %any = loop.alloc : memref<2xf32>
    loop.for %i = %c0 to %c4 step %c1 parallel {
      %sum = loop.for %k = %c0 to %c8 step %c1 iter_args(%acc = %zero) -> (f32) {
        %v = loop.load %x[%i, %k] : memref<4x8xf32>
        %next = arith.addf %acc, %v : f32
        loop.yield %next : f32
      }
      %f = loop.load %flag[] : memref<i8>
      %c = arith.trunci %f : i8 to i1
      %r = loop.if %c -> (f32) {
        %e = loop.erfc %sum : f32
        loop.yield %e : f32
      } else {
        %m = loop.remf %sum, %sum : f32
        loop.yield %m : f32
      }
      loop.if %c {
        loop.store %r, %tmp[%i] : memref<4xf32>
      }
      loop.for %j = %c0 to %c0 step %c1 {
      }
    }
    loop.copy %tmp to %out : memref<4xf32> to memref<4xf32>
    loop.dealloc %any : memref<2xf32>
    loop.dealloc %tmp : memref<4xf32>
    loop.return
  }

// A multi-block function and the calls: another loop function, a C function, a
// function combinator over scalars.
// CHECK-LABEL: loop.func @cfg(
// CHECK-SAME:    %[[X:.*]]: memref<f32>, %[[OUT:.*]]: memref<f32>) {
// CHECK-NEXT:    %[[V:.*]] = loop.load %[[X]][] : memref<f32>
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[C:.*]] = arith.cmpf olt, %[[V]], %[[ZERO]] : f32
// CHECK-NEXT:    loop.cond_br %[[C]], ^[[FAIL:.*]], ^[[OK:.*]]
// CHECK-NEXT:  ^[[FAIL]]:
// CHECK-NEXT:    loop.trap "negative input"
// CHECK-NEXT:    loop.br ^[[OK]]
// CHECK-NEXT:  ^[[OK]]:
// CHECK-NEXT:    loop.call @cfg(%[[X]], %[[OUT]]) : (memref<f32>, memref<f32>)
// CHECK-NEXT:    %[[T:.*]] = loop.extern_call @tanhf(%[[V]]) : (f32) -> f32
// CHECK-NEXT:    %[[S:.*]] = loop.scalar_call @plus(%[[V]], %[[T]]) : (f32, f32) -> f32
// CHECK-NEXT:    loop.store %[[S]], %[[OUT]][] : memref<f32>
// CHECK-NEXT:    loop.return
  loop.func @cfg(%x: memref<f32>, %out: memref<f32>) {
    %v = loop.load %x[] : memref<f32>
    %zero = arith.constant 0.0 : f32
    %c = arith.cmpf olt, %v, %zero : f32
    loop.cond_br %c, ^fail, ^ok
  ^fail:
    loop.trap "negative input"
    loop.br ^ok
  ^ok:
    loop.call @cfg(%x, %out) : (memref<f32>, memref<f32>)
    %t = loop.extern_call @tanhf(%v) : (f32) -> f32
    %s = loop.scalar_call @plus(%v, %t) : (f32, f32) -> f32
    loop.store %s, %out[] : memref<f32>
    loop.return
  }

// CHECK-LABEL: loop.func @plus(
// CHECK-SAME:    %{{.*}}: memref<f32>, %{{.*}}: memref<f32>, %{{.*}}: memref<f32>) {
// CHECK-NEXT:    loop.return
  loop.func @plus(%a: memref<f32>, %b: memref<f32>, %out: memref<f32>) {
    loop.return
  }

// Raw addresses are i64 values.
// CHECK-LABEL: loop.func @raw(
// CHECK-SAME:    %[[BUF:.*]]: memref<2xf32>) {
// CHECK-NEXT:    %[[N:.*]] = arith.constant 8 : i64
// CHECK-NEXT:    %{{.*}} = loop.global_address @counter size 16
// CHECK-NEXT:    %[[H:.*]] = loop.raw_alloc %[[N]]
// CHECK-NEXT:    %[[END:.*]] = arith.addi %[[H]], %[[N]] : i64
// CHECK-NEXT:    loop.raw_check %[[H]], %[[N]], %[[H]], %[[END]] access "store"
// CHECK-NEXT:    loop.raw_check %[[H]], %[[N]], %[[H]], %[[END]] access "gather index" offset -4 always
// CHECK-NEXT:    loop.raw_store %[[BUF]] to %[[H]] : memref<2xf32>
// CHECK-NEXT:    loop.raw_load %[[H]] into %[[BUF]] : memref<2xf32>
// CHECK-NEXT:    %[[A:.*]] = loop.address %[[BUF]] : memref<2xf32>
// CHECK-NEXT:    loop.raw_copy %[[A]], %[[H]], %[[N]]
// CHECK-NEXT:    %[[S:.*]] = loop.stack_alloc size 24
// CHECK-NEXT:    %{{.*}} = loop.stack_push %[[S]] nbytes 4 item "f32"
// CHECK-NEXT:    %{{.*}} = loop.stack_pop %[[S]] nbytes 4 item "f32"
// CHECK-NEXT:    loop.raw_free %[[H]]
// CHECK-NEXT:    loop.return
  loop.func @raw(%buf: memref<2xf32>) {
    %n = arith.constant 8 : i64
    %g = loop.global_address @counter size 16
    %h = loop.raw_alloc %n
    %end = arith.addi %h, %n : i64
    loop.raw_check %h, %n, %h, %end access "store"
    loop.raw_check %h, %n, %h, %end access "gather index" offset -4 always
    loop.raw_store %buf to %h : memref<2xf32>
    loop.raw_load %h into %buf : memref<2xf32>
    %a = loop.address %buf : memref<2xf32>
    loop.raw_copy %a, %h, %n
    %s = loop.stack_alloc size 24
    %top = loop.stack_push %s nbytes 4 item "f32"
    %old = loop.stack_pop %s nbytes 4 item "f32"
    loop.raw_free %h
    loop.return
  }

// Vector loads, stores and broadcasts: W consecutive elements along the last
// dimension; arithmetic on them is arith on vectors.
// CHECK-LABEL: loop.func @lanes(
// CHECK:         %[[V:.*]] = loop.vload %{{.*}}[%[[I:.*]], %[[J:.*]]] : memref<4x8xf32> -> vector<4xf32>
// CHECK-NEXT:    %[[S:.*]] = loop.load %{{.*}}[%[[I]], %[[J]]] : memref<4x8xf32>
// CHECK-NEXT:    %[[B:.*]] = loop.broadcast %[[S]] : f32 -> vector<4xf32>
// CHECK-NEXT:    %[[P:.*]] = arith.mulf %[[V]], %[[B]] : vector<4xf32>
// CHECK-NEXT:    loop.vstore %[[P]], %{{.*}}[%[[I]], %[[J]]] : vector<4xf32>, memref<4x8xf32>
  loop.func @lanes(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
    %i = arith.constant 1 : i64
    %j = arith.constant 4 : i64
    %v = loop.vload %x[%i, %j] : memref<4x8xf32> -> vector<4xf32>
    %s = loop.load %x[%i, %j] : memref<4x8xf32>
    %b = loop.broadcast %s : f32 -> vector<4xf32>
    %p = arith.mulf %v, %b : vector<4xf32>
    loop.vstore %p, %y[%i, %j] : vector<4xf32>, memref<4x8xf32>
    loop.return
  }

// A shuffle picks lanes of two vectors (a narrower piece of one, or pieces put together).
// CHECK-LABEL: loop.func @pieces(
// CHECK:         %[[W:.*]] = loop.shuffle %[[A:.*]], %[[B:.*]] [1, 2, 4, 7] : vector<4xf32> -> vector<4xf32>
// CHECK-NEXT:    %[[N:.*]] = loop.shuffle %[[W]], %[[W]] [3] : vector<4xf32> -> vector<1xf32>
  loop.func @pieces(%x: memref<8xf32>, %y: memref<1xf32>) {
    %i = arith.constant 0 : i64
    %j = arith.constant 4 : i64
    %a = loop.vload %x[%i] : memref<8xf32> -> vector<4xf32>
    %b = loop.vload %x[%j] : memref<8xf32> -> vector<4xf32>
    %w = loop.shuffle %a, %b [1, 2, 4, 7] : vector<4xf32> -> vector<4xf32>
    %n = loop.shuffle %w, %w [3] : vector<4xf32> -> vector<1xf32>
    loop.vstore %n, %y[%i] : vector<1xf32>, memref<1xf32>
    loop.return
  }
// Lane-wise compares give a vector of i1, which picks lanes in a vector select.
// CHECK-LABEL: loop.func @masks(
// CHECK:         %[[M:.*]] = loop.vcmpf olt, %[[A:.*]], %[[B:.*]] : vector<4xf32>
// CHECK-NEXT:    %[[R:.*]] = loop.vselect %[[M]], %[[A]], %[[B]] : vector<4xf32>
// CHECK-NEXT:    loop.vstore %[[R]]
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
