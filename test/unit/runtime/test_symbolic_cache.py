"""Modules with symbolic dimensions in the compile cache: found again in memory and on
disk (no lowering, no native compile), keyed by their symbolic types (a compile of the
same program at a concrete size, or with other names, is another entry), their trap
messages naming this program's locations."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dlc
from dlc.runtime import cache, jit

pytestmark = pytest.mark.filterwarnings("error::dlc.runtime.cache.UntrustedCacheWarning")

PROGRAM = """module "g"
stage raw

func @g: (<5 x 3 x f32>, <1 x %n x i64>) -> <1 x %n x 3 x f32> {
'entry(%t: <5 x 3 x f32>, %i: <1 x %n x i64>):
    %y = gather %t: <5 x 3 x f32> at %i: <1 x %n x i64> along 0
    %z = multiply %y: <1 x %n x 3 x f32>, 2: f32
    return %z: <1 x %n x 3 x f32>
}
"""

T = np.arange(15, dtype=np.float32).reshape(5, 3)


def check(module: dlc.CompiledModule, n: int) -> None:
    i = np.arange(n, dtype=np.int64)[None] % 5
    np.testing.assert_array_equal(module.g(T, i), 2 * T[i[0]][None])


def entries(directory: Path) -> list[Path]:
    return sorted((directory / f"v{cache.FORMAT}").glob("*.o"))


def test_a_symbolic_module_is_found_again(cache_dir: Path, lowerings: list[int]) -> None:
    first = dlc.compile(PROGRAM, filename="g.dl")
    natives = jit.NATIVE_COMPILES[0]
    second = dlc.compile(PROGRAM, filename="g.dl")
    assert len(lowerings) == 1 and jit.NATIVE_COMPILES[0] == natives
    for n in (1, 7, 40):
        check(first, n)
        check(second, n)
    assert second.stats("g")["compiles"] == 0 and second.stats("g")["sizes_called"] == 3
    assert len(entries(cache_dir)) == 1
    cache.clear_memory()  # from disk
    third = dlc.compile(PROGRAM, filename="g.dl")
    assert len(lowerings) == 1
    check(third, 9)
    with pytest.raises(IndexError, match=r"g.dl:6:10: out-of-bounds gather index 5"):
        third.g(T, np.array([[0, 5]]))


def test_trap_messages_name_the_locations_of_the_program_found(cache_dir: Path) -> None:
    dlc.compile(PROGRAM, filename="g.dl")
    moved = dlc.compile("\n\n" + PROGRAM, filename="other.dl")  # the same code, two lines on
    with pytest.raises(IndexError, match=r"other.dl:8:10: out-of-bounds gather index 5"):
        moved.g(T, np.array([[0, 5]]))


def test_symbolic_and_concrete_sizes_are_other_entries(
    cache_dir: Path, lowerings: list[int]
) -> None:
    dlc.compile(PROGRAM)
    concrete = dlc.compile(PROGRAM.replace("%n", "4"))
    renamed = dlc.compile(PROGRAM.replace("%n", "%m"))
    assert len(lowerings) == 3 and len(entries(cache_dir)) == 3
    check(concrete, 4)
    check(renamed, 6)
