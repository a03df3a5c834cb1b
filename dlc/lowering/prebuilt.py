"""Prebuilt ops: the ops lowerings build by the ten thousand, made from a prototype.

xDSL's generic constructor (`irdl_op_init`) checks and sorts every argument against
the op's definition: about half of what building an op costs, and the loop and llvm
levels of a whole model are tens of thousands of ops. `like(key, build, operands)`
builds the op of `key` once with its own constructor (`build`) and keeps its class,
result types, properties and attributes; later ops of the same key are made with
`Operation.create` from those and the new operands, so they are the ops the
constructor would have made (`test/unit/lowering/test_prebuilt.py` compares them). A key must
determine everything but the operands: the op's class and each argument of `build`
that is not an operand.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from xdsl.dialects import llvm
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Attribute, Operation, SSAValue

_Proto = tuple[type[Operation], tuple[Attribute, ...], dict[str, Attribute], dict[str, Attribute]]
_PROTOS: dict[Hashable, _Proto] = {}


def like(key: Hashable, build: Callable[[], Operation], operands: Sequence[SSAValue]) -> Operation:
    """The op `build()` makes (`build` uses `operands`), from the prototype of `key`."""
    proto = _PROTOS.get(key)
    if proto is None:
        op = build()
        types = tuple(r.type for r in op.results)
        _PROTOS[key] = (type(op), types, dict(op.properties), dict(op.attributes))
        return op
    cls, types, properties, attributes = proto
    return cls.create(
        operands=operands,
        result_types=types,
        properties=dict(properties),
        attributes=dict(attributes),
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
