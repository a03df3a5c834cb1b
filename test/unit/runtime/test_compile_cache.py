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


def test_options_are_part_of_the_key(cache_dir: Path, lowerings: list[int]) -> None:
    dlc.compile(PROGRAM)
    dlc.compile(PROGRAM, opt_level=1)
    dlc.compile(PROGRAM, bounds_check=True)
    dlc.compile(PROGRAM, fast_math_functions=False)
    dlc.compile(PROGRAM, seed=7)  # the seed only sets the generator state
    assert len(lowerings) == 4
    options = Options(opt_level=2)
    key = api.cache_key(dlc.parse(PROGRAM), options)
    assert key == api.cache_key(dlc.parse(PROGRAM), options)
    assert key != api.cache_key(dlc.parse(PROGRAM), Options(opt_level=3))


TRAPS = """module "t"
stage raw

func @fails: (f32) -> f32 {
'entry(%x: f32):
    trap
    return %x: f32
}
"""

# The same program reformatted: other lines and columns, a comment, blank lines.
TRAPS_REFORMATTED = """// reformatted
module "t"
stage raw


func @fails: (f32) -> f32 {
'entry(%x: f32):
        trap
    return %x: f32
}
"""


def test_locations_are_not_part_of_the_key(cache_dir: Path, lowerings: list[int]) -> None:
    """One entry for any path spelling or formatting; its trap messages name the
    location in the program at hand (the entry stores them location-free)."""
    first = dlc.compile(TRAPS, filename="a.dl")
    again = dlc.compile(TRAPS_REFORMATTED, filename="./x/../a.dl")
    assert len(lowerings) == 1
    assert len(entries(cache_dir, ".o")) == 1
    with pytest.raises(dlc.TrapError, match=r"^a\.dl:6:5: trap$"):
        first.fails(np.float32(1))
    with pytest.raises(dlc.TrapError, match=r"^\./x/\.\./a\.dl:8:9: trap$"):
        again.fails(np.float32(1))
    cache.clear_memory()  # from disk: the same rendering
    with pytest.raises(dlc.TrapError, match=r"^b\.dl:8:9: trap$"):
        dlc.compile(TRAPS_REFORMATTED, filename="b.dl").fails(np.float32(1))
    assert len(lowerings) == 1


def test_portable_messages_round_trip() -> None:
    from dlc.runtime.native import portable_messages, rendered_messages

    prefixes = ["a.dl:3:5: ", "a.dl:4:5: "]
    messages = ["trap\ta.dl:4:5: trap", "bounds-value\ta.dl:3:5: index \t out", "trap\tplain"]
    portable = portable_messages(messages, prefixes)
    assert portable == ["trap\t1\ttrap", "bounds-value\t0\tindex \t out", "trap\t-\tplain"]
    assert rendered_messages(portable, prefixes) == messages
    moved = ["b.dl:9:1: ", "b.dl:10:1: "]
    assert rendered_messages(portable, moved)[0] == "trap\tb.dl:10:1: trap"  # type: ignore[index]
    # A location of this file that the program does not list: not portable, not stored.
    assert portable_messages(["trap\ta.dl:99:1: trap"], prefixes) is None
    # A malformed entry (index out of range, no index) is refused, never misrendered.
    assert rendered_messages(["trap\t7\ttrap"], prefixes) is None
    assert rendered_messages(["trap"], prefixes) is None


def test_default_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DLC_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / "dlc"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.cache_dir() == Path.home() / ".cache" / "dlc"


def test_source_fingerprint_sees_every_edit(tmp_path: Path) -> None:
    """The key's compiler fingerprint changes with a file's contents (size or time), a
    new or a renamed source, and not with bytecode or other files."""
    import os

    (tmp_path / "pkg").mkdir()
    source = tmp_path / "pkg" / "a.py"
    source.write_text("x = 1\n")
    (tmp_path / "grammar.lark").write_text("start: 'a'\n")
    os.utime(source, ns=(10**18, 10**18))
    first = cache.tree_fingerprint(str(tmp_path))
    assert cache.tree_fingerprint(str(tmp_path)) == first

    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "notes.txt").write_text("not a source\n")
    assert cache.tree_fingerprint(str(tmp_path)) == first

    source.write_text("x = 2\n")  # same size: the time tells
    os.utime(source, ns=(10**18 + 1, 10**18 + 1))
    edited = cache.tree_fingerprint(str(tmp_path))
    assert edited != first

    source.write_text("x = 22\n")  # same time: the size tells
    os.utime(source, ns=(10**18 + 1, 10**18 + 1))
    assert cache.tree_fingerprint(str(tmp_path)) not in (first, edited)

    before = cache.tree_fingerprint(str(tmp_path))
    (tmp_path / "b.py").write_text("")
    added = cache.tree_fingerprint(str(tmp_path))
    assert added != before
    (tmp_path / "b.py").rename(tmp_path / "c.py")
    assert cache.tree_fingerprint(str(tmp_path)) != added
