"""Operand uses and literals for the DLVM parser (docs/reference/language.md): resolving `use`s,
inline scalar literals and the `literal` instruction's aggregate payloads (iterative)."""

from __future__ import annotations

import base64
import binascii
import math
from dataclasses import dataclass, field

from lark import Token, Tree
from xdsl.dialects.builtin import StringAttr, UnitAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue

from dlc.dialects.graph import GlobalRefOp, LiteralOp, Symbols
from dlc.dialects.graph_check import check_literal, overflows_float
from dlc.dialects.graph_literal import LiteralAttr, LitTree
from dlc.dialects.graph_types import (
    ArrayType,
    NominalType,
    PointerType,
    TensorType,
    TupleType,
    dtype_holds_floats,
    format_type,
)
from dlc.parser.builder_types import TypeBuilder, as_token
from dlc.parser.lexer import SourceText

SCALAR_LITS = ("int_lit", "float_lit", "bool_lit")
AGGREGATE_LITS = ("tensor_lit", "tuple_lit", "array_lit", "struct_lit", "enum_lit")
TOP_ONLY_LITS = {
    "zero_lit": "'zero'",
    "undefined_lit": "'undefined'",
    "null_lit": "'null'",
    "enum_lit": "an enum case",
}


@dataclass
class FunctionScope:
    """Per-function name tables while a body is built."""

    func_index: int
    locals: dict[str, SSAValue] = field(default_factory=dict)
    anonymous: dict[tuple[int, int], SSAValue] = field(default_factory=dict)
    all_names: set[str] = field(default_factory=set)
    blocks: dict[str, Block] = field(default_factory=dict)
    block: Block | None = None
    block_index: int = 0
    inst_index: int = 0


