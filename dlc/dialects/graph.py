"""The `graph` dialect: DLVM's instruction set over whole tensors (value semantics).

One op per DLVM instruction kind (docs/reference/language.md); the 24 numeric unary, 10
numeric binary, 2 boolean binary and 6 compare opcodes each get their own op class so
rewrites can name them. Module-level declarations (structs, enums, aliases, vars,
functions) are ops too.

Every instruction op has a classmethod `infer(operand_types, props)` that returns the
result types or raises `InferenceError` with a one-line message; the parser uses it to
type instructions as DLVM does, and `verify_` checks the stored result types against it.

Op files: `graph_module.py` (the instruction base and the module's declarations), this
file (literals, control flow, the dialect), `graph_elementwise.py`,
`graph_tensor.py` (shape, linear algebra) with `graph_reduction.py` (scan, reduce,
windows, convolve), `graph_memory.py` (memory, stack, box, random) with
`graph_aggregate.py` (calls, aggregates, element keys); each pair shares one `OPS` list.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import ArrayAttr, StringAttr, UnitAttr
from xdsl.ir import Attribute, Block, Dialect, Operation, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    successor_def,
    traits_def,
    var_operand_def,
    var_successor_def,
)
from xdsl.traits import IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from dlc.dialects import (
    graph_composite,
    graph_elementwise,
    graph_gather,
    graph_memory,
    graph_tensor,
)
from dlc.dialects.graph_literal import LiteralAttr
from dlc.dialects.graph_module import (
    EnumOp,
    FuncOp,
    GraphInstruction,
    InferenceError,
    Props,
    StructOp,
    Symbols,
    TypeAliasOp,
    VarOp,
    enclosing_symbols,
    is_void,
)

# ---------------------------------------------------------------------------
# Values: literals and global references
# ---------------------------------------------------------------------------


@irdl_op_definition
class LiteralOp(GraphInstruction):
    """`literal LIT: T`. Inline scalar operands (`add %x: f32, 1: f32`) are literal ops
    with the `inline` flag; the DLVM printer writes them at their use."""

    name = "graph.literal"
    OPCODE: ClassVar[str] = "literal"
    elements = var_operand_def()
    value = prop_def(LiteralAttr)
    inline = opt_prop_def(UnitAttr)
    result = result_def()
    traits = traits_def(Pure())

    def __init__(
        self,
        value: LiteralAttr,
        result_type: Attribute,
        elements: Sequence[SSAValue] = (),
        inline: bool = False,
    ):
        super().__init__(
            operands=[list(elements)],
            result_types=[result_type],
            properties={"value": value, "inline": UnitAttr() if inline else None},
        )

    def verify_(self) -> None:
        from dlc.dialects.graph_check import check_literal

        symbols = enclosing_symbols(self)
        types = [o.type for o in self.elements]
        message = check_literal(self.value.data, self.result.type, types, symbols)
        if message is not None:
            raise VerifyException(message)


@irdl_op_definition
class GlobalRefOp(IRDLOperation):
    """A use of `@g` (a var, type `*T`) or `@f` (a function, its function type)."""

    name = "graph.global_ref"
    symbol = prop_def(StringAttr)
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, symbol: str, result_type: Attribute):
        super().__init__(result_types=[result_type], properties={"symbol": StringAttr(symbol)})


# ---------------------------------------------------------------------------
# Terminators
# ---------------------------------------------------------------------------


@irdl_op_definition
class BranchOp(IRDLOperation):
    """`branch 'bb(args)`"""

    name = "graph.branch"
    args = var_operand_def()
    dest = successor_def()
    traits = traits_def(IsTerminator())

    def __init__(self, dest: Block, args: Sequence[SSAValue]):
        super().__init__(operands=[list(args)], successors=[dest])


@irdl_op_definition
class ConditionalOp(IRDLOperation):
    """`conditional %c: bool then 'a(args) else 'b(args)`"""

    name = "graph.conditional"
    cond = operand_def()
    then_args = var_operand_def()
    else_args = var_operand_def()
    then_block = successor_def()
    else_block = successor_def()
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(IsTerminator())

    def __init__(
        self,
        cond: SSAValue,
        then_block: Block,
        then_args: Sequence[SSAValue],
        else_block: Block,
        else_args: Sequence[SSAValue],
    ):
        super().__init__(
            operands=[cond, list(then_args), list(else_args)],
            successors=[then_block, else_block],
        )


@irdl_op_definition
class BranchEnumOp(IRDLOperation):
    """`branchEnum %e: $E case ?a 'bb1 case ?b 'bb2`; each block takes the case's values."""

    name = "graph.branch_enum"
    value = operand_def()
    cases = prop_def(ArrayAttr[StringAttr])
    dests = var_successor_def()
    traits = traits_def(IsTerminator())

    def __init__(self, value: SSAValue, cases: Sequence[tuple[str, Block]]):
        super().__init__(
            operands=[value],
            properties={"cases": ArrayAttr([StringAttr(c) for c, _ in cases])},
            successors=[[b for _, b in cases]],
        )


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """`return` or `return %v: T`"""

    name = "graph.return"
    value = opt_operand_def()
    traits = traits_def(IsTerminator())

    def __init__(self, value: SSAValue | None = None):
        super().__init__(operands=[[value] if value is not None else []])


def prints_at_use(op: Operation) -> bool:
    """Inline literals (`1: f32`) and global references (`@g`) print at their uses, not as
    instructions, so they take no place in the positional `%b.i` numbering."""
    return isinstance(op, GlobalRefOp) or (isinstance(op, LiteralOp) and op.inline is not None)


def all_graph_ops() -> list[type[Operation]]:
    return [
        StructOp,
        EnumOp,
        TypeAliasOp,
        VarOp,
        FuncOp,
        LiteralOp,
        GlobalRefOp,
        BranchOp,
        ConditionalOp,
        BranchEnumOp,
        ReturnOp,
        *graph_elementwise.OPS,
        *graph_tensor.OPS,
        *graph_gather.OPS,
        *graph_composite.OPS,
        *graph_memory.OPS,
    ]


def make_graph_dialect() -> Dialect:
    from dlc.dialects.graph_types import GRAPH_TYPES

    return Dialect("graph", all_graph_ops(), [*GRAPH_TYPES, LiteralAttr])


__all__ = [
    "BranchEnumOp",
    "BranchOp",
    "ConditionalOp",
    "EnumOp",
    "FuncOp",
    "GlobalRefOp",
    "GraphInstruction",
    "InferenceError",
    "LiteralOp",
    "Props",
    "ReturnOp",
    "StructOp",
    "Symbols",
    "TypeAliasOp",
    "VarOp",
    "all_graph_ops",
    "enclosing_symbols",
    "is_void",
    "make_graph_dialect",
    "prints_at_use",
]
