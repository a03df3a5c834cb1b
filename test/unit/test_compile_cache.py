"""The compile cache (dlc/runtime/cache.py): memory and disk hits skip lowering, every
hit is an independent module, corrupt entries are rebuilt, DLC_CACHE=0 turns it off."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import dlc
from dlc import api
from dlc.pipeline import Options
from dlc.runtime import cache
from dlc.runtime.module import CompiledModule

# A trusted cache never warns (test_cache_trust.py tests the warnings).
pytestmark = pytest.mark.filterwarnings("error::dlc.runtime.cache.UntrustedCacheWarning")

PROGRAM = """module "c"
stage raw

func @axpy: (f32, <4 x f32>, <4 x f32>) -> <4 x f32> {
'entry(%a: f32, %x: <4 x f32>, %y: <4 x f32>):
    %0.0 = multiply %a: f32, %x: <4 x f32>
    %0.1 = add %0.0: <4 x f32>, %y: <4 x f32>
    return %0.1: <4 x f32>
}

func @u: () -> <8 x f64> {
'entry():
    %r = random 8 from 0: f64 upto 1: f64
    return %r: <8 x f64>
}
"""

X = np.arange(4, dtype=np.float32)


def entries(directory: Path, suffix: str) -> list[Path]:
    return sorted((directory / f"v{cache.FORMAT}").glob(f"*{suffix}"))


def check(mod: CompiledModule) -> None:
    np.testing.assert_array_equal(mod.axpy(np.float32(2), X, X), 3 * X)


def test_second_compile_hits_memory(cache_dir: Path, lowerings: list[int]) -> None:
    first = dlc.compile(PROGRAM)
    second = dlc.compile(PROGRAM)
    assert len(lowerings) == 1
    check(first)
    check(second)
    assert second.ir("llvm") == first.ir("llvm")
    assert second.stats("axpy") == first.stats("axpy")
    assert len(lowerings) == 1  # the optimized IR and the stats come with the entry
    assert len(entries(cache_dir, ".o")) == 1 and len(entries(cache_dir, ".json")) == 1


def test_memory_cache_is_bounded(
    cache_dir: Path, lowerings: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache, "MEMORY_ENTRIES", 1)
    dlc.compile(PROGRAM)
    dlc.compile(PROGRAM, opt_level=1)  # evicts the first entry from memory
    assert len(cache._MEMORY) == 1
    check(dlc.compile(PROGRAM))  # from disk
    assert len(lowerings) == 2


def test_disk_hit_rebuilds_without_lowering(cache_dir: Path, lowerings: list[int]) -> None:
    first = dlc.compile(PROGRAM)
    cache.clear_memory()
    again = dlc.compile(PROGRAM)
    assert len(lowerings) == 1
    check(again)
    assert again.stats("u") == first.stats("u")
    # the other levels are lowered again on demand (once per module), identically
    assert again.ir("loop") == first.ir("loop")
    assert again.ir("llvm") == first.ir("llvm")
    assert again.ir("tensor") == first.ir("tensor")
    assert len(lowerings) == 3


def test_hits_are_independent_modules(cache_dir: Path) -> None:
    a = dlc.compile(PROGRAM, seed=3)
    b = dlc.compile(PROGRAM, seed=3)
    assert a._jit is not b._jit
    first = a.u()
    np.testing.assert_array_equal(b.u(), first)  # b's generator did not advance with a's
    assert not np.array_equal(a.u(), first)
    c = dlc.compile(PROGRAM, seed=4)  # seed is not part of the key, but applied
    assert not np.array_equal(c.u(), first)
    del a, b  # c's code stays alive on its own engine
    check(c)


@pytest.mark.parametrize("damage", ["truncate_object", "flip_object", "bad_json", "no_json"])
def test_corrupt_entry_is_ignored_and_rebuilt(
    cache_dir: Path, lowerings: list[int], damage: str
) -> None:
    dlc.compile(PROGRAM)
    cache.clear_memory()
    (obj,) = entries(cache_dir, ".o")
    (meta,) = entries(cache_dir, ".json")
    data = obj.read_bytes()
    if damage == "truncate_object":
        obj.write_bytes(data[: len(data) // 2])
    elif damage == "flip_object":
        obj.write_bytes(data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])
    elif damage == "bad_json":
        meta.write_text(meta.read_text()[:-20])
    else:
        meta.unlink()
    check(dlc.compile(PROGRAM))
    assert len(lowerings) == 2  # rebuilt
    assert obj.read_bytes() == data  # and rewritten
    cache.clear_memory()
    check(dlc.compile(PROGRAM))
    assert len(lowerings) == 2  # the rewritten entry is good


def test_malformed_metadata_is_rejected(cache_dir: Path, lowerings: list[int]) -> None:
    dlc.compile(PROGRAM)
    cache.clear_memory()
    (meta,) = entries(cache_dir, ".json")
    record = json.loads(meta.read_text())
    record["meta"]["vars"] = {"x": "__import__('os')"}
    meta.write_text(json.dumps(record))
    check(dlc.compile(PROGRAM))
    assert len(lowerings) == 2


def test_disabled_cache_writes_nothing(
    cache_dir: Path, lowerings: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DLC_CACHE", "0")
    check(dlc.compile(PROGRAM))
    check(dlc.compile(PROGRAM))
    assert len(lowerings) == 2
    assert not (cache_dir / f"v{cache.FORMAT}").exists()


def test_options_and_locations_are_part_of_the_key(cache_dir: Path, lowerings: list[int]) -> None:
    dlc.compile(PROGRAM)
    dlc.compile(PROGRAM, opt_level=1)
    dlc.compile(PROGRAM, bounds_check=True)
    dlc.compile(PROGRAM, fast_math_functions=False)
    dlc.compile(PROGRAM, filename="other.dl")  # trap / bounds messages name the file
    assert len(lowerings) == 5
    options = Options(opt_level=2)
    key = api.cache_key(dlc.parse(PROGRAM), options)
    assert key == api.cache_key(dlc.parse(PROGRAM), options)
    assert key != api.cache_key(dlc.parse(PROGRAM, "b.dl"), options)
    assert key != api.cache_key(dlc.parse(PROGRAM), Options(opt_level=3))


def test_default_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DLC_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / "dlc"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.cache_dir() == Path.home() / ".cache" / "dlc"
