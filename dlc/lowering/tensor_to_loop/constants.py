"""Constants of the tensor -> loop lowering, made once per function.

The nest builder asks for the same index constants at every point of a register tile
and every loop it opens (offsets, steps, bounds), and a compute body's constants are
inlined at every point: ResNet-50's loop level had 4,400 `arith.constant`s, four in
five of them repeating one that dominates them. `constant(b, attr)` returns the
function's one `arith.constant` of `attr`, made at the start of the function's entry
block (after the constants made there before), so it dominates every use in the
function; its cost is a walk up to the function. Inside a parallel loop, the
constants go to the start of the loop's body instead: `lower-loop-to-llvm` outlines
the body and would pass a constant from outside in as a value, where LLVM no longer
sees it is constant. LLVM folds constants into their uses either way, so the
generated code is the same (compared: the optimized LLVM IR of the benchmarks).

Where the builder's block is not (yet) inside a `loop.func` (a detached op), the
constants go to the outermost block the walk reaches, which holds every use made
there. A constant that was moved or erased since is made again.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import cast
from weakref import WeakKeyDictionary

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp, i64
from xdsl.ir import Attribute, Block, Operation, SSAValue

from dlc.analysis.walk import kind_of
from dlc.dialects import loop
from dlc.lowering.tensor_to_loop.loop_ops import addi

_Table = dict[Hashable, Operation]
_TABLES: WeakKeyDictionary[Block, _Table] = WeakKeyDictionary()


def constant(b: Builder, value: IntegerAttr | FloatAttr) -> SSAValue:
    """The `arith.constant` of `value` that dominates `b`'s insertion point (module
    docstring)."""
    return _constant(b, _key(value), lambda: value)


def index(b: Builder, value: int) -> SSAValue:
    """`constant` of the i64 `value` (its attribute built only when first made)."""
    return _constant(b, ("i", i64, value), lambda: IntegerAttr(value, i64))


def _constant(b: Builder, key: Hashable, value: Callable[[], IntegerAttr | FloatAttr]) -> SSAValue:
    top = _top_block(b.insertion_point.block)
    table = _TABLES.get(top)
    if table is None:
        table = _TABLES[top] = {}
    found = table.get(key)
    if found is not None and found.parent is top:
        return found.results[0]
    op = arith.ConstantOp(value())
    anchor = table.get(_ANCHOR)
    if anchor is not None and anchor.parent is top:
        top.insert_op_after(op, anchor)
    elif top.first_op is None:
        top.add_op(op)
    else:
        top.insert_op_before(op, top.first_op)
    table[key] = table[_ANCHOR] = op
    return op.result


_ANCHOR = "anchor"
"""The table's entry for the last constant made: the next one goes after it."""


def made(b: Builder, key: Hashable, make: Callable[[], Operation]) -> Operation:
    """The op of `key` made before in `b`'s block, else `make()` inserted at `b` (and
    remembered there unless `b` inserts before an op other than the block's last: a
    later use could then come before it). A key determines the op's value."""
    where = b.insertion_point
    block = where.block
    if where.insert_before is not None and where.insert_before is not block.last_op:
        return b.insert(make())
    table = _TABLES.get(block)
    if table is None:
        table = _TABLES[block] = {}
    found = table.get(key)
    if found is not None and found.parent is block:
        return found
    op = table[key] = b.insert(make())
    return op


def offset(b: Builder, base: SSAValue, value: int) -> SSAValue:
    """`base + value` (an i64 `arith.addi` of the function's constant), made once per
    block: the points of a register tile share their rows and columns."""
    make = lambda: addi(base, index(b, value))  # noqa: E731
    return made(b, ("+", base, value), make).results[0]


SHARED = (
    arith.AddiOp,
    arith.SubiOp,
    arith.MuliOp,
    arith.DivUIOp,
    arith.RemUIOp,
    arith.DivSIOp,
    arith.RemSIOp,
    arith.MinSIOp,
    arith.MaxSIOp,
    arith.CmpiOp,
    arith.AndIOp,
    arith.OrIOp,
)
"""Integer ops a compute body repeats at every point of a tile: `shared` makes each
once per block."""


def shared(b: Builder, inner: Operation, mapping: dict[SSAValue, SSAValue]) -> None:
    """Clone body op `inner` (one of `SHARED`) at `b` with `mapping`, or map its result
    to the same op made before in the block (the same operands, properties and
    attributes: the same value)."""
    operands = tuple(mapping.get(v, v) for v in inner.operands)
    key = ("=", type(inner), operands, _items(inner.properties), _items(inner.attributes))
    op = made(b, key, lambda: inner.clone(mapping))
    mapping[inner.results[0]] = op.results[0]


_READ_ONLY: WeakKeyDictionary[Block, object] = WeakKeyDictionary()


@contextmanager
def read_only(block: Block) -> Iterator[None]:
    """While inside, nothing stores in `block`: `loaded` may give a load made before
    in the same `read_only` stretch (never one made before a store)."""
    _READ_ONLY[block] = object()
    try:
        yield
    finally:
        del _READ_ONLY[block]


def loaded(b: Builder, key: Hashable, make: Callable[[], Operation]) -> Operation:
    """A load (`key`: buffer, indices, lanes) made before in `b`'s block while it is
    `read_only`, else `make()` inserted at `b`."""
    stretch = _READ_ONLY.get(b.insertion_point.block)
    if stretch is not None:
        return made(b, ("load", stretch, key), make)
    return b.insert(make())


def _items(attributes: dict[str, Attribute]) -> Hashable:
    return tuple(sorted(attributes.items()))


def _key(value: IntegerAttr | FloatAttr) -> Hashable:
    """Equal keys for equal constants: floats by their bits (0.0 != -0.0, NaN == NaN)."""
    if isinstance(value, FloatAttr):
        return ("f", value.type, struct.pack("<d", value.value.data))
    return ("i", value.type, value.value.data)


_TOPS = (ModuleOp, loop.FuncOp, loop.ForOp)
_TOP_KINDS: dict[type, int] = {}  # an op class -> its `kind_of` `_TOPS`


def _top_block(block: Block) -> Block:
    """The body of the innermost parallel loop holding `block`, else the entry block
    of its `loop.func`, else the outermost block above it."""
    while True:
        region = block.parent
        op: Operation | None = region.parent if region is not None else None
        kind = 1 if op is None else kind_of(op, _TOPS, _TOP_KINDS)
        if kind == 1:
            return block
        if kind == 2:
            entry = cast(loop.FuncOp, op).body.blocks.first
            return block if entry is None else entry
        if kind == 3 and cast(loop.ForOp, op).parallel is not None:
            return block  # its body is outlined: a constant from outside is passed in
        assert op is not None
        parent = op.parent
        if parent is None:
            return block
        block = parent
