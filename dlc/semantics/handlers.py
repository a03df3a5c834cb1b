"""Per-op handlers of the reference interpreter: `HANDLERS[op class](interp, op, args)`.

`args` are the values of the op's operands in order; a handler returns the value of
the op's result (None for void ops). Calls and terminators are handled by the run loop
in `reference.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.ir import Operation

from dlc.diagnostics import error_at
from dlc.dialects import graph_elementwise as ew
from dlc.dialects import graph_memory as mem
from dlc.dialects import graph_tensor as ts
from dlc.dialects.graph import GlobalRefOp, LiteralOp
from dlc.dialects.graph_tensor import conv_config, ints
from dlc.dialects.graph_types import PointerType, TensorType
from dlc.semantics import ops as ops
from dlc.semantics import tensor as rt
from dlc.semantics.composite import COMPOSITE_HANDLERS
from dlc.semantics.gather import GATHER_HANDLERS
from dlc.semantics.memory import MEMORY_HANDLERS, dynamic_keys, load, store
from dlc.semantics.values import (
    FunctionRef,
    Pointer,
    build_literal,
    get_element,
    numpy_dtype,
    set_element,
)

if TYPE_CHECKING:
    from dlc.semantics.interpreter import Interpreter

Handler = Callable[["Interpreter", Any, list[Any]], object]
HANDLERS: dict[type[Operation], Handler] = {}


def handles(*classes: type[Operation]) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for cls in classes:
            HANDLERS[cls] = fn
        return fn

    return register


def _tensor_type(op: Operation) -> TensorType:
    t = op.results[0].type
    assert isinstance(t, TensorType)
    return t


# -- values ---------------------------------------------------------------------


@handles(LiteralOp)
def _literal(interp: Interpreter, op: LiteralOp, args: list[Any]) -> object:
    return build_literal(op.value.data, op.result.type, args, interp.symbols)


@handles(GlobalRefOp)
def _global_ref(interp: Interpreter, op: GlobalRefOp, args: list[Any]) -> object:
    name = op.symbol.data
    if name in interp.globals:
        return interp.global_pointer(name)
    if name in interp.functions:
        return FunctionRef(name)
    raise error_at(op, f"reference interpreter: unknown symbol @{name}")


# -- element-wise -----------------------------------------------------------------


@handles(*ew.UNARY_OPS.values())
def _unary(interp: Interpreter, op: ew.UnaryOp, args: list[Any]) -> object:
    return ops.unary(op.OPCODE, args[0])


@handles(*ew.BINARY_OPS.values())
def _binary(interp: Interpreter, op: ew.BinaryOp, args: list[Any]) -> object:
    return ops.binary(op.OPCODE, args[0], args[1])


@handles(ew.NotOp)
def _not(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    return np.invert(np.asarray(args[0]))  # logical on bool, bitwise on integers


@handles(ew.SelectOp)
def _select(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    return ops.select(args[0], args[1], args[2])


@handles(ew.DataTypeCastOp)
def _cast(interp: Interpreter, op: ew.DataTypeCastOp, args: list[Any]) -> object:
    return ops.cast(np.asarray(args[0]), numpy_dtype(op.dtype.data))


# -- reductions ----------------------------------------------------------------------


def _combinator(interp: Interpreter, op: Any, fn: object | None) -> rt.Combinator:
    """The opcode, or for `by @f` a step calling @f element by element."""
    if fn is None:
        return op.combinator.data
    func = interp.resolve(fn, op)

    def step(acc: np.ndarray, x: np.ndarray) -> np.ndarray:
        acc, x = np.broadcast_arrays(acc, x)
        out = np.empty(acc.shape, dtype=acc.dtype)
        for index in np.ndindex(*acc.shape):
            out[index] = interp.invoke(func, [np.asarray(acc[index]), np.asarray(x[index])])
        return out

    return step


@handles(ts.ReduceOp)
def _reduce(interp: Interpreter, op: ts.ReduceOp, args: list[Any]) -> object:
    comb = _combinator(interp, op, args[2] if len(args) > 2 else None)
    return rt.reduce(args[0], args[1], ints(op.dims), comb)


@handles(ts.ScanOp)
def _scan(interp: Interpreter, op: ts.ScanOp, args: list[Any]) -> object:
    comb = _combinator(interp, op, args[1] if len(args) > 1 else None)
    return rt.scan(args[0], ints(op.dims), comb)


@handles(ts.ReduceWindowOp)
def _reduce_window(interp: Interpreter, op: ts.ReduceWindowOp, args: list[Any]) -> object:
    comb = _combinator(interp, op, args[2] if len(args) > 2 else None)
    return rt.reduce_window(
        args[0], args[1], ints(op.window), ints(op.strides), op.padding.data, comb
    )


# -- shape and linear algebra -----------------------------------------------------


@handles(ts.DotOp)
def _dot(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    return rt.dot(args[0], args[1])


@handles(ts.ConvolveOp)
def _convolve(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    cfg = conv_config(dict(op.properties), args[0].ndim - 2)
    return rt.convolve(args[0], args[1], cfg, _tensor_type(op).dims)


@handles(ts.ConcatenateOp)
def _concatenate(interp: Interpreter, op: ts.ConcatenateOp, args: list[Any]) -> object:
    return np.concatenate(args, axis=op.axis.data)


@handles(ts.TransposeOp)
def _transpose(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    return np.transpose(args[0]).copy()  # ascontiguousarray would make a 0-d array 1-d


@handles(ts.ReverseOp)
def _reverse(interp: Interpreter, op: ts.ReverseOp, args: list[Any]) -> object:
    return np.flip(args[0], axis=tuple(ints(op.dims))).copy()


@handles(ts.SliceOp)
def _slice(interp: Interpreter, op: ts.SliceOp, args: list[Any]) -> object:
    return args[0][op.lower.data : op.upper.data + 1].copy()


@handles(ts.ShapeCastOp)
def _shape_cast(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    return np.reshape(args[0], _tensor_type(op).dims, order="C").copy()


@handles(ts.PadShapeOp, ts.SqueezeShapeOp)
def _reshape(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    return args[0].reshape(_tensor_type(op).dims)


@handles(ts.BitCastOp)
def _bit_cast(interp: Interpreter, op: ts.BitCastOp, args: list[Any]) -> object:
    target = op.target
    if isinstance(target, TensorType) and isinstance(args[0], np.ndarray):
        return rt.bit_cast(args[0], numpy_dtype(target.dt), target.dims)
    if isinstance(args[0], Pointer) and isinstance(target, PointerType):
        p = args[0]
        return Pointer(p.buffer, p.offset, target.pointee, p.path)
    return args[0]


@handles(ts.RankOp)
def _rank(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    return np.asarray(args[0].ndim, dtype=np.int64)


@handles(ts.ShapeOp)
def _shape(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    return np.asarray(args[0].shape, dtype=np.int64).reshape(args[0].ndim)


@handles(ts.UnitCountOp)
def _unit_count(interp: Interpreter, op: Operation, args: list[Any]) -> object:
    return np.asarray(args[0].size, dtype=np.int64)


# -- aggregates --------------------------------------------------------------------


@handles(mem.ExtractOp)
def _extract(interp: Interpreter, op: mem.ExtractOp, args: list[Any]) -> object:
    return get_element(args[0], op.operand.type, dynamic_keys(op, args[1:]), interp.symbols)


@handles(mem.InsertOp)
def _insert(interp: Interpreter, op: mem.InsertOp, args: list[Any]) -> object:
    return set_element(args[1], op.dest.type, dynamic_keys(op, args[2:]), args[0], interp.symbols)


HANDLERS.update(MEMORY_HANDLERS)
HANDLERS.update(GATHER_HANDLERS)
HANDLERS.update(COMPOSITE_HANDLERS)

__all__ = ["HANDLERS", "load", "store"]
