// RUN: dlc-opt %s -p plan-memory | filecheck %s

builtin.module {
// Two buffers in a chain: %b is written element-wise from %a, the last reader of %a,
// so it takes %a's bytes in place (same offset); the arena holds one buffer.
// CHECK-LABEL: sym_name = "chain"
// CHECK:         "loop.alloc"() <{align = #builtin.int<64>}> {arena_offset = #builtin.int<0>} : () -> memref<16xf32>
// CHECK:         "loop.alloc"() <{align = #builtin.int<64>}> {arena_offset = #builtin.int<0>} : () -> memref<16xf32>
// CHECK-NOT:     "loop.dealloc"
// CHECK:         "loop.return"()
// CHECK:       dlc.arena_bytes = #builtin.int<64>
// CHECK-SAME:  dlc.min_live_bytes = #builtin.int<64>
  "loop.func"() <{sym_name = "chain", function_type = (memref<16xf32>, memref<16xf32>) -> ()}> ({
  ^bb0(%x: memref<16xf32>, %out: memref<16xf32>):
    %c0 = arith.constant 0 : i64
    %c1 = arith.constant 1 : i64
    %c16 = arith.constant 16 : i64
    %a = "loop.alloc"() <{align = #builtin.int<64>}> : () -> memref<16xf32>
    "loop.for"(%c0, %c16, %c1) <{parallel}> ({
    ^bb1(%i: i64):
      %v = "loop.load"(%x, %i) : (memref<16xf32>, i64) -> f32
      "loop.store"(%v, %a, %i) : (f32, memref<16xf32>, i64) -> ()
      "loop.yield"() : () -> ()
    }) : (i64, i64, i64) -> ()
    %b = "loop.alloc"() <{align = #builtin.int<64>}> : () -> memref<16xf32>
    "loop.for"(%c0, %c16, %c1) <{parallel}> ({
    ^bb2(%j: i64):
      %w = "loop.load"(%a, %j) : (memref<16xf32>, i64) -> f32
      %n = arith.negf %w : f32
      "loop.store"(%n, %b, %j) : (f32, memref<16xf32>, i64) -> ()
      "loop.yield"() : () -> ()
    }) : (i64, i64, i64) -> ()
    "loop.for"(%c0, %c16, %c1) <{parallel}> ({
    ^bb3(%k: i64):
      %u = "loop.load"(%b, %k) : (memref<16xf32>, i64) -> f32
      "loop.store"(%u, %out, %k) : (f32, memref<16xf32>, i64) -> ()
      "loop.yield"() : () -> ()
    }) : (i64, i64, i64) -> ()
    "loop.dealloc"(%b) : (memref<16xf32>) -> ()
    "loop.dealloc"(%a) : (memref<16xf32>) -> ()
    "loop.return"() : () -> ()
  }) : () -> ()

// Negative: a reversed read is not element-wise, so %q cannot take %p's bytes.
// CHECK-LABEL: sym_name = "reversed"
// CHECK:         "loop.alloc"() <{align = #builtin.int<64>}> {arena_offset = #builtin.int<[[P:[0-9]+]]>}
// CHECK-NOT:     {arena_offset = #builtin.int<[[P]]>}
// CHECK:         "loop.alloc"() <{align = #builtin.int<64>}> {arena_offset = #builtin.int<{{[0-9]+}}>}
// CHECK:       dlc.arena_bytes = #builtin.int<128>
  "loop.func"() <{sym_name = "reversed", function_type = (memref<16xf32>, memref<16xf32>) -> ()}> ({
  ^bb0(%x: memref<16xf32>, %out: memref<16xf32>):
    %c0 = arith.constant 0 : i64
    %c1 = arith.constant 1 : i64
    %c15 = arith.constant 15 : i64
    %c16 = arith.constant 16 : i64
    %p = "loop.alloc"() <{align = #builtin.int<64>}> : () -> memref<16xf32>
    "loop.for"(%c0, %c16, %c1) <{parallel}> ({
    ^bb1(%i: i64):
      %v = "loop.load"(%x, %i) : (memref<16xf32>, i64) -> f32
      "loop.store"(%v, %p, %i) : (f32, memref<16xf32>, i64) -> ()
      "loop.yield"() : () -> ()
    }) : (i64, i64, i64) -> ()
    %q = "loop.alloc"() <{align = #builtin.int<64>}> : () -> memref<16xf32>
    "loop.for"(%c0, %c16, %c1) <{parallel}> ({
    ^bb2(%j: i64):
      %r = arith.subi %c15, %j : i64
      %w = "loop.load"(%p, %r) : (memref<16xf32>, i64) -> f32
      "loop.store"(%w, %q, %j) : (f32, memref<16xf32>, i64) -> ()
      "loop.yield"() : () -> ()
    }) : (i64, i64, i64) -> ()
    "loop.copy"(%q, %out) : (memref<16xf32>, memref<16xf32>) -> ()
    "loop.dealloc"(%q) : (memref<16xf32>) -> ()
    "loop.dealloc"(%p) : (memref<16xf32>) -> ()
    "loop.return"() : () -> ()
  }) : () -> ()
}
