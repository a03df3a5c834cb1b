"""The `graph` dialect: DLVM's instruction set over whole tensors (value semantics).

One op per DLVM instruction kind (docs/reference/language.md); the 24 numeric unary, 10
numeric binary, 2 boolean binary and 6 compare opcodes each get their own op class so
rewrites can name them. Module-level declarations (structs, enums, aliases, vars,
functions) are ops too.

Every instruction op has a classmethod `infer(operand_types, props)` that returns the
result types or raises `InferenceError` with a one-line message; the parser uses it to
type instructions as DLVM does, and `verify_` checks the stored result types against it.

Op files: this file (structure, literals, control flow), `graph_elementwise.py`,
`graph_tensor.py` (shape, linear algebra) with `graph_reduction.py` (scan, reduce,
windows, convolve), `graph_memory.py` (memory, stack, box, random) with
`graph_aggregate.py` (calls, aggregates, element keys); each pair shares one `OPS` list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr, UnitAttr
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    successor_def,
    traits_def,
    var_operand_def,
    var_successor_def,
)
from xdsl.traits import IsTerminator, Pure, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException

from dlc.dialects.graph_literal import LiteralAttr
from dlc.dialects.graph_types import FunctionType, TupleType, format_type


class InferenceError(Exception):
    """An instruction's operands do not type-check; the message is user-facing."""


Props = dict[str, Attribute]


@dataclass
class Symbols:
    """What type inference needs from the module: struct fields, enum cases, signatures."""

    structs: dict[str, list[tuple[str, Attribute]]] = field(default_factory=dict)
    enums: dict[str, list[tuple[str, tuple[Attribute, ...]]]] = field(default_factory=dict)
    functions: dict[str, FunctionType] = field(default_factory=dict)
    vars: dict[str, Attribute] = field(default_factory=dict)
    cache: dict[str, object] = field(default_factory=dict, compare=False, repr=False)
    """Facts derived from the declarations (dlc/dialects/recursive_types.py)."""

    @staticmethod
    def of_module(module: Operation) -> Symbols:
        symbols = Symbols()
        for op in module.regions[0].ops if module.regions else ():
            if isinstance(op, StructOp):
                symbols.structs[op.sym_name.data] = op.fields
            elif isinstance(op, EnumOp):
                symbols.enums[op.sym_name.data] = op.cases
            elif isinstance(op, FuncOp):
                symbols.functions[op.sym_name.data] = op.function_type
            elif isinstance(op, VarOp):
                symbols.vars[op.sym_name.data] = op.var_type
        return symbols


def enclosing_symbols(op: Operation) -> Symbols | None:
    """The symbols of the module that holds `op` (None when detached)."""
    module = op.parent_op()
    while module is not None and module.parent_op() is not None:
        module = module.parent_op()
    return Symbols.of_module(module) if module is not None else None


class GraphInstruction(IRDLOperation):
    """Base of every instruction op: verification re-runs type inference."""

    OPCODE: ClassVar[str] = ""
    NEEDS_SYMBOLS: ClassVar[bool] = False

    @classmethod
    def infer(
        cls, operand_types: Sequence[Attribute], props: Props, symbols: Symbols | None = None
    ) -> list[Attribute]:
        raise NotImplementedError(f"{cls.__name__}.infer")

    def verify_(self) -> None:
        symbols = enclosing_symbols(self) if self.NEEDS_SYMBOLS else None
        try:
            expected = type(self).infer(
                [o.type for o in self.operands], dict(self.properties), symbols
            )
        except InferenceError as err:
            raise VerifyException(str(err)) from err
        actual = [r.type for r in self.results]
        if actual != list(expected):
            got = ", ".join(format_type(t) for t in actual) or "void"
            want = ", ".join(format_type(t) for t in expected) or "void"
            raise VerifyException(f"{self.OPCODE}: result type {got} differs from inferred {want}")


# ---------------------------------------------------------------------------
# Module-level declarations
# ---------------------------------------------------------------------------


