"""Hostile programs against dlc's temporal safety on the heap (issue 28: a pointer must
always have the true bounds of a *live* object): a load, store or copy through a pointer
to a deallocated `allocateHeap` object traps with its location, also through an interior
pointer made before the free, a pointer kept in memory, and after the memory went to a
new object of the same size; a double free and the free of an interior pointer trap; a
pointer given back to Python shows its bounds without the tag. The reference interpreter
reports each use as undefined behaviour."""

from __future__ import annotations

import numpy as np
import pytest

import dlc
from dlc.parser import parse_module
from dlc.semantics.interpreter import run_function
from dlc.semantics.values import UndefinedBehaviorError


def _module(body: str) -> str:
    return f'module "m"\nstage raw\n\nfunc @f: (i64) -> i64 {{\n\'entry(%a: i64):\n{body}\n}}\n'


ALLOCATE = "    %p = allocateHeap [4 x i64] count 1: i64\n"
LOAD_AFTER_FREE = (
    ALLOCATE
    + """    deallocate %p: *[4 x i64]
    %v = load %p: *[4 x i64]
    %r = extract 0 from %v: [4 x i64]
    return %r: i64"""
)
STORE_AFTER_FREE = (
    ALLOCATE
    + """    deallocate %p: *[4 x i64]
    %e = elementPointer %p: *[4 x i64] at 1
    store %a: i64 to %e: *i64
    return %a: i64"""
)
INTERIOR_BEFORE_FREE = (
    ALLOCATE
    + """    %e = elementPointer %p: *[4 x i64] at %a: i64
    deallocate %p: *[4 x i64]
    %v = load %e: *i64
    return %v: i64"""
)
KEPT_IN_MEMORY = (
    ALLOCATE
    + """    %slot = allocateStack *[4 x i64] count 1
    store %p: *[4 x i64] to %slot: **[4 x i64]
    deallocate %p: *[4 x i64]
    %q = load %slot: **[4 x i64]
    %e = elementPointer %q: *[4 x i64] at 0
    %v = load %e: *i64
    return %v: i64"""
)
REUSED = (
    ALLOCATE
    + """    deallocate %p: *[4 x i64]
    %q = allocateHeap [4 x i64] count 1: i64
    %e = elementPointer %p: *[4 x i64] at 0
    store %a: i64 to %e: *i64
    return %a: i64"""
)
COPY_FROM_FREED = (
    ALLOCATE
    + """    %q = allocateHeap [4 x i64] count 1: i64
    deallocate %p: *[4 x i64]
    copy from %p: *[4 x i64] to %q: *[4 x i64] count 1: i64
    return %a: i64"""
)


@pytest.mark.parametrize("opt_level", [0, 2])
@pytest.mark.parametrize(
    ("body", "message"),
    [
        (LOAD_AFTER_FREE, "m.dl:8:10: load through a pointer to a deallocated heap object"),
        (STORE_AFTER_FREE, "m.dl:9:5: store through a pointer to a deallocated heap object"),
        (INTERIOR_BEFORE_FREE, "m.dl:9:10: load through a pointer to a deallocated heap object"),
        (KEPT_IN_MEMORY, "m.dl:12:10: load through a pointer to a deallocated heap object"),
        (REUSED, "m.dl:10:5: store through a pointer to a deallocated heap object"),
        (COPY_FROM_FREED, "m.dl:9:5: load through a pointer to a deallocated heap object"),
    ],
)
def test_use_after_free_traps(opt_level: int, body: str, message: str) -> None:
    mod = dlc.compile(_module(body), filename="m.dl", opt_level=opt_level)
    with pytest.raises(dlc.TrapError) as info:
        mod.f(np.int64(1))
    assert str(info.value) == message
    with pytest.raises(UndefinedBehaviorError, match="freed"):
        run_function(parse_module(_module(body)), "f", [np.int64(1)])


DOUBLE_FREE = (
    ALLOCATE
    + """    deallocate %p: *[4 x i64]
    deallocate %p: *[4 x i64]
    return %a: i64"""
)
INTERIOR_FREE = (
    ALLOCATE
    + """    %e = elementPointer %p: *[4 x i64] at 1
    deallocate %e: *i64
    return %a: i64"""
)


@pytest.mark.parametrize("body", [DOUBLE_FREE, INTERIOR_FREE])
def test_double_and_interior_free_trap(body: str) -> None:
    mod = dlc.compile(_module(body), filename="m.dl")
    with pytest.raises(dlc.TrapError) as info:
        mod.f(np.int64(1))
    assert str(info.value) == (
        "m.dl:8:5: deallocate of memory that is not a live heap object (deallocated twice?)"
    )


def test_live_objects_work_and_show_true_bounds() -> None:
    """Loads and stores through live heap pointers (and interior ones) are unaffected,
    and a pointer returned to Python is (address, start, end) without the tag."""
    text = """module "m"
stage raw

func @f: (i64) -> *[4 x i64] {
'entry(%a: i64):
    %p = allocateHeap [4 x i64] count 2: i64
    %e = elementPointer %p: *[4 x i64] at 3
    store %a: i64 to %e: *i64
    %v = load %e: *i64
    %q = elementPointer %p: *[4 x i64] at 0
    store %v: i64 to %q: *i64
    return %p: *[4 x i64]
}
"""
    address, lower, upper = dlc.compile(text).f(np.int64(5))
    assert lower == address and upper - lower == 64
