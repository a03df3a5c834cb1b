"""Hostile programs against dlc's pointer safety: no program can make a pointer that is
not dlc's own (an allocation, a var's address, `elementPointer`, `projectBox`) with the
true bounds of its object.

Stacks are typed: `pop T` of an item pushed with another type traps, so three i64 never
come back as a pointer (issue 28: a forged `*i64` read a Python `bytes`' contents and
stored to address 16), and a destroyed or never-created stack traps instead of
corrupting the heap. The enumeration test lists every graph op and checks each op that
can yield a pointer, or reinterpret bytes, on a hostile program."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dlc
from dlc.dialects.graph import InferenceError, Symbols, all_graph_ops
from dlc.dialects.graph_types import PointerType, TensorType
from dlc.parser import parse_module
from dlc.semantics.interpreter import run_function
from dlc.semantics.values import UndefinedBehaviorError


def _module(body: str, prelude: str = "") -> str:
    return f'module "m"\nstage raw\n{prelude}\nfunc @f: (i64) -> i64 {{\n\'entry(%a: i64):\n{body}\n}}\n'


FORGE = """    %fat = literal <0: i64, 0: i64, 4611686018427387904: i64>: <3 x i64>
    %f = insert %a: i64 to %fat: <3 x i64> at 0
    %st = createStack
    push %f: <3 x i64> to %st: stack
    %p = pop *i64 from %st: stack
    %v = load %p: *i64
    return %v: i64"""


@pytest.mark.parametrize("opt_level", [0, 2])
@pytest.mark.parametrize("address", [16, 0x10000])
def test_forged_pointer_from_a_stack_traps(opt_level: int, address: int) -> None:
    """Issue 28's reproduction: once a load through any address (SIGSEGV at 16)."""
    mod = dlc.compile(_module(FORGE), filename="forge.dl", opt_level=opt_level, bounds_check=True)
    with pytest.raises(dlc.TrapError) as info:
        mod.f(np.int64(address))
    assert str(info.value) == "forge.dl:10:10: pop *i64 from a stack whose top item is not a *i64"
    with pytest.raises(UndefinedBehaviorError, match=r"pop \*i64 from a stack whose top"):
        run_function(parse_module(_module(FORGE)), "f", [np.int64(address)])


LEAK = """    %p = allocateHeap i64 count 1: i64
    %st = createStack
    push %p: *i64 to %st: stack
    %v = pop <3 x i64> from %st: stack
    %r = extract 0 from %v: <3 x i64>
    return %r: i64"""

SMALLER = """    %st = createStack
    push %a: i64 to %st: stack
    push %a: i64 to %st: stack
    %v = pop <2 x i64> from %st: stack
    %r = extract 0 from %v: <2 x i64>
    return %r: i64"""


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (LEAK, "m.dl:9:10: pop <3 x i64> from a stack whose top item is not a <3 x i64>"),
        (SMALLER, "m.dl:9:10: pop <2 x i64> from a stack whose top item is not a <2 x i64>"),
    ],
)
def test_pop_of_another_type_traps(body: str, message: str) -> None:
    """A pointer never comes back as integers (a heap address leak), and two items
    never come back as one."""
    with pytest.raises(dlc.TrapError) as info:
        dlc.compile(_module(body), filename="m.dl").f(np.int64(1))
    assert str(info.value) == message


THROUGH_STACK = """    %p = allocateHeap [2 x i64] count 1: i64
    %st = createStack
    push 7: i64 to %st: stack
    push %p: *[2 x i64] to %st: stack
    %q = pop *[2 x i64] from %st: stack
    %e = elementPointer %q: *[2 x i64] at %a: i64
    store 5: i64 to %e: *i64
    %v = load %e: *i64
    %w = pop i64 from %st: stack
    %r = add %v: i64, %w: i64
    destroyStack %st: stack
    return %r: i64"""


def test_pointer_through_a_stack_keeps_its_bounds() -> None:
    mod = dlc.compile(_module(THROUGH_STACK), filename="s.dl")
    assert mod.f(np.int64(1)) == 12
    with pytest.raises(IndexError, match=r"s.dl:12:5: out-of-bounds store of 8 bytes .* 16"):
        mod.f(np.int64(2))