@irdl_op_definition
class StructOp(IRDLOperation):
    """`struct $S { #a: T ... }`: a nominal record type."""

    name = "graph.struct"
    sym_name = prop_def(StringAttr)
    field_names = prop_def(ArrayAttr[StringAttr])
    field_types = prop_def(ArrayAttr[Attribute])
    traits = traits_def(SymbolOpInterface())

    def __init__(self, name: str, fields: Sequence[tuple[str, Attribute]]):
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "field_names": ArrayAttr([StringAttr(f) for f, _ in fields]),
                "field_types": ArrayAttr([t for _, t in fields]),
            }
        )

    @property
    def fields(self) -> list[tuple[str, Attribute]]:
        return [(n.data, t) for n, t in zip(self.field_names.data, self.field_types.data)]


@irdl_op_definition
class EnumOp(IRDLOperation):
    """`enum $E { ?c(T, U) ... }`: a nominal sum type."""

    name = "graph.enum"
    sym_name = prop_def(StringAttr)
    case_names = prop_def(ArrayAttr[StringAttr])
    case_types = prop_def(ArrayAttr[ArrayAttr[Attribute]])
    traits = traits_def(SymbolOpInterface())

    def __init__(self, name: str, cases: Sequence[tuple[str, Sequence[Attribute]]]):
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "case_names": ArrayAttr([StringAttr(c) for c, _ in cases]),
                "case_types": ArrayAttr([ArrayAttr(list(ts)) for _, ts in cases]),
            }
        )

    @property
    def cases(self) -> list[tuple[str, tuple[Attribute, ...]]]:
        return [(n.data, ts.data) for n, ts in zip(self.case_names.data, self.case_types.data)]


@irdl_op_definition
class TypeAliasOp(IRDLOperation):
    """`type $A = T` (transparent) or `type $A = opaque` (no `aliased`)."""

    name = "graph.type_alias"
    sym_name = prop_def(StringAttr)
    aliased = opt_prop_def(Attribute)
    traits = traits_def(SymbolOpInterface())

    def __init__(self, name: str, aliased: Attribute | None):
        super().__init__(properties={"sym_name": StringAttr(name), "aliased": aliased})


@irdl_op_definition
class VarOp(IRDLOperation):
    """`var @g: T`: a global variable; used as a value of type `*T`."""

    name = "graph.var"
    sym_name = prop_def(StringAttr)
    var_type = prop_def(Attribute)
    traits = traits_def(SymbolOpInterface())

    def __init__(self, name: str, var_type: Attribute):
        super().__init__(properties={"sym_name": StringAttr(name), "var_type": var_type})


@irdl_op_definition
class FuncOp(IRDLOperation):
    """A DLVM function: a definition (body) or a declaration (`extern` / `adjoint`).

    Declaration properties: `decl` is "extern", "adjoint" or "gradient" (the older
    spelling of adjoint); an adjoint has `primal` and optional `from_index`, `wrt`,
    `keeping`, `seedable`. `inline` marks `!inline`.
    """

    name = "graph.func"
    sym_name = prop_def(StringAttr)
    function_type = prop_def(FunctionType)
    inline = opt_prop_def(UnitAttr)
    decl = opt_prop_def(StringAttr)
    primal = opt_prop_def(StringAttr)
    from_index = opt_prop_def(IntAttr)
    wrt = opt_prop_def(ArrayAttr[IntAttr])
    keeping = opt_prop_def(ArrayAttr[IntAttr])
    seedable = opt_prop_def(UnitAttr)
    body = region_def()
    traits = traits_def(SymbolOpInterface())

    def __init__(
        self,
        name: str,
        function_type: FunctionType,
        body: Region | None = None,
        **props: Attribute | None,
    ):
        super().__init__(
            properties={"sym_name": StringAttr(name), "function_type": function_type, **props},
            regions=[body if body is not None else Region()],
        )

    @property
    def is_declaration(self) -> bool:
        return self.decl is not None

    @property
    def entry(self) -> Block | None:
        return self.body.blocks.first


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


def is_void(t: Attribute) -> bool:
    return isinstance(t, TupleType) and not t.types


def prints_at_use(op: Operation) -> bool:
    """Inline literals (`1: f32`) and global references (`@g`) print at their uses, not as
    instructions, so they take no place in the positional `%b.i` numbering."""
    return isinstance(op, GlobalRefOp) or (isinstance(op, LiteralOp) and op.inline is not None)


def all_graph_ops() -> list[type[Operation]]:
    from dlc.dialects import (
        graph_composite,
        graph_elementwise,
        graph_gather,
        graph_memory,
        graph_tensor,
    )

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
