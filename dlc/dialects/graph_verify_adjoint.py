"""Adjoint-declaration checks of the `graph` verifier (docs/guide/differentiation.md): the exact
signature an `adjoint` function must have, with indices bounds-checked (DLVM's
off-by-one fixed)."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects.builtin import ArrayAttr, IntAttr
from xdsl.ir import Attribute

from dlc.diagnostics import DiagnosticError, error_at
from dlc.dialects.graph import FuncOp, Symbols
from dlc.dialects.graph_types import FunctionType, TupleType, format_type, is_differentiable


def adjoint_type(func: FuncOp, symbols: Symbols) -> FunctionType:
    """The exact signature an adjoint declaration must have; raises a located error."""
    primal = func.primal.data if func.primal is not None else ""
    p = symbols.functions.get(primal)
    if p is None:
        raise error_at(func, f"adjoint: @{primal} is not a function in this module")
    args, out = list(p.args), p.output
    n = len(args)

    def fail(message: str) -> DiagnosticError:
        return error_at(func, f"adjoint of @{primal}: {message}")

    frm = func.from_index.data if func.from_index is not None else None
    if isinstance(out, TupleType):
        if frm is None:
            raise fail(f"'from' is required because @{primal} returns the tuple {format_type(out)}")
        if not 0 <= frm < len(out.types):
            raise fail(f"'from' index {frm} is out of range for {format_type(out)}")
        source = out.types[frm]
        outputs: list[Attribute] = list(out.types)
    else:
        if frm is not None:
            raise fail(f"'from' is only allowed when @{primal} returns a tuple")
        source = out
        outputs = [out]
    if not is_differentiable(source):
        raise fail(f"output type {format_type(source)} is not differentiable")
    wrt = _indices(func.wrt, n, "wrt", f"@{primal} has {n} arguments", fail)
    if wrt is None:
        wrt = list(range(n))
    for i in wrt:
        if not is_differentiable(args[i]):
            raise fail(f"argument {i} of type {format_type(args[i])} is not differentiable")
    keeping = (
        _indices(
            func.keeping, len(outputs), "keeping", f"@{primal} has {len(outputs)} outputs", fail
        )
        or []
    )
    inputs = args + ([source] if func.seedable is not None else [])
    results = [args[i] for i in wrt] + [outputs[k] for k in keeping]
    return FunctionType(inputs, TupleType(results))


def _indices(
    attr: ArrayAttr[IntAttr] | None,
    bound: int,
    clause: str,
    why: str,
    fail: Callable[[str], DiagnosticError],
) -> list[int] | None:
    if attr is None:
        return None
    values = [x.data for x in attr.data]
    seen: set[int] = set()
    for v in values:
        if not 0 <= v < bound:
            raise fail(f"{clause} index {v} is out of range ({why})")
        if v in seen:
            raise fail(f"duplicate {clause} index {v}")
        seen.add(v)
    return values


def verify_adjoint(func: FuncOp, symbols: Symbols) -> None:
    expected = adjoint_type(func, symbols)
    if func.function_type != expected:
        raise error_at(
            func,
            f"adjoint @{func.sym_name.data} has type {format_type(func.function_type)}, "
            f"expected {format_type(expected)}",
        )
