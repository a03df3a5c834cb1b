"""`plan-memory` (loop level): arena size against the liveness bound, in-place reuse."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

from dlc.api import compile_graph_module
from dlc.dialects import loop
from dlc.parser import parse_module
from dlc.passes.loop.plan_memory import OFFSET, Slot, min_live_bytes, plan_slots
from dlc.semantics.interpreter import run_function

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
PROGRAMS = sorted(
    glob.glob(os.path.join(ROOT, "examples", "*.dl"))
    + glob.glob(os.path.join(ROOT, "benchmarks", "*.dl"))
    + glob.glob(os.path.join(ROOT, "test", "lit", "passes", "fuse.dl"))
)

CHAIN = """module "m"
stage raw
func @f: (<64 x 64 x f32>) -> <64 x 64 x f32> {
'entry(%x: <64 x 64 x f32>):
    %a = exp %x: <64 x 64 x f32>
    %b = sqrt %a: <64 x 64 x f32>
    %c = negate %b: <64 x 64 x f32>
    %d = transpose %c: <64 x 64 x f32>
    %e = add %d: <64 x 64 x f32>, 1.0: f32
    return %e: <64 x 64 x f32>
}
"""


@pytest.mark.parametrize("path", PROGRAMS, ids=os.path.basename)
@pytest.mark.parametrize("fuse", [True, False])
def test_arena_within_ten_percent_of_min_live(path: str, fuse: bool) -> None:
    with open(path) as f:
        module = parse_module(f.read())
    mod = compile_graph_module(module, fuse=fuse, opt_level=0)  # every program compiles
    for name in mod.functions:
        stats = mod.stats(name)
        assert stats["arena_bytes"] <= 1.1 * stats["min_live_bytes"], stats


def test_in_place_chain_shares_one_buffer() -> None:
    module = parse_module(CHAIN)
    mod = compile_graph_module(module, fuse=False)
    stats = mod.stats("f")
    size = 64 * 64 * 4
    assert stats["buffers"] == 4
    # a -> b -> c in place (one slot); the transpose result d needs a second slot
    assert stats["arena_bytes"] == 2 * size == stats["min_live_bytes"]
    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    want = (-np.sqrt(np.exp(x.astype(np.float64)))).T + 1
    np.testing.assert_allclose(mod.f(x), want.astype(np.float32), rtol=1e-5, atol=1e-5)


def test_planning_off_keeps_heap_buffers() -> None:
    mod = compile_graph_module(parse_module(CHAIN), fuse=False, plan_memory=False)
    text = mod.ir("loop")
    assert "loop.dealloc" in text and OFFSET not in text


def test_arena_is_the_call_contexts_not_allocated_per_call() -> None:
    """A planned function takes its block of the calling thread's arena (dlc.dialects.abi
    ctx words) on entry and gives it back on return: no allocation in the code."""
    module = parse_module(CHAIN)
    mod = compile_graph_module(module, fuse=False)
    ir = mod.ir("llvm")
    f_body = ir[ir.index("define void @dlc.fn.f(") :]
    f_body = f_body[: f_body.index("\n}\n")]
    assert "@aligned_alloc" not in f_body and "@free" not in f_body
    assert mod.stats("f")["arena_bytes"] > 0
    x = np.ones((64, 64), np.float32)
    first, second = mod.f(x), mod.f(x)
    np.testing.assert_array_equal(first, second)


def test_planned_loop_ir_has_offsets() -> None:
    mod = compile_graph_module(parse_module(CHAIN), fuse=False)
    for f in mod.ir_module("loop").body.block.ops:
        allocs = [op for op in f.walk() if isinstance(op, loop.AllocOp)]
        assert allocs and all(OFFSET in op.attributes for op in allocs)


def test_planner_reuses_dead_bytes() -> None:
    slots = [Slot([], 128, 0, 2), Slot([], 64, 2, 4), Slot([], 128, 4, 6)]
    assert min_live_bytes(slots) == 192
    assert plan_slots(slots) == 192
    assert slots[0].offset == slots[2].offset  # the third reuses the first's bytes


LOOP = """module "m"
stage raw
func @f: (<64 x f32>, i64) -> <64 x f32> {
'entry(%x: <64 x f32>, %n: i64):
    %a = exp %x: <64 x f32>
    %r = reverse %a: <64 x f32> along 0
    branch 'head(%x: <64 x f32>, 0: i64)
'head(%v: <64 x f32>, %i: i64):
    %c = lessThan %i: i64, %n: i64
    conditional %c: bool then 'body(%v: <64 x f32>, %i: i64) else 'exit(%v: <64 x f32>)
'body(%u: <64 x f32>, %k: i64):
    %p = reverse %u: <64 x f32> along 0
    %q = sin %p: <64 x f32>
    %w = reverse %q: <64 x f32> along 0
    %t = add %w: <64 x f32>, %r: <64 x f32>
    %k1 = add %k: i64, 1: i64
    branch 'head(%t: <64 x f32>, %k1: i64)
'exit(%o: <64 x f32>):
    return %o: <64 x f32>
}
"""


def _allocs(mod, name: str) -> list[loop.AllocOp]:
    for f in mod.ir_module("loop").body.block.ops:
        if isinstance(f, loop.FuncOp) and f.sym_name.data == name:
            return [op for op in f.body.walk() if isinstance(op, loop.AllocOp)]
    raise KeyError(name)


@pytest.mark.parametrize("fuse", [True, False])
def test_multi_block_plans_block_local_buffers(fuse: bool) -> None:
    module = parse_module(LOOP)
    mod = compile_graph_module(module, fuse=fuse)
    stats = mod.stats("f")
    allocs = _allocs(mod, "f")
    planned = [a for a in allocs if OFFSET in a.attributes]
    # block-local values of 'body (%p, %q ...) share the arena; block arguments and
    # %r (defined in 'entry, read in the loop body) stay heap buffers
    assert planned and stats["heap_buffers"] == len(allocs) - len(planned) >= 3
    assert 0 < stats["arena_bytes"] <= 1.1 * stats["min_live_bytes"]
    x = np.random.default_rng(3).standard_normal(64).astype(np.float32)
    for n in (0, 1, 4):
        want = run_function(module, "f", [x, np.int64(n)])
        np.testing.assert_allclose(mod.f(x, np.int64(n)), want, rtol=1e-5, atol=1e-6)


BITCASTS = """module "m"
stage raw
func @f: (<8 x 8 x f32>) -> <64 x f32> {
'entry(%x: <8 x 8 x f32>):
    %a = exp %x: <8 x 8 x f32>
    %b = bitCast %a: <8 x 8 x f32> to <64 x f32>
    %d = sin %a: <8 x 8 x f32>
    %e = bitCast %d: <8 x 8 x f32> to <64 x f32>
    %t = add %b: <64 x f32>, %e: <64 x f32>
    return %t: <64 x f32>
}
"""


@pytest.mark.parametrize("fuse", [True, False])
def test_bitcast_shares_its_source_bytes(fuse: bool) -> None:
    """A bitcast's copy is dropped, its buffer placed on its source's bytes; `a`
    outlives its bitcast `b`, so `sin a` may not take a's bytes in place (it would
    overwrite `b` before the add reads it); `e` takes `d`'s, which dies there."""
    mod = compile_graph_module(parse_module(BITCASTS), fuse=fuse)
    assert "loop.raw_store" not in str(mod.ir("loop"))
    offsets = [op.attributes[OFFSET].data for op in _allocs(mod, "f")]
    assert offsets == [0, 0, 256, 256]  # a, b | d, e
    assert mod.stats("f")["arena_bytes"] == 512
    x = np.random.default_rng(3).standard_normal((8, 8)).astype(np.float32)
    want = (np.exp(x) + np.sin(np.exp(x))).reshape(64)
    np.testing.assert_allclose(mod.f(x), want, rtol=1e-5, atol=1e-6)
    plain = compile_graph_module(parse_module(BITCASTS), opt_level=0, plan_memory=False)
    assert "loop.raw_store" in str(plain.ir("loop"))  # unplanned: the copies stay
    np.testing.assert_array_equal(
        plain.f(x), compile_graph_module(parse_module(BITCASTS), opt_level=0).f(x)
    )
