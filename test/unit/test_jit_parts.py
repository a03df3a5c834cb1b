"""Large modules are compiled in parts on several threads (dlc/runtime/jit_parts.py):
the outlined runs of a split function go to modules of their own, one engine loads
all the objects, and the compile cache keeps them together."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dlc
from dlc.lowering.loop_to_llvm import lower_loop_to_llvm
from dlc.runtime import cache, jit_parts
from dlc.runtime.module import CompiledModule

# Softmaxes and a product with a parallel loop: several runs of nests, an OpenMP
# worker that must travel with its run.
PROGRAM = """module "p"
stage raw

func @f: (<64 x 96 x f32>, <96 x 128 x f32>) -> <64 x 128 x f32> {
'entry(%a: <64 x 96 x f32>, %b: <96 x 128 x f32>):
    %m0 = reduce %a: <64 x 96 x f32> by max init -inf: f32 along 0, 1
    %s0 = subtract %a: <64 x 96 x f32>, %m0: f32
    %e0 = exp %s0: <64 x 96 x f32>
    %z0 = reduce %e0: <64 x 96 x f32> by add init 0.0: f32 along 0, 1
    %x0 = divide %e0: <64 x 96 x f32>, %z0: f32
    %p = dot %x0: <64 x 96 x f32>, %b: <96 x 128 x f32>
    %m1 = reduce %p: <64 x 128 x f32> by max init -inf: f32 along 0, 1
    %s1 = subtract %p: <64 x 128 x f32>, %m1: f32
    %e1 = exp %s1: <64 x 128 x f32>
    %z1 = reduce %e1: <64 x 128 x f32> by add init 0.0: f32 along 0, 1
    %x1 = divide %e1: <64 x 128 x f32>, %z1: f32
    return %x1: <64 x 128 x f32>
}
"""

RNG = np.random.default_rng(5)
A = RNG.standard_normal((64, 96)).astype(np.float32)
B = RNG.standard_normal((96, 128)).astype(np.float32)


@pytest.fixture
def split(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every function split, one run per nest, any module built in parts."""
    monkeypatch.setattr(lower_loop_to_llvm, "SPLIT_OPS", 0)
    monkeypatch.setattr(lower_loop_to_llvm, "SPLIT_CHUNK", 1)
    monkeypatch.setattr(jit_parts, "MIN_OPS", 0)
    monkeypatch.setattr(jit_parts, "_threads", lambda: 2)


def built_in_parts(mod: CompiledModule) -> bool:
    return (mod._jit.object_code or b"").startswith(jit_parts.MAGIC)  # noqa: SLF001


def test_parts_give_the_same_results(split: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLC_CACHE", "0")
    for opt_level in (1, 2):
        parts = dlc.compile(PROGRAM, opt_level=opt_level, num_threads=2)
        assert built_in_parts(parts)
        monkeypatch.setattr(jit_parts, "MIN_OPS", 10**9)
        whole = dlc.compile(PROGRAM, opt_level=opt_level, num_threads=2)
        monkeypatch.setattr(jit_parts, "MIN_OPS", 0)
        assert not built_in_parts(whole)
        np.testing.assert_array_equal(parts.f(A, B), whole.f(A, B))
        assert "GOMP_parallel" in parts.ir("llvm") or "omp" not in parts.ir("llvm")


def test_the_cache_keeps_the_parts_together(
    split: None, cache_dir: Path, lowerings: list[int]
) -> None:
    first = dlc.compile(PROGRAM)
    assert built_in_parts(first)
    cache.clear_memory()
    again = dlc.compile(PROGRAM)  # from disk: the bundle of objects
    assert len(lowerings) == 1
    np.testing.assert_array_equal(again.f(A, B), first.f(A, B))


def test_small_modules_compile_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLC_CACHE", "0")
    assert not built_in_parts(dlc.compile(PROGRAM))


def test_object_bundles_round_trip() -> None:
    objects = [b"\x7fELF one", b"\x7fELF second", b""]
    bundle = jit_parts.pack_objects(objects)
    assert jit_parts.unpack_objects(bundle) == objects
    assert jit_parts.unpack_objects(b"\x7fELF alone") == [b"\x7fELF alone"]
    assert jit_parts.pack_objects([b"\x7fELF alone"]) == b"\x7fELF alone"
    for cut in (bundle[:-3], bundle[:10], bundle[:20]):
        with pytest.raises(ValueError, match="malformed object bundle"):
            jit_parts.unpack_objects(cut)
