"""Prebuilt ops: the ops lowerings build by the ten thousand, made from a prototype.

xDSL's generic constructor (`irdl_op_init`) checks and sorts every argument against
the op's definition: about half of what building an op costs, and the loop and llvm
levels of a whole model are tens of thousands of ops. `like(key, build, operands)`
builds the op of `key` once with its own constructor (`build`) and keeps its class,
result types, properties and attributes; later ops of the same key are made with
`Operation.create` from those and the new operands, so they are the ops the
constructor would have made (`test/unit/lowering/test_prebuilt.py` compares them). A key must
determine everything but the operands: the op's class and each argument of `build`
that is not an operand. `make(cls, *args)` is `cls(*args)` keyed by itself: by the
class, the arguments that are not values or blocks, the values' types and which
arguments are the same value. Inside `with constructors():` every op is built by its
constructor, and prototypes are still kept: the tests compare the IR of both paths
(`test/unit/lowering/loop_to_llvm/test_prebuilt_llvm.py`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from enum import Enum
from typing import Any, TypeVar, cast

from xdsl.dialects import llvm
from xdsl.dialects.builtin import UNKNOWN_LOC, IntegerAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue

_Proto = tuple[type[Operation], tuple[Attribute, ...], dict[str, Attribute], dict[str, Attribute]]
_PROTOS: dict[Hashable, _Proto] = {}
_ON = [True]  # False inside `constructors()`
OpT = TypeVar("OpT", bound=Operation)


@contextmanager
def constructors() -> Iterator[None]:
    """Build every op with its constructor meanwhile (prototypes are kept, not used)."""
    _ON.append(False)
    try:
        yield
    finally:
        _ON.pop()


_FAST: dict[Hashable, tuple[Any, tuple[Attribute, ...]]] = {}
"""Prototypes by the identity of the attributes in their key (hashing an attribute is
slow, its object is mostly the one the prototype's result types or a module constant
hold), with those attributes, so that no other object takes their `id`."""
_FAST_LIMIT = 50_000
_ID = object()  # marks an attribute's id in a fast key


def _remember(fast_key: Hashable, found: object, keep: list[Attribute]) -> None:
    if len(_FAST) >= _FAST_LIMIT:
        _FAST.clear()
    _FAST[fast_key] = (found, tuple(keep))


def like(key: Hashable, build: Callable[[], Operation], operands: Sequence[SSAValue]) -> Operation:
    """The op `build()` makes (`build` uses `operands`), from the prototype of `key`."""
    keep: list[Attribute] = []
    fast_key: Hashable = (like, key)
    if type(key) is tuple:
        parts: list[object] = [like]
        for k in key:
            if (_KINDS.get(type(k)) or _kind(type(k))) == _ATTRIBUTE:
                keep.append(k)
                parts.append((_ID, id(k)))
            else:
                parts.append(k)
        fast_key = tuple(parts)
    hit = _FAST.get(fast_key)
    proto = hit[0] if hit is not None else _PROTOS.get(key)
    if proto is None or not _ON[-1]:
        op = build()
        types = tuple(r.type for r in op.results)
        proto = _PROTOS[key] = (type(op), types, dict(op.properties), dict(op.attributes))
        _remember(fast_key, proto, keep)
        return op
    if hit is None:
        _remember(fast_key, proto, keep)
    cls, types, properties, attributes = proto
    return cls.create(
        operands=operands,
        result_types=types,
        properties=dict(properties),
        attributes=dict(attributes),
        location=UNKNOWN_LOC,  # what xDSL gives, without its import on every op
    )


class _Uncached(Exception):
    """An argument that cannot be part of a key (an op, a region, a mutable object)."""


_ATOMS = (Attribute, str, int, bool, Enum, type(None))
# (class, result types, properties, attributes, operand -> value, successor -> block)
_Made = tuple[
    type[Operation],
    tuple[Attribute, ...],
    dict[str, Attribute],
    dict[str, Attribute],
    tuple[int, ...],
    tuple[int, ...],
]
_MADE: dict[Hashable, _Made | None] = {}  # None: the op cannot be made from a prototype


def _atom(a: object, values: list[SSAValue], seen: dict[int, int], blocks: list[Block]) -> object:
    """`a` as part of a key; values and blocks are numbered into `values` and `blocks`."""
    kind = _KINDS.get(type(a)) or _kind(type(a))
    if kind == _VALUE:
        value = cast(SSAValue, a)
        first = seen.setdefault(id(a), len(values))
        values.append(value)
        return (value.type, first)  # its type, and which earlier argument it is
    if kind == _BLOCK:
        blocks.append(cast(Block, a))
        return Block
    if kind == _FLOAT:
        return (float, struct.pack("<d", a))  # 0.0 == -0.0 as Python floats
    if kind in (_ATTRIBUTE, _ATOM):
        return a
    raise _Uncached


def _key(args: Sequence[object], values: list[SSAValue], blocks: list[Block]) -> tuple:
    """The key of constructor arguments `args` (items of lists and tuples one by one)."""
    seen: dict[int, int] = {}
    key: list[object] = []
    for a in args:
        if isinstance(a, list | tuple):
            key.append((len(a), *(_atom(x, values, seen, blocks) for x in a)))
        else:
            key.append(_atom(a, values, seen, blocks))
    return tuple(key)


_KINDS: dict[type, int] = {}  # a class -> what its objects are in a key (`_kind`)
_VALUE, _ATTRIBUTE, _FLOAT, _BLOCK, _ATOM, _SEQUENCE, _OTHER = range(1, 8)  # never 0


def _kind(t: type) -> int:
    """What objects of class `t` are in a key (`isinstance` of an ABC is slow: by class
    once)."""
    kinds = (SSAValue, Attribute, float, Block, _ATOMS, list | tuple)
    found = next((k for k, c in enumerate(kinds, start=1) if issubclass(t, c)), _OTHER)
    _KINDS[t] = found
    return found


def _fast_key(
    cls: type[Operation],
    args: Sequence[object],
    keep: list[Attribute],
    values: list[SSAValue],
    blocks: list[Block],
) -> tuple:
    """The key of `args` with attributes (and values' types) by their identity, kept in
    `keep`; values and blocks in `values` and `blocks`, numbered as `_key` does."""
    seen: dict[int, int] = {}
    key: list[object] = [make, cls]
    for a in args:
        kind = _KINDS.get(type(a)) or _kind(type(a))
        items = cast("Sequence[object]", a) if kind == _SEQUENCE else (a,)
        part: list[object] = [len(items)] if kind == _SEQUENCE else []
        for x in items:
            kind = _KINDS.get(type(x)) or _kind(type(x))
            if kind == _VALUE:  # the kinds say what `x` is (`cast`: no check, no cost)
                value = cast(SSAValue, x)
                keep.append(value.type)
                part.append((_ID, id(value.type), seen.setdefault(id(x), len(values))))
                values.append(value)
            elif kind == _ATTRIBUTE:
                keep.append(cast(Attribute, x))
                part.append((_ID, id(x)))
            elif kind == _FLOAT:
                part.append((float, struct.pack("<d", x)))
            elif kind == _BLOCK:
                blocks.append(cast(Block, x))
                part.append(Block)
            elif kind == _ATOM:
                part.append(x)
            else:
                raise _Uncached
        key.append(tuple(part))
    return tuple(key)


def _prototype(op: Operation, values: list[SSAValue], blocks: list[Block]) -> _Made | None:
    """What makes ops like `op` from other arguments; None when it cannot."""
    value_at = {id(v): i for i, v in reversed(list(enumerate(values)))}
    block_at = {id(b): i for i, b in reversed(list(enumerate(blocks)))}
    operands = tuple(value_at.get(id(v), -1) for v in op.operands)
    successors = tuple(block_at.get(id(b), -1) for b in op.successors)
    if op.regions or -1 in operands or -1 in successors:
        return None
    types = tuple(r.type for r in op.results)
    return (type(op), types, dict(op.properties), dict(op.attributes), operands, successors)


def make(cls: type[OpT], *args: Any, **kwargs: Any) -> OpT:
    """`cls(*args, **kwargs)`, from the prototype of `cls` with the same arguments but
    for the values and blocks (of the same types, the same one where they were)."""
    every = (*args, tuple(kwargs), *kwargs.values())
    keep: list[Attribute] = []
    values: list[SSAValue] = []
    blocks: list[Block] = []
    try:
        fast_key = _fast_key(cls, every, keep, values, blocks)
    except _Uncached:  # an op, a region or another object of no value
        return cls(*args, **kwargs)
    hit = _FAST.get(fast_key)
    if hit is not None and _ON[-1]:
        made = hit[0]
    else:
        try:
            key = (cls, _key(every, [], []))
            made = _MADE.get(key, False)
        except TypeError:  # an unhashable attribute
            return cls(*args, **kwargs)
        if made is False or not _ON[-1]:
            op = cls(*args, **kwargs)
            if made is False:
                made = _MADE[key] = _prototype(op, values, blocks)
            _remember(fast_key, made, keep)
            return op
        _remember(fast_key, made, keep)
    if made is None:
        return cls(*args, **kwargs)
    kind, types, properties, attributes, operands, successors = made
    return kind.create(
        operands=[values[i] for i in operands],
        result_types=types,
        properties=dict(properties),
        attributes=dict(attributes),
        location=UNKNOWN_LOC,
        successors=[blocks[i] for i in successors],
    )


def add(lhs: SSAValue, rhs: SSAValue) -> Operation:
    """`llvm.add` (no overflow flags)."""
    return like((llvm.AddOp, lhs.type), lambda: llvm.AddOp(lhs, rhs), (lhs, rhs))


def mul(lhs: SSAValue, rhs: SSAValue) -> Operation:
    """`llvm.mul` (no overflow flags)."""
    return like((llvm.MulOp, lhs.type), lambda: llvm.MulOp(lhs, rhs), (lhs, rhs))


def load(ptr: SSAValue, t: Attribute, alignment: int) -> Operation:
    """`llvm.load` of a `t` from `ptr`."""
    return like(
        (llvm.LoadOp, t, alignment), lambda: llvm.LoadOp(ptr, t, alignment=alignment), (ptr,)
    )


def store(value: SSAValue, ptr: SSAValue, alignment: int) -> Operation:
    """`llvm.store` of `value` at `ptr`."""
    return like(
        (llvm.StoreOp, alignment),
        lambda: llvm.StoreOp(value, ptr, alignment=alignment),
        (value, ptr),
    )


def element(base: SSAValue, index: SSAValue, element_type: Attribute) -> Operation:
    """`llvm.getelementptr inbounds` of element `index` (an SSA value) from `base`."""
    return like(
        (llvm.GEPOp, element_type, index.type),
        lambda: llvm.GEPOp(
            base, [llvm.GEP_USE_SSA_VAL], element_type, ssa_indices=[index], inbounds=True
        ),
        (base, index),
    )


def icmp(predicate: int, lhs: SSAValue, rhs: SSAValue) -> Operation:
    """`llvm.icmp` with the predicate numbered `predicate`."""
    return like(
        (llvm.ICmpOp, predicate, lhs.type),
        lambda: llvm.ICmpOp(lhs, rhs, IntegerAttr(predicate, 64)),
        (lhs, rhs),
    )