@pytest.mark.parametrize(
    ("body", "message", "reference"),
    [
        (
            "    %s = createStack\n    destroyStack %s: stack\n    push %a: i64 to %s: stack\n"
            "    return %a: i64",
            "d.dl:8:5: push to a destroyed stack",
            "push to a destroyed stack",
        ),
        (
            "    %s = createStack\n    push %a: i64 to %s: stack\n    destroyStack %s: stack\n"
            "    %r = pop i64 from %s: stack\n    return %r: i64",
            "d.dl:9:10: pop from a destroyed stack",
            "pop from a destroyed stack",
        ),
        (
            "    %s = literal undefined: stack\n    push %a: i64 to %s: stack\n    return %a: i64",
            "d.dl:7:5: push to a stack that was never created",
            None,
        ),
    ],
)
def test_destroyed_or_missing_stack_traps(body: str, message: str, reference: str | None) -> None:
    """`push` after `destroyStack` once wrote through freed memory (a glibc abort)."""
    with pytest.raises(dlc.TrapError) as info:
        dlc.compile(_module(body), filename="d.dl").f(np.int64(3))
    assert str(info.value) == message
    if reference is not None:
        with pytest.raises(UndefinedBehaviorError, match=reference):
            run_function(parse_module(_module(body)), "f", [np.int64(3)])


@pytest.mark.parametrize(
    ("use", "where"),
    [
        ("    %p = projectBox %b: box{i64}\n    %r = load %p: *i64\n    return %r: i64", "8:10"),
        ("    release %b: box{i64}\n    return %a: i64", "7:5"),
        ("    retain %b: box{i64}\n    return %a: i64", "7:5"),
    ],
)
def test_null_box_traps(use: str, where: str) -> None:
    """A box that was never allocated (a zero value) once gave a pointer to address 8."""
    body = "    %b = literal undefined: box{i64}\n" + use
    with pytest.raises(IndexError) as info:
        dlc.compile(_module(body), filename="b.dl").f(np.int64(1))
    assert str(info.value) == (
        f"b.dl:{where}: out-of-bounds load of 8 bytes through a pointer at byte offset 0"
    )


def test_destroying_a_stack_twice_is_harmless() -> None:
    body = "    %s = createStack\n    destroyStack %s: stack\n    destroyStack %s: stack\n"
    assert dlc.compile(_module(body + "    return %a: i64")).f(np.int64(4)) == 4


# -- every op that yields a pointer or reinterprets bytes -----------------------------

ARRAY = "    %p = allocateHeap [2 x i64] count 1: i64\n"
INDEXED = (
    "    %e = elementPointer {}: *[2 x i64] at %a: i64\n    %r = load %e: *i64\n    return %r: i64"
)

# Each case: (prelude, body, outcome); the outcome is "bounds" (a = 1 loads, a = 2 is an
# out-of-bounds load: the pointer has its object's true bounds), "null" (the pointer is
# null: any load traps), or the message of the located error that refuses the program.
CASES: dict[str, tuple[str, str, str]] = {
    "allocateHeap": ("", ARRAY + INDEXED.format("%p"), "bounds"),
    "allocateStack": (
        "",
        "    %p = allocateStack [2 x i64] count 1\n" + INDEXED.format("%p"),
        "bounds",
    ),
    "projectBox": (
        "",
        "    %b = allocateBox [2 x i64]\n    %p = projectBox %b: box{[2 x i64]}\n"
        + INDEXED.format("%p"),
        "bounds",
    ),
    "elementPointer": (
        "",
        "    %p = allocateHeap [2 x [2 x i64]] count 1: i64\n"
        "    %q = elementPointer %p: *[2 x [2 x i64]] at 1\n" + INDEXED.format("%q"),
        "bounds",
    ),
    "graph.global_ref": ("var @g: [2 x i64]", INDEXED.format("@g"), "bounds"),
    "pop": (
        "",
        ARRAY + "    %s = createStack\n    push %p: *[2 x i64] to %s: stack\n"
        "    %q = pop *[2 x i64] from %s: stack\n" + INDEXED.format("%q"),
        "bounds",
    ),
    "load": (
        "",
        ARRAY + "    %c = allocateHeap *[2 x i64] count 1: i64\n"
        "    store %p: *[2 x i64] to %c: **[2 x i64]\n    %q = load %c: **[2 x i64]\n"
        + INDEXED.format("%q"),
        "bounds",
    ),
    "extract": (
        "",
        ARRAY + "    %t = literal (%p: *[2 x i64], 0: i64): (*[2 x i64], i64)\n"
        "    %q = extract 0 from %t: (*[2 x i64], i64)\n" + INDEXED.format("%q"),
        "bounds",
    ),
    "insert": (
        "",
        ARRAY + "    %t = literal (%p: *[2 x i64], 0: i64): (*[2 x i64], i64)\n"
        "    %u = insert %p: *[2 x i64] to %t: (*[2 x i64], i64) at 0\n"
        "    %q = extract 0 from %u: (*[2 x i64], i64)\n" + INDEXED.format("%q"),
        "bounds",
    ),
    "apply": (
        "func @id: (*[2 x i64]) -> *[2 x i64] {\n'entry(%x: *[2 x i64]):\n"
        "    return %x: *[2 x i64]\n}\n",
        ARRAY
        + "    %q = apply @id(%p: *[2 x i64]): (*[2 x i64]) -> *[2 x i64]\n"
        + INDEXED.format("%q"),
        "bounds",
    ),
    "literal": ("", "    %q = literal undefined: *[2 x i64]\n" + INDEXED.format("%q"), "null"),
    "bitCast": (
        "",
        "    %v = literal <0: i64, 0: i64, 64: i64>: <3 x i64>\n"
        "    %q = bitCast %v: <3 x i64> to *[2 x i64]\n" + INDEXED.format("%q"),
        "not supported by the code generator yet: bitCast of a non-tensor value",
    ),
    "copy": (
        "",
        ARRAY + "    %c = allocateHeap *[2 x i64] count 1: i64\n"
        "    store %p: *[2 x i64] to %c: **[2 x i64]\n"
        "    %d = allocateHeap *[2 x i64] count 1: i64\n"
        "    copy from %c: **[2 x i64] to %d: **[2 x i64] count 1: i64\n"
        "    %q = load %d: **[2 x i64]\n" + INDEXED.format("%q"),
        "bounds",
    ),
}

