"""Type trees -> type attributes for the DLVM parser (docs/reference/language.md), plus the shared
diagnostics helpers of the builder.

The builder is split by concern along a single inheritance chain:
`TypeBuilder` (this file) <- `LiteralBuilder` (operand uses and literals) <-
`InstructionBuilder` (the per-instruction table) <- `ModuleBuilder` (declarations and
function bodies, `builder.py`).
"""

from __future__ import annotations

from lark import Token, Tree
from xdsl.ir import Attribute, Operation

from dlc.diagnostics import DiagnosticError, set_loc
from dlc.dialects import graph_dims
from dlc.dialects.graph_types import (
    ArrayType,
    BoxType,
    FunctionType,
    NominalType,
    PointerType,
    StackType,
    TensorType,
    TupleType,
    size_error,
)
from dlc.parser.lexer import MAX_NESTING, SourceText


def first_token(node: Tree | Token) -> Token:
    """The leftmost token of a subtree (iterative); for a subtree whose tokens were all
    filtered out (e.g. an empty `{}` literal) a token at the subtree's own position."""
    while isinstance(node, Tree):
        if not node.children:
            meta = node.meta
            line = getattr(meta, "line", 1) if not meta.empty else 1
            column = getattr(meta, "column", 1) if not meta.empty else 1
            return Token("EMPTY", "", line=line, column=column)
        node = node.children[0]
    return node


def as_token(child: Tree | Token) -> Token:
    """A parse-tree child that the grammar makes a token (a subtree is an internal error)."""
    assert isinstance(child, Token), f"expected a token, got a '{child.data}' subtree"
    return child


def ints_of(node: Tree) -> list[int]:
    return [int(as_token(tok)) for tok in node.children]


class TypeBuilder:
    """Diagnostics and type building; holds the module's type tables."""

    def __init__(self, source: SourceText):
        self.source = source
        self.types: dict[str, tuple[Attribute, int]] = {}
        self.current_index = 0
        self.type_cache: dict[tuple[str, ...], Attribute] = {}

    # ---- diagnostics ---------------------------------------------------------------

    def error(self, message: str, at: Tree | Token) -> DiagnosticError:
        tok = first_token(at)
        return self.source.error(message, tok.line or 1, tok.column or 1)

    def locate(self, op: Operation, at: Tree | Token) -> None:
        tok = first_token(at)
        set_loc(op, self.source.location(tok.line or 1, tok.column or 1))

    # ---- types -----------------------------------------------------------------------

    def build_type(self, node: Tree) -> Attribute:
        """A type tree -> type attribute, post-order with an explicit stack."""
        if node.data == "scalar_type":
            return self._cached_tensor((), as_token(node.children[0]), node)
        if node.data == "tensor_type":
            *dims, dtype = node.children
            return self._cached_tensor(tuple(str(d) for d in dims), as_token(dtype), node)
        values: list[tuple[Attribute, int]] = []
        stack: list[tuple[Tree, bool]] = [(node, False)]
        while stack:
            current, done = stack.pop()
            subtypes = [c for c in current.children if isinstance(c, Tree)]
            if not done:
                stack.append((current, True))
                stack.extend((c, False) for c in reversed(subtypes))
                continue
            parts = values[len(values) - len(subtypes) :] if subtypes else []
            del values[len(values) - len(parts) :]
            depth = 1 + max((d for _, d in parts), default=0)
            if depth > MAX_NESTING:
                raise self.error(f"type nesting deeper than {MAX_NESTING} levels", current)
            values.append((self._type_node(current, [t for t, _ in parts]), depth))
        return values[0][0]

    def _type_node(self, node: Tree, parts: list[Attribute]) -> Attribute:
        kind = node.data
        if kind == "scalar_type":
            return self._cached_tensor((), as_token(node.children[0]), node)
        if kind == "tensor_type":
            *dims, dtype = node.children
            return self._cached_tensor(tuple(str(d) for d in dims), as_token(dtype), node)
        if kind == "void_type":
            return TupleType([])
        if kind == "stack_type":
            return StackType()
        if kind == "tuple_type":
            return TupleType(parts)
        if kind == "function_type":
            return FunctionType(parts[:-1], parts[-1])
        if kind == "pointer_type":
            return PointerType(parts[0])
        if kind == "box_type":
            return BoxType(parts[0])
        if kind == "array_type":
            count_tok = as_token(node.children[0])
            count = int(count_tok)
            if count < 0:
                raise self.error(f"array size must be non-negative, got {count}", count_tok)
            return ArrayType(count, parts[0])
        assert kind == "named_type"
        return self._named_type(as_token(node.children[0]))

    def _cached_tensor(self, dims: tuple[str, ...], dtype: Token, node: Tree) -> Attribute:
        key = (*dims, str(dtype))
        t = self.type_cache.get(key)
        if t is not None:
            return t
        shape = [graph_dims.normalize(d[1:]) if d.startswith("%") else int(d) for d in dims]
        for d, tok in zip(shape, node.children, strict=False):
            if isinstance(d, int) and d < 0:
                raise self.error(f"tensor dimension must be non-negative, got {d}", tok)
        tensor = TensorType(shape, str(dtype))
        message = size_error(tensor)
        if message is not None:
            raise self.error(message, node)
        self.type_cache[key] = tensor
        return tensor

    def _named_type(self, tok: Token) -> Attribute:
        name = str(tok)[1:]
        entry = self.types.get(name)
        if entry is None:
            raise self.error(f"unknown type ${name}", tok)
        t, index = entry
        if index > self.current_index and not isinstance(t, NominalType):
            raise self.error(f"type ${name} is used before its declaration", tok)
        return t