class LiteralBuilder(TypeBuilder):
    """Resolves operand uses and builds literal payloads inside the current function."""

    def __init__(self, source: SourceText):
        super().__init__(source)
        self.symbols = Symbols()
        self.values: dict[
            str, tuple[Attribute, int, str]
        ] = {}  # name -> (type, index, "var"|"func")
        self.scope: FunctionScope | None = None

    # ---- uses ------------------------------------------------------------------------

    def use(self, node: Tree) -> SSAValue:
        """Resolve one `use` (value + annotation); helper ops go into the current block."""
        value_node, type_node = node.children
        annotated = self.build_type(type_node)
        kind = value_node.data
        if kind in ("local_ref", "anon_ref"):
            tok = as_token(value_node.children[0])
            value = self._local_value(tok)
            self._check_use_type(tok, value.type, annotated)
            return value
        if kind == "global_ref":
            return self._global_value(as_token(value_node.children[0]), annotated)
        if kind in SCALAR_LITS:
            return self._inline_literal(value_node, annotated)
        if kind in TOP_ONLY_LITS:
            raise self.error(
                f"{TOP_ONLY_LITS[kind]} is only allowed as the literal of a 'literal' instruction",
                value_node,
            )
        raise self.error(
            "only scalar literals can be operands; use a 'literal' instruction for aggregates",
            value_node,
        )

    def _check_use_type(self, tok: Token, actual: Attribute, annotated: Attribute) -> None:
        if actual != annotated:
            raise self.error(
                f"type mismatch: {tok} has type {format_type(actual)} but is used as {format_type(annotated)}",
                tok,
            )

    def _local_value(self, tok: Token) -> SSAValue:
        scope = self.scope
        assert scope is not None
        text = str(tok)
        if tok.type == "ANON":
            b, i = (int(x) for x in text[1:].split("."))
            value = scope.anonymous.get((b, i))
            if value is None:
                raise self.error(f"use of undefined value {text}", tok)
            return value
        value = scope.locals.get(text[1:])
        if value is not None:
            return value
        if text[1:] in scope.all_names:
            raise self.error(f"{text} is used before its definition", tok)
        raise self.error(f"use of undefined value {text}", tok)

    def _block(self, label: Tree | Token) -> Block:
        tok = as_token(label)
        scope = self.scope
        assert scope is not None
        block = scope.blocks.get(str(tok)[1:])
        if block is None:
            raise self.error(f"unknown basic block {tok}", tok)
        return block

    def _global_value(self, tok: Token, annotated: Attribute) -> SSAValue:
        name = str(tok)[1:]
        entry = self.values.get(name)
        if entry is None:
            raise self.error(f"use of undefined global {tok}", tok)
        t, index, kind = entry
        if kind == "var":
            if index > self.current_index:
                raise self.error(f"{tok} is used before its declaration", tok)
            t = PointerType(t)
        self._check_use_type(tok, t, annotated)
        op = GlobalRefOp.create(result_types=[t], properties={"symbol": StringAttr(name)})
        return self._helper_op(op, tok).results[0]

    def _helper_op(self, op: Operation, at: Tree | Token) -> Operation:
        scope = self.scope
        assert scope is not None and scope.block is not None
        self.locate(op, at)
        scope.block.add_op(op)
        return op

    def _inline_literal(self, node: Tree, annotated: Attribute) -> SSAValue:
        if not (isinstance(annotated, TensorType) and annotated.is_scalar):
            raise self.error(
                f"only scalar literals can be operands; use a 'literal' instruction for {format_type(annotated)}",
                node,
            )
        tree = self._scalar_tree(node, annotated)
        message = check_literal(tree, annotated, [], self.symbols)
        if message is not None:
            raise self.error(message, node)
        props = {"value": LiteralAttr(tree), "inline": UnitAttr()}
        op = LiteralOp.create(result_types=[annotated], properties=props)
        return self._helper_op(op, node).results[0]

    def _scalar_tree(self, node: Tree, t: Attribute) -> LitTree:
        """A scalar literal for a value of type `t`; a finite number that rounds to
        infinity in `t`'s float type is an error located at its spelling."""
        tok = as_token(node.children[0])
        if node.data == "bool_lit":
            return ("bool", tok == "true")
        dtype = t.dt if isinstance(t, TensorType) and dtype_holds_floats(t.dt) else None
        if node.data == "int_lit":
            if dtype is not None and overflows_float(int(tok), dtype):
                raise self.error(f"integer literal {tok} is out of range for {dtype}", node)
            return ("int", int(tok))
        value = float(tok)
        beyond_f64 = math.isinf(value) and "inf" not in tok  # 1e400 reads as inf
        if dtype is not None and (beyond_f64 or overflows_float(value, dtype)):
            raise self.error(f"float literal {tok} is out of range for {dtype}", node)
        # One shared NaN object, so equal literals compare equal (nan != nan otherwise).
        return ("float", math.nan if math.isnan(value) else value)

    # ---- the literal instruction ------------------------------------------------------

    def _literal(self, node: Tree) -> Operation:
        _, lit, type_node = node.children
        t = self.build_type(type_node)
        operands: list[SSAValue] = []
        tree = self._literal_tree(lit, t, operands)
        message = check_literal(tree, t, [o.type for o in operands], self.symbols)
        if message is not None:
            raise self.error(message, lit)
        return LiteralOp(LiteralAttr(tree), t, operands)

    def _literal_tree(self, lit: Tree, t: Attribute, operands: list[SSAValue]) -> LitTree:
        """The payload of a literal; aggregate elements are checked against `t`'s parts."""
        kind = lit.data
        if kind in SCALAR_LITS:
            return self._scalar_tree(lit, t)
        if kind in ("zero_lit", "undefined_lit", "null_lit"):
            return (kind[: -len("_lit")],)
        if kind == "dense_lit":
            return self._dense_tree(lit, t)
        result: list[LitTree] = []
        stack: list[_LitFrame] = [self._lit_frame(lit, t)]
        while stack:
            frame = stack[-1]
            if frame.next < len(frame.elements):
                elem = frame.elements[frame.next]
                expected = frame.expected[frame.next]
                frame.next += 1
                child = self._literal_element(elem, expected, operands)
                if isinstance(child, _LitFrame):
                    stack.append(child)
                else:
                    frame.built.append(child)
                continue
            stack.pop()
            done = frame.assemble()
            (stack[-1].built if stack else result).append(done)
        return result[0]

    def _literal_element(
        self, use: Tree, expected: Attribute, operands: list[SSAValue]
    ) -> LitTree | _LitFrame:
        value_node, type_node = use.children
        annotated = self.build_type(type_node)
        if annotated != expected:
            raise self.error(
                f"literal element has type {format_type(annotated)} but {format_type(expected)} is expected",
                type_node,
            )
        kind = value_node.data
        if kind in SCALAR_LITS:
            return self._scalar_tree(value_node, annotated)
        if kind in TOP_ONLY_LITS:
            raise self.error(
                f"{TOP_ONLY_LITS[kind]} is only allowed as the literal of a 'literal' instruction",
                value_node,
            )
        if kind in AGGREGATE_LITS:
            return self._lit_frame(value_node, annotated)
        if kind == "dense_lit":
            return self._dense_tree(value_node, annotated)
        operands.append(self.use(use))
        return ("operand", len(operands) - 1)

    def _dense_tree(self, lit: Tree, t: Attribute) -> LitTree:
        """`dense "<base64>"`: the bytes of a tensor of type `t` (checked here, so an
        error points at this literal even inside an aggregate)."""
        tok = lit.children[1]  # after the `dense` keyword
        try:  # base64 has no escapes: the token between its quotes is the payload
            tree = ("dense", base64.b64decode(str(tok)[1:-1], validate=True))
        except binascii.Error:
            raise self.error("dense literal: malformed base64 payload", tok) from None
        message = check_literal(tree, t, [], self.symbols)
        if message is not None:
            raise self.error(message, lit)
        return tree

    def _lit_frame(self, lit: Tree, t: Attribute) -> _LitFrame:
        kind = lit.data
        if kind == "struct_lit":
            keys = [str(f.children[0])[1:] for f in lit.children]
            elements = [f.children[1] for f in lit.children]
        else:
            uses = [c for c in lit.children if isinstance(c, Tree)]
            elements = list(uses[0].children) if uses else []
            keys = [str(lit.children[0])[1:]] if kind == "enum_lit" else []
        expected = self._element_types(lit, t, keys, len(elements))
        return _LitFrame(kind, keys, elements, expected)

    def _element_types(
        self, lit: Tree, t: Attribute, keys: list[str], count: int
    ) -> list[Attribute]:
        kind = lit.data
        bad = self.error(f"literal is not a valid value of type {format_type(t)}", lit)
        if kind == "tensor_lit":
            if not isinstance(t, TensorType) or t.rank == 0 or t.dims[0] != count:
                raise bad
            return [t.with_shape(t.dims[1:])] * count
        if kind == "tuple_lit":
            if not isinstance(t, TupleType) or len(t.types) != count:
                raise bad
            return list(t.types)
        if kind == "array_lit":
            if not isinstance(t, ArrayType) or t.count.data != count:
                raise bad
            return [t.element] * count
        if kind == "struct_lit":
            if not (isinstance(t, NominalType) and t.kind.data == "struct"):
                raise bad
            fields = self.symbols.structs.get(t.ident, [])
            if keys != [n for n, _ in fields]:
                listed = ", ".join("#" + k for k in keys)
                raise self.error(f"struct literal fields {listed} do not match ${t.ident}", lit)
            return [ft for _, ft in fields]
        if not (isinstance(t, NominalType) and t.kind.data == "enum"):
            raise bad
        cases = dict(self.symbols.enums.get(t.ident, []))
        if keys[0] not in cases:
            raise self.error(f"enum ${t.ident} has no case ?{keys[0]}", lit)
        if len(cases[keys[0]]) != count:
            raise self.error(
                f"enum case ?{keys[0]} takes {len(cases[keys[0]])} values, got {count}", lit
            )
        return list(cases[keys[0]])


@dataclass
class _LitFrame:
    """One aggregate literal being assembled by `_literal_tree`."""

    kind: str
    keys: list[str]
    elements: list[Tree]
    expected: list[Attribute]
    next: int = 0
    built: list[LitTree] = field(default_factory=list)

    def assemble(self) -> LitTree:
        if self.kind == "struct_lit":
            return ("struct", tuple(zip(self.keys, self.built, strict=False)))
        if self.kind == "enum_lit":
            return ("enum", self.keys[0], tuple(self.built))
        return (self.kind[: -len("_lit")], tuple(self.built))
