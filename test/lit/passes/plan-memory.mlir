// RUN: dlc-opt %s -p plan-memory | filecheck %s

builtin.module {
// Two buffers in a chain: %b is written element-wise from %a, the last reader of %a,
// so it takes %a's bytes in place (same offset); the arena holds one buffer.
// CHECK-LABEL: loop.func @chain(
// CHECK-SAME:    attributes {dlc.arena_bytes = #builtin.int<64>, dlc.min_live_bytes = #builtin.int<64>} {
// CHECK:         loop.alloc {arena_offset = #builtin.int<0>} : memref<16xf32>
// CHECK:         loop.alloc {arena_offset = #builtin.int<0>} : memref<16xf32>
// CHECK-NOT:     loop.dealloc
// CHECK:         loop.return
  loop.func @chain(%x: memref<16xf32>, %out: memref<16xf32>) {
    %c0 = arith.constant 0 : i64
    %c1 = arith.constant 1 : i64
    %c16 = arith.constant 16 : i64
    %a = loop.alloc : memref<16xf32>
    loop.for %i = %c0 to %c16 step %c1 parallel {
      %v = loop.load %x[%i] : memref<16xf32>
      loop.store %v, %a[%i] : memref<16xf32>
    }
    %b = loop.alloc : memref<16xf32>
    loop.for %j = %c0 to %c16 step %c1 parallel {
      %w = loop.load %a[%j] : memref<16xf32>
      %n = arith.negf %w : f32
      loop.store %n, %b[%j] : memref<16xf32>
    }
    loop.for %k = %c0 to %c16 step %c1 parallel {
      %u = loop.load %b[%k] : memref<16xf32>
      loop.store %u, %out[%k] : memref<16xf32>
    }
    loop.dealloc %b : memref<16xf32>
    loop.dealloc %a : memref<16xf32>
    loop.return
  }

// Negative: a reversed read is not element-wise, so %q cannot take %p's bytes.
// CHECK-LABEL: loop.func @reversed(
// CHECK-SAME:    attributes {dlc.arena_bytes = #builtin.int<128>,
// CHECK:         loop.alloc {arena_offset = #builtin.int<[[P:[0-9]+]]>} : memref<16xf32>
// CHECK-NOT:     {arena_offset = #builtin.int<[[P]]>}
// CHECK:         loop.alloc {arena_offset = #builtin.int<{{[0-9]+}}>} : memref<16xf32>
  loop.func @reversed(%x: memref<16xf32>, %out: memref<16xf32>) {
    %c0 = arith.constant 0 : i64
    %c1 = arith.constant 1 : i64
    %c15 = arith.constant 15 : i64
    %c16 = arith.constant 16 : i64
    %p = loop.alloc : memref<16xf32>
    loop.for %i = %c0 to %c16 step %c1 parallel {
      %v = loop.load %x[%i] : memref<16xf32>
      loop.store %v, %p[%i] : memref<16xf32>
    }
    %q = loop.alloc : memref<16xf32>
    loop.for %j = %c0 to %c16 step %c1 parallel {
      %r = arith.subi %c15, %j : i64
      %w = loop.load %p[%r] : memref<16xf32>
      loop.store %w, %q[%j] : memref<16xf32>
    }
    loop.copy %q to %out : memref<16xf32> to memref<16xf32>
    loop.dealloc %q : memref<16xf32>
    loop.dealloc %p : memref<16xf32>
    loop.return
  }
}
