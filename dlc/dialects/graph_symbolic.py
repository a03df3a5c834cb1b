"""Symbolic dimensions at the graph level: which ops accept them, and the checks of a
function signature that has them (docs/reference/dynamic-shapes.md).

A symbolic dimension `%n` (`TensorType(("n", 4), "f32")`) is bound when the function is
called, from the shapes of its arguments; within a function equal names are equal
sizes. The first slice of dynamic shapes accepts them in element-wise ops (broadcasting
against 1s and scalars), `dataTypeCast`, reductions over listed axes with a built-in
combinator, `dot` of rank 2 or more (batched), `transpose`, `concatenate` (along any
axis: along a symbolic one the result's extent is a sum, `%past+1`, `graph_dims`),
`slice` of a static dimension,
tuples of results and `return`: everything else with a symbolic dimension is a
located "not supported yet" error when the program is parsed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Attribute, Operation

from dlc.diagnostics import error_at
from dlc.dialects import graph_dims
from dlc.dialects.graph_types import (
    FunctionType,
    TensorType,
    TupleType,
    dynamic_types,
    format_type,
)

ELEMENTWISE = frozenset(
    "sinh cosh tanh log exp negate sign square sqrt round rsqrt ceil floor tan cos sin "
    "acos asin atan erf rint add subtract multiply divide min max truncateDivide "
    "floorDivide modulo power and or xor lessThan lessThanOrEqual greaterThan "
    "greaterThanOrEqual equal notEqual not select dataTypeCast".split()
)
"""Graph opcodes lowered element by element with symbolic dimensions."""

REDUCERS = frozenset({"add", "multiply", "min", "max"})

ALIASES = frozenset({"padShape", "squeezeShape", "shapeCast", "return", "transpose"})
"""Opcodes that take any symbolic dimensions (shapeCast: the same names, as often)."""

SUBSET = ELEMENTWISE | ALIASES | {"dot", "reduce", "gather", "concatenate", "slice"}
"""Every opcode that may see a symbolic dimension (`unsupported` checks the details)."""


def first_symbol(types: Sequence[Attribute]) -> str | None:
    """The name of the first symbolic dimension in `types`, or None."""
    for t in types:
        for tensor in dynamic_types(t):
            return tensor.symbols[0]
    return None


def unsupported(
    opcode: str, types: Sequence[Attribute], props: Mapping[str, Attribute]
) -> str | None:
    """Why op `opcode` with operand `types` and properties `props` cannot take a symbolic
    dimension yet, or None when it can (or has none)."""
    symbol = first_symbol(types)
    if symbol is None:
        return None
    if opcode in ELEMENTWISE or opcode in ALIASES or opcode == "concatenate":
        return None
    if opcode == "gather" and not any(
        isinstance(t, TensorType) and t.is_dynamic for t in types[:1]
    ):
        return None  # a static table read at indices of symbolic shape (an embedding)
    if opcode == "slice" and isinstance(types[0], TensorType) and types[0].rank:
        if isinstance(types[0].dims[0], int):
            return None  # rows of a static dimension; the others may be symbolic
        return f"slice of symbolic dimension {graph_dims.text(types[0].dims[0])}: not supported yet"
    if opcode == "dot" and all(isinstance(t, TensorType) and t.rank >= 2 for t in types):
        return None  # (batched) matrix products; vector · vector is a scalar result
    combinator = props.get("combinator")
    if opcode == "reduce" and isinstance(combinator, StringAttr):
        if combinator.data in REDUCERS and len(types) == 2:
            return None
        return f"reduce by {combinator.data}: not supported yet with symbolic dimension %{symbol}"
    return f"{opcode}: not supported yet with symbolic dimension %{symbol}"


def op_problem(op: Operation) -> str | None:
    """Why graph op `op` (built, its types inferred) cannot take its symbolic
    dimensions yet, or None."""
    opcode = getattr(op, "OPCODE", op.name.removeprefix("graph."))
    operand_types = [v.type for v in op.operands]
    if opcode in SUBSET:
        return unsupported(opcode, operand_types, op.properties)
    if opcode == "literal" and isinstance(op.results[0].type, TupleType):
        return None  # a tuple of results (`graph_to_loop.results` checks its use)
    symbol = first_symbol([*operand_types, *(r.type for r in op.results)])
    if symbol is None:
        return None
    return f"{opcode}: not supported yet with symbolic dimension %{symbol}"


def signature_problem(t: FunctionType) -> str | None:
    """Why a function of type `t` cannot be compiled once for all sizes: a symbolic
    dimension of its results (a tensor or a tuple of tensors) no parameter binds, a
    product or a sum of dimensions (`%n*2`, `%n+1`) in a parameter whose names no
    parameter binds alone (an expression binds no name: it is checked per call), or a
    parameter or result that is not a tensor; None when it can (or has no symbolic
    dimension)."""
    symbol = first_symbol([*t.args, t.output])
    if symbol is None:
        return None
    bound: set[str] = set()
    for arg in t.args:
        if not isinstance(arg, TensorType):
            return f"parameter of type {format_type(arg)}: not supported yet with symbolic dimension %{symbol}"
        bound.update(arg.symbols)
    names = {s for s in bound if graph_dims.is_name(s)}
    for expr in sorted(bound - names):
        free = [n for n in graph_dims.names(expr) if n not in names]
        if free:
            what = graph_dims.kind(expr)
            return (
                f"symbolic dimension {graph_dims.text(expr)} of a parameter is a {what} of "
                f"%{free[0]}, which no parameter's dimension names alone"
            )
    outputs = t.output.types if isinstance(t.output, TupleType) else (t.output,)
    for output in outputs:
        if not isinstance(output, TensorType):
            return f"result of type {format_type(t.output)}: not supported yet with symbolic dimension %{symbol}"
        free = [n for s in output.symbols for n in graph_dims.names(s) if n not in names]
        if free:
            return f"symbolic dimension %{free[0]} of the result is not the size of any parameter"
    return None


def is_symbolic(module: ModuleOp) -> bool:
    """Whether a function of graph `module` has a symbolic dimension in its signature:
    such a module is compiled by `lower-graph-to-loop` (`dlc.pipeline.symbolic_steps`)."""
    return any(
        t.name == "graph.func" and first_symbol([t.properties["function_type"]]) is not None
        for t in module.body.block.ops
    )


def require_static(module: ModuleOp, pass_name: str) -> None:
    """A located error at the first function of `module` with a symbolic dimension in
    its signature: pass `pass_name` works on static shapes only (yet)."""
    for op in module.body.block.ops:
        if op.name != "graph.func":
            continue
        symbol = first_symbol([op.properties["function_type"]])
        if symbol is not None:
            raise error_at(op, f"{pass_name}: not supported yet with symbolic dimension %{symbol}")