# Ops that yield no pointer: numbers, tensors, stacks, boxes or nothing.
NO_POINTER = set(
    """sinh cosh tanh log exp negate sign square sqrt round rsqrt ceil floor tan cos sin acos
    asin atan lgamma digamma erf erfc rint add subtract multiply divide min max truncateDivide
    floorDivide modulo power and or xor shiftLeft shiftRight lessThan lessThanOrEqual
    greaterThan greaterThanOrEqual equal notEqual not select dataTypeCast scan reduce
    reduceWindow dot concatenate transpose reverse slice convolve rank shape unitCount
    padShape squeezeShape shapeCast gather gatherElements gatherND scatterElements scatterND
    einsum topK topKIndices createStack destroyStack push allocateBox retain release
    deallocate store trap random""".split()
)
# Declarations and terminators: no results (block arguments carry what they are given).
NO_INFER = {
    "graph.struct",
    "graph.enum",
    "graph.type_alias",
    "graph.var",
    "graph.func",
    "graph.branch",
    "graph.conditional",
    "graph.branch_enum",
    "graph.return",
}


def _opcode(cls: type) -> str:
    return getattr(cls, "OPCODE", cls.name)


@pytest.mark.parametrize("opcode", sorted(CASES))
def test_every_pointer_source_refuses_or_has_true_bounds(opcode: str) -> None:
    prelude, body, outcome = CASES[opcode]
    text = _module(body, prelude)
    if outcome not in ("bounds", "null"):
        with pytest.raises(dlc.DiagnosticError) as info:
            dlc.compile(text, filename="p.dl")
        assert info.value.message == outcome and info.value.line > 0
        return
    mod = dlc.compile(text, filename="p.dl")
    if outcome == "bounds":
        assert mod.f(np.int64(1)) == 0
    with pytest.raises(IndexError, match=r"p.dl:\d+:\d+: out-of-bounds load of 8 bytes"):
        mod.f(np.int64(2))


def test_every_graph_op_is_classified() -> None:
    """A new op must be classified: a hostile case in CASES if it can yield a pointer or
    reinterpret bytes, else NO_POINTER (checked: its inference yields no pointer from
    pointer operands) or NO_INFER."""
    opcodes = [_opcode(cls) for cls in all_graph_ops()]
    assert set(opcodes) == {*CASES, *NO_POINTER, *NO_INFER}
    pointer = PointerType(TensorType((), "i64"))
    for cls in all_graph_ops():
        opcode = _opcode(cls)
        if opcode not in NO_POINTER:
            continue
        for count in (1, 2, 3):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    results = cls.infer([pointer] * count, {}, Symbols())
                except (InferenceError, ValueError, KeyError, IndexError):
                    continue
            assert not any(isinstance(t, PointerType) for t in results), opcode
