"""The `graph` dialect's module level and the base of its instructions: `GraphInstruction`
(verification re-runs type inference, `infer`, which raises `InferenceError`), the
declaration ops (struct, enum, type alias, var, func) and the `Symbols` they give type
inference. The op families (`graph_*.py`) build on this module; `graph.py` assembles the
dialect from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr, UnitAttr
from xdsl.ir import Attribute, Block, Operation, Region
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.traits import SymbolOpInterface
from xdsl.utils.exceptions import VerifyException

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


def is_void(t: Attribute) -> bool:
    return isinstance(t, TupleType) and not t.types
