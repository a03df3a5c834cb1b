"""Bind function parameters to constants: weights known when the program is compiled.

`dlc.compile(text, constants={"attention": {"wq": wq, ...}})` (and `dlc-run --constant
NAME=PATH.npy`) replaces each named parameter of a defined function by a literal of
the array's value in a clone of the module, so the compiled function takes the other
parameters only. This is what TVM's `bind_params_by_name` and ONNX initializers give
their compilers, and what makes weights part of the program: the graph optimizer folds
what is computed from them alone, and at `opt_level=3` the superoptimizer treats ops
over them as free (`fold_constants.WEIGHT_LIMIT`): the products of an LSTM's gates merge
over one concatenated weight, and attention's q·kᵀ = (x·wq)·(x·wk)ᵀ becomes
(x·(wq·wkᵀ))·xᵀ with wq·wkᵀ computed once, at compile time.

Each array must have the parameter's dtype and shape exactly (as a call's arguments
must): nothing is converted. A function other functions call, or one an `[adjoint]`
declaration differentiates, keeps its signature: binding its parameters is an error,
as is naming a function or parameter the program does not have. Every error is a
`DiagnosticError` located at the function (at the program's first function when the
named one does not exist).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation

from dlc.diagnostics import DiagnosticError, Location, clone_located, error_at, get_loc
from dlc.dialects.graph import FuncOp
from dlc.dialects.graph_types import FunctionType, TensorType, format_type
from dlc.dtypes import NATIVE_DTYPES, numpy_dtype
from dlc.passes.graph.fold_constants import literal_of

Constants = Mapping[str, Mapping[str, object]]


def bind_constants(module: ModuleOp, constants: Constants) -> ModuleOp:
    """A clone of `module` whose functions named in `constants` read the given arrays
    as literals instead of the named parameters (module docstring)."""
    if not isinstance(constants, Mapping):
        raise TypeError(f"constants: expected a mapping, got {type(constants).__name__}")
    if not constants:
        return module
    module = clone_located(module)
    funcs = {f.sym_name.data: f for f in module.body.block.ops if isinstance(f, FuncOp)}
    for name, values in constants.items():
        if not isinstance(values, Mapping):
            raise TypeError(
                f"constants['{name}']: expected a mapping of parameter names to arrays, "
                f"got {type(values).__name__}"
            )
        func = funcs.get(name)
        if func is None or func.is_declaration or func.entry is None:
            defined = ", ".join(f"@{f}" for f, op in funcs.items() if not op.is_declaration)
            raise DiagnosticError(
                f"constants: the program defines no function @{name} (it defines {defined})",
                _first_location(module),
            )
        _check_unreferenced(module, func)
        _bind(func, values)
    return module


def _first_location(module: ModuleOp) -> Location | None:
    for op in module.walk():
        loc = get_loc(op)
        if loc is not None:
            return loc
    return None


def _check_unreferenced(module: ModuleOp, func: FuncOp) -> None:
    """A DiagnosticError when another op names `func` (a call, an adjoint's primal)."""
    name = func.sym_name.data
    for op in module.walk():
        if op is func:
            continue
        for key, attr in op.properties.items():
            if isinstance(attr, StringAttr) and attr.data == name and key != "sym_name":
                what = "differentiates" if isinstance(op, FuncOp) else "calls"
                raise error_at(
                    func,
                    f"constants: @{name} keeps its parameters because {_where(op)} {what} it",
                )


def _where(op: Operation) -> str:
    """`@f` of the function `op` is or is inside."""
    owner: Operation | None = op
    while owner is not None and not isinstance(owner, FuncOp):
        owner = owner.parent_op()
    return f"@{owner.sym_name.data}" if owner is not None else "another op"


def _mismatch(value: object, t: TensorType) -> str | None:
    """What `value` is when it is not an array of `t`'s data type and shape; else None."""
    if not isinstance(value, np.ndarray):
        return type(value).__name__
    if value.dtype != numpy_dtype(t.dt) or value.shape != tuple(t.dims):
        return f"{value.dtype} array of shape {value.shape}"
    return None


def _bind(func: FuncOp, values: Mapping[str, object]) -> None:
    block = func.entry
    assert block is not None
    params = {arg._name or str(i): arg for i, arg in enumerate(block.args)}  # noqa: SLF001
    for pname, value in values.items():
        arg = params.get(pname)
        if arg is None:
            known = ", ".join(f"%{n}" for n in params)
            raise error_at(
                func,
                f"constants: @{func.sym_name.data} has no parameter %{pname} "
                f"(its parameters: {known})",
            )
        t = arg.type
        if not isinstance(t, TensorType) or t.dt not in NATIVE_DTYPES:
            raise error_at(
                func, f"constants: parameter %{pname} of type {format_type(t)} cannot be bound"
            )
        if (got := _mismatch(value, t)) is not None:
            raise error_at(
                func,
                f"constants: parameter %{pname} of @{func.sym_name.data} is {format_type(t)}, "
                f"got {got}",
            )
        op = literal_of(np.ascontiguousarray(value), t)
        op.result._name = pname
        block.insert_op_before(op, block.first_op) if block.first_op else block.add_op(op)
        arg.replace_all_uses_with(op.result)
        block.erase_arg(arg)
        del params[pname]
    func.function_type = FunctionType([a.type for a in block.args], func.function_type.output)
