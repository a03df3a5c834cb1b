"""Lark parse tree -> `graph` dialect IR, with DLVM's name and type rules (DLVM.md §1.4–1.5).

Everything here is iterative: types and literals are built with explicit stacks, and
instructions are flat. Declarations are processed in textual order (nominal types and
`var`s must be declared before use); every function signature is registered before any
body is built (functions may be forward-referenced). Type inference runs per instruction
through the op class's `infer`, as DLVM's parser does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from lark import Token, Tree
from xdsl.dialects.builtin import ArrayAttr, IntAttr, ModuleOp, StringAttr, UnitAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue

from dlc.diagnostics import DiagnosticError, set_loc
from dlc.dialects.graph import (
    BranchEnumOp,
    BranchOp,
    ConditionalOp,
    EnumOp,
    FuncOp,
    GlobalRefOp,
    InferenceError,
    LiteralOp,
    ReturnOp,
    StructOp,
    Symbols,
    TypeAliasOp,
    VarOp,
)
from dlc.dialects.graph_check import check_literal
from dlc.dialects.graph_elementwise import BINARY_OPS, UNARY_OPS, DataTypeCastOp, NotOp, SelectOp
from dlc.dialects.graph_literal import LiteralAttr, LitTree
from dlc.dialects.graph_memory import (
    AllocateBoxOp,
    AllocateHeapOp,
    AllocateStackOp,
    ApplyIndirectOp,
    ApplyOp,
    CopyOp,
    CreateStackOp,
    DeallocateOp,
    DestroyStackOp,
    ElementPointerOp,
    ExtractOp,
    InsertOp,
    LoadOp,
    PopOp,
    ProjectBoxOp,
    PushOp,
    RandomOp,
    ReleaseOp,
    RetainOp,
    StoreOp,
    TrapOp,
)
from dlc.dialects.graph_tensor import (
    BitCastOp,
    ConcatenateOp,
    ConvolveOp,
    DotOp,
    PadShapeOp,
    RankOp,
    ReduceOp,
    ReduceWindowOp,
    ReverseOp,
    ScanOp,
    ShapeCastOp,
    ShapeOp,
    SliceOp,
    SqueezeShapeOp,
    TransposeOp,
    UnitCountOp,
)
from dlc.dialects.graph_types import (
    ArrayType,
    BoxType,
    FunctionType,
    NominalType,
    PointerType,
    StackType,
    TensorType,
    TupleType,
    format_type,
    size_error,
)
from dlc.dialects.graph_verify import set_block_loc
from dlc.parser.lexer import MAX_NESTING, SourceText

UNARY_CLASSES: dict[str, type[Operation]] = {**UNARY_OPS, "not": NotOp, "transpose": TransposeOp}
BINARY_CLASSES: dict[str, type[Operation]] = {**BINARY_OPS, "dot": DotOp, "matrixMultiply": DotOp}
SCALAR_LITS = ("int_lit", "float_lit", "bool_lit")
AGGREGATE_LITS = ("tensor_lit", "tuple_lit", "array_lit", "struct_lit", "enum_lit")
TOP_ONLY_LITS = {
    "zero_lit": "'zero'",
    "undefined_lit": "'undefined'",
    "null_lit": "'null'",
    "enum_lit": "an enum case",
}


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


def ints_of(node: Tree) -> list[int]:
    return [int(tok) for tok in node.children]


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


class ModuleBuilder:
    """Builds one verified-ready `builtin.module` from a `start` tree."""

    def __init__(self, source: SourceText):
        self.source = source
        self.symbols = Symbols()
        self.types: dict[str, tuple[Attribute, int]] = {}
        self.values: dict[
            str, tuple[Attribute, int, str]
        ] = {}  # name -> (type, index, "var"|"func")
        self.current_index = 0
        self.scope: FunctionScope | None = None
        self.type_cache: dict[tuple[str, ...], Attribute] = {}
        # Inference is a pure function of (op class, operand types, properties) within a module.
        self.infer_cache: dict[tuple[object, ...], list[Attribute]] = {}
        self.inst_builders: dict[str, Callable[[Tree], Operation]] = self._instruction_table()

    # ---- diagnostics ---------------------------------------------------------------

    def error(self, message: str, at: Tree | Token) -> DiagnosticError:
        tok = first_token(at)
        return self.source.error(message, tok.line or 1, tok.column or 1)

    def locate(self, op: Operation, at: Tree | Token) -> None:
        tok = first_token(at)
        set_loc(op, self.source.location(tok.line or 1, tok.column or 1))

    # ---- module ----------------------------------------------------------------------

    def build(self, tree: Tree) -> ModuleOp:
        name_tok, stage_tok, *decls = tree.children
        ops: list[Operation] = []
        bodies: list[tuple[FuncOp, Tree, int]] = []
        for index, decl in enumerate(decls):
            self.current_index = index
            op, body = self._declaration(decl)
            ops.append(op)
            if body is not None:
                assert isinstance(op, FuncOp)
                bodies.append((op, body, index))
        for func, body, index in bodies:
            self._function_body(func, body, index)
        module = ModuleOp(ops)
        module.attributes["dlc.name"] = StringAttr(self._string(name_tok))
        module.attributes["dlc.stage"] = StringAttr(str(stage_tok))
        return module

    def _string(self, tok: Token) -> str:
        out: list[str] = []
        escapes = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r"}
        body = str(tok)[1:-1]
        i = 0
        while i < len(body):
            c = body[i]
            if c == "\\":
                nxt = body[i + 1] if i + 1 < len(body) else ""
                if nxt not in escapes:
                    raise self.source.error(
                        f"invalid escape '\\{nxt}' in string",
                        tok.line or 1,
                        (tok.column or 1) + i + 1,
                    )
                out.append(escapes[nxt])
                i += 2
                continue
            out.append(c)
            i += 1
        return "".join(out)

    def _declaration(self, decl: Tree) -> tuple[Operation, Tree | None]:
        kind = decl.data
        if kind == "typealias":
            return self._typealias(decl), None
        if kind == "struct":
            return self._struct(decl), None
        if kind == "enum":
            return self._enum(decl), None
        if kind == "var":
            return self._var(decl), None
        return self._function(decl)

    def _declare_type(self, tok: Token, t: Attribute) -> None:
        name = str(tok)[1:]
        if name in self.types and self.types[name][1] != self.current_index:
            raise self.error(f"redefinition of type ${name}", tok)
        self.types[name] = (t, self.current_index)

    def _declare_value(self, tok: Token, t: Attribute, kind: str) -> str:
        name = str(tok)[1:]
        if name in self.values:
            raise self.error(f"redefinition of @{name}", tok)
        self.values[name] = (t, self.current_index, kind)
        return name

    def _typealias(self, decl: Tree) -> Operation:
        tok, target = decl.children
        name = str(tok)[1:]
        if isinstance(target, Token):
            self._declare_type(tok, NominalType(name, "opaque"))
            op: Operation = TypeAliasOp(name, None)
        else:
            t = self.build_type(target)
            self._declare_type(tok, t)
            op = TypeAliasOp(name, t)
        self.locate(op, tok)
        return op

    def _struct(self, decl: Tree) -> Operation:
        tok, *fields = decl.children
        name = str(tok)[1:]
        if name in self.types:
            raise self.error(f"redefinition of type ${name}", tok)
        built = [(str(f.children[0])[1:], self.build_type(f.children[1])) for f in fields]
        self._declare_type(tok, NominalType(name, "struct"))
        self.symbols.structs[name] = built
        op = StructOp(name, built)
        self.locate(op, tok)
        return op

    def _enum(self, decl: Tree) -> Operation:
        tok, *cases = decl.children
        name = str(tok)[1:]
        self._declare_type(tok, NominalType(name, "enum"))  # before the cases: recursion is fine
        built = [
            (str(c.children[0])[1:], [self.build_type(t) for t in c.children[1:]]) for c in cases
        ]
        self.symbols.enums[name] = [(c, tuple(ts)) for c, ts in built]
        op = EnumOp(name, built)
        self.locate(op, tok)
        return op

    def _var(self, decl: Tree) -> Operation:
        tok, type_node = decl.children
        t = self.build_type(type_node)
        name = self._declare_value(tok, t, "var")
        self.symbols.vars[name] = t
        op = VarOp(name, t)
        self.locate(op, tok)
        return op

    def _function(self, decl: Tree) -> tuple[Operation, Tree | None]:
        attrs, *rest = decl.children
        kind = rest[0] if isinstance(rest[0], Tree) else None
        if kind is not None:
            rest = rest[1:]
        tok, type_node, *body = rest
        t = self.build_type(type_node)
        if not isinstance(t, FunctionType):
            raise self.error(
                f"type signature {format_type(t)} of @{str(tok)[1:]} is not a function type",
                type_node,
            )
        name = self._declare_value(tok, t, "func")
        props: dict[str, Attribute | None] = {}
        for attr in attrs.children:
            if attr != "!inline":
                raise self.error(f"unknown function attribute '{attr}'", attr)
            props["inline"] = UnitAttr()
        if kind is not None:
            props.update(self._decl_kind(kind))
        self.symbols.functions[name] = t
        op = FuncOp(name, t, None, **props)
        self.locate(op, tok)
        return op, body[0] if body else None

    def _decl_kind(self, kind: Tree) -> dict[str, Attribute | None]:
        if kind.data == "extern_kind":
            return {"decl": StringAttr("extern")}
        word, primal, *clauses = kind.children
        props: dict[str, Attribute | None] = {
            "decl": StringAttr(str(word)),
            "primal": StringAttr(str(primal)[1:]),
        }
        for clause in clauses:
            if isinstance(clause, Token):
                props["seedable"] = UnitAttr()
            elif clause.data == "from_clause":
                props["from_index"] = IntAttr(int(clause.children[0]))
            elif clause.data == "wrt_clause":
                props["wrt"] = ArrayAttr([IntAttr(i) for i in ints_of(clause.children[0])])
            else:
                props["keeping"] = ArrayAttr([IntAttr(i) for i in ints_of(clause.children[0])])
        return props

    # ---- types -----------------------------------------------------------------------

    def build_type(self, node: Tree) -> Attribute:
        """A type tree -> type attribute, post-order with an explicit stack."""
        if node.data == "scalar_type":
            return self._cached_tensor((), node.children[0], node)
        if node.data == "tensor_type":
            *dims, dtype = node.children
            return self._cached_tensor(tuple(str(d) for d in dims), dtype, node)
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
            return self._cached_tensor((), node.children[0], node)
        if kind == "tensor_type":
            *dims, dtype = node.children
            return self._cached_tensor(tuple(str(d) for d in dims), dtype, node)
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
            count = int(node.children[0])
            if count < 0:
                raise self.error(f"array size must be non-negative, got {count}", node.children[0])
            return ArrayType(count, parts[0])
        assert kind == "named_type"
        return self._named_type(node.children[0])

    def _cached_tensor(self, dims: tuple[str, ...], dtype: Token, node: Tree) -> Attribute:
        key = (*dims, str(dtype))
        t = self.type_cache.get(key)
        if t is not None:
            return t
        shape = [int(d) for d in dims]
        for d, tok in zip(shape, node.children, strict=False):
            if d < 0:
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
        if index > self.current_index:
            raise self.error(f"type ${name} is used before its declaration", tok)
        return t

    # ---- function bodies ------------------------------------------------------------

    def _function_body(self, func: FuncOp, body: Tree, index: int) -> None:
        self.current_index = index
        scope = FunctionScope(index)
        self.scope = scope
        blocks: list[tuple[Block, Tree]] = []
        for block_tree in body.children:
            blocks.append((self._declare_block(block_tree, scope), block_tree))
        for _, block_tree in blocks:
            for inst in block_tree.children[1:]:
                if (
                    inst.data == "inst"
                    and isinstance(inst.children[0], Token)
                    and inst.children[0].type == "LOCAL"
                ):
                    scope.all_names.add(str(inst.children[0])[1:])
        for block, _ in blocks:
            func.body.add_block(block)
        for position, (block, block_tree) in enumerate(blocks):
            scope.block, scope.block_index, scope.inst_index = block, position, 0
            for arg in block.args:
                assert arg._name is not None
                self._define_local(arg._name, arg, block_tree)
            for inst in block_tree.children[1:]:
                if isinstance(inst, Tree) and inst.data == "inst":
                    self._instruction(inst)
        self.scope = None

    def _declare_block(self, block_tree: Tree, scope: FunctionScope) -> Block:
        label, *rest = block_tree.children
        params = [p for p in rest if isinstance(p, Tree) and p.data == "param"]
        name = str(label)[1:]
        if name in scope.blocks:
            raise self.error(f"redefinition of block '{name}", label)
        block = Block(arg_types=[self.build_type(p.children[1]) for p in params])
        block._name = name  # type: ignore[attr-defined]
        seen: set[str] = set()
        for arg, param in zip(block.args, params, strict=False):
            pname = str(param.children[0])[1:]
            if pname in seen:
                raise self.error(f"redefinition of %{pname}", param)
            seen.add(pname)
            scope.all_names.add(pname)
            arg._name = pname
        set_block_loc(block, self.source.location(label.line or 1, label.column or 1))
        scope.blocks[name] = block
        return block

    def _define_local(self, name: str, value: SSAValue, at: Tree | Token) -> None:
        scope = self.scope
        assert scope is not None
        if name in scope.locals:
            raise self.error(f"redefinition of %{name}", at)
        scope.locals[name] = value

    def _instruction(self, inst: Tree) -> None:
        scope = self.scope
        assert scope is not None and scope.block is not None
        result_tok = inst.children[0] if isinstance(inst.children[0], Token) else None
        kind = inst.children[-1]
        assert isinstance(kind, Tree)
        if result_tok is not None and result_tok.type == "ANON":
            self._check_anonymous(result_tok)
        op = self.inst_builders[kind.data](kind)
        self.locate(op, kind)
        scope.block.add_op(op)
        self._name_result(op, result_tok, kind)
        scope.inst_index += 1

    def _check_anonymous(self, tok: Token) -> None:
        scope = self.scope
        assert scope is not None
        b, i = (int(x) for x in str(tok)[1:].split("."))
        if (b, i) != (scope.block_index, scope.inst_index):
            want = f"%{scope.block_index}.{scope.inst_index}"
            raise self.error(f"anonymous value {tok} must be named {want} at this position", tok)

    def _name_result(self, op: Operation, tok: Token | None, kind: Tree) -> None:
        scope = self.scope
        assert scope is not None
        if not op.results:
            if tok is not None:
                raise self.error(f"cannot name the void result of '{first_token(kind)}'", tok)
            return
        result = op.results[0]
        if tok is not None and tok.type == "LOCAL":
            result._name = str(tok)[1:]
            self._define_local(result._name, result, tok)
            return
        scope.anonymous[(scope.block_index, scope.inst_index)] = result

    # ---- uses ------------------------------------------------------------------------

    def use(self, node: Tree) -> SSAValue:
        """Resolve one `use` (value + annotation); helper ops go into the current block."""
        value_node, type_node = node.children
        annotated = self.build_type(type_node)
        kind = value_node.data
        if kind in ("local_ref", "anon_ref"):
            value = self._local_value(value_node.children[0])
            self._check_use_type(value_node.children[0], value.type, annotated)
            return value
        if kind == "global_ref":
            return self._global_value(value_node.children[0], annotated)
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
        tree = self._scalar_tree(node)
        message = check_literal(tree, annotated, [], self.symbols)
        if message is not None:
            raise self.error(message, node)
        props = {"value": LiteralAttr(tree), "inline": UnitAttr()}
        op = LiteralOp.create(result_types=[annotated], properties=props)
        return self._helper_op(op, node).results[0]

    def _scalar_tree(self, node: Tree) -> LitTree:
        tok = node.children[0]
        if node.data == "int_lit":
            return ("int", int(tok))
        if node.data == "float_lit":
            value = float(tok)
            # One shared NaN object, so equal literals compare equal (nan != nan otherwise).
            return ("float", math.nan if math.isnan(value) else value)
        return ("bool", tok == "true")

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
            return self._scalar_tree(lit)
        if kind in ("zero_lit", "undefined_lit", "null_lit"):
            return (kind[: -len("_lit")],)
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
            return self._scalar_tree(value_node)
        if kind in TOP_ONLY_LITS:
            raise self.error(
                f"{TOP_ONLY_LITS[kind]} is only allowed as the literal of a 'literal' instruction",
                value_node,
            )
        if kind in AGGREGATE_LITS:
            return self._lit_frame(value_node, annotated)
        operands.append(self.use(use))
        return ("operand", len(operands) - 1)

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

    # ---- instructions ---------------------------------------------------------------

    def _instruction_table(self) -> dict[str, Callable[[Tree], Operation]]:
        return {
            "literal": self._literal,
            "unary": self._unary,
            "binary": self._binary,
            "select": lambda n: self.emit(SelectOp, n, self._uses(n)),
            "data_type_cast": lambda n: self.emit(
                DataTypeCastOp, n, self._uses(n), dtype=StringAttr(str(n.children[2]))
            ),
            "scan": self._scan,
            "reduce": self._reduce,
            "reduce_window": self._reduce_window,
            "concatenate": lambda n: self.emit(
                ConcatenateOp,
                n,
                [self.use(u) for u in n.children[1].children],
                axis=IntAttr(int(n.children[2])),
            ),
            "reverse": lambda n: self.emit(
                ReverseOp, n, self._uses(n), dims=self._int_array(n.children[2])
            ),
            "slice": lambda n: self.emit(
                SliceOp,
                n,
                self._uses(n),
                lower=IntAttr(int(n.children[2])),
                upper=IntAttr(int(n.children[3])),
            ),
            "convolve": self._convolve,
            "rank": lambda n: self.emit(RankOp, n, self._uses(n)),
            "shape": lambda n: self.emit(ShapeOp, n, self._uses(n)),
            "unit_count": lambda n: self.emit(UnitCountOp, n, self._uses(n)),
            "pad_shape": lambda n: self.emit(
                PadShapeOp, n, self._uses(n), index=IntAttr(int(n.children[2]))
            ),
            "squeeze_shape": lambda n: self.emit(
                SqueezeShapeOp, n, self._uses(n), index=IntAttr(int(n.children[2]))
            ),
            "shape_cast": lambda n: self.emit(
                ShapeCastOp, n, self._uses(n), shape=self._shape_spec(n.children[2])
            ),
            "bit_cast": lambda n: self.emit(
                BitCastOp, n, self._uses(n), target=self.build_type(n.children[2])
            ),
            "extract": self._extract,
            "insert": self._insert,
            "apply": self._apply,
            "create_stack": lambda n: self.emit(CreateStackOp, n, []),
            "destroy_stack": lambda n: self.emit(DestroyStackOp, n, self._uses(n)),
            "push": lambda n: self.emit(PushOp, n, self._uses(n)),
            "pop": lambda n: self.emit(
                PopOp, n, self._uses(n), elem_type=self.build_type(n.children[1])
            ),
            "allocate_stack": lambda n: self.emit(
                AllocateStackOp,
                n,
                [],
                elem_type=self.build_type(n.children[1]),
                count=IntAttr(int(n.children[2])),
            ),
            "allocate_heap": lambda n: self.emit(
                AllocateHeapOp, n, self._uses(n), elem_type=self.build_type(n.children[1])
            ),
            "allocate_box": lambda n: self.emit(
                AllocateBoxOp, n, [], elem_type=self.build_type(n.children[1])
            ),
            "project_box": lambda n: self.emit(ProjectBoxOp, n, self._uses(n)),
            "retain": lambda n: self.emit(RetainOp, n, self._uses(n)),
            "release": lambda n: self.emit(ReleaseOp, n, self._uses(n)),
            "deallocate": lambda n: self.emit(DeallocateOp, n, self._uses(n)),
            "load": lambda n: self.emit(LoadOp, n, self._uses(n)),
            "store": lambda n: self.emit(StoreOp, n, self._uses(n)),
            "element_pointer": self._element_pointer,
            "copy": lambda n: self.emit(CopyOp, n, self._uses(n)),
            "trap": lambda n: self.emit(TrapOp, n, []),
            "random": lambda n: self.emit(
                RandomOp, n, self._uses(n), shape=self._shape_spec(n.children[1])
            ),
            "branch": self._branch,
            "conditional": self._conditional,
            "branch_enum": self._branch_enum,
            "return": self._return,
        }

    def _uses(self, node: Tree) -> list[SSAValue]:
        """The `use` children of an instruction, in order."""
        return [self.use(c) for c in node.children if isinstance(c, Tree) and c.data == "use"]

    def _int_array(self, node: Tree) -> ArrayAttr[IntAttr]:
        return ArrayAttr([IntAttr(i) for i in ints_of(node)])

    def _shape_spec(self, node: Tree) -> ArrayAttr[IntAttr]:
        dims = [int(t) for t in node.children if t.type == "INT"]
        for d, tok in zip(dims, node.children, strict=False):
            if d < 0:
                raise self.error(f"dimension must be non-negative, got {d}", tok)
        return ArrayAttr([IntAttr(d) for d in dims])

    def emit(
        self, cls: type[Operation], node: Tree, operands: Sequence[SSAValue], **props: Attribute
    ) -> Operation:
        """Infer the result types of `cls` and create the op (a located error on failure)."""
        types = [o.type for o in operands]
        key = (cls, tuple(types), tuple(props.items()))
        results = self.infer_cache.get(key)
        if results is None:
            try:
                results = cls.infer(types, props, self.symbols)  # type: ignore[attr-defined]
            except InferenceError as err:
                raise self.error(str(err), node) from None
            for t in results:
                if isinstance(t, TensorType) and (message := size_error(t)) is not None:
                    raise self.error(message, node)
            self.infer_cache[key] = results
        return cls.create(
            operands=list(operands), result_types=list(results), properties=dict(props)
        )

    def _unary(self, node: Tree) -> Operation:
        return self.emit(UNARY_CLASSES[str(node.children[0])], node, self._uses(node))

    def _binary(self, node: Tree) -> Operation:
        return self.emit(BINARY_CLASSES[str(node.children[0])], node, self._uses(node))

    def _combinator(
        self, comb: Tree, operands: list[SSAValue], props: dict[str, Attribute]
    ) -> None:
        child = comb.children[0]
        if isinstance(child, Token):
            word = "dot" if child == "matrixMultiply" else str(child)
            props["combinator"] = StringAttr(word)
        else:
            operands.append(self.use(child))

    def _scan(self, node: Tree) -> Operation:
        _, x, comb, dims = node.children
        operands = [self.use(x)]
        props: dict[str, Attribute] = {"dims": self._int_array(dims)}
        self._combinator(comb, operands, props)
        return self.emit(ScanOp, node, operands, **props)

    def _reduce(self, node: Tree) -> Operation:
        _, x, comb, init, dims = node.children
        operands = [self.use(x)]
        props: dict[str, Attribute] = {"dims": self._int_array(dims)}
        fn: list[SSAValue] = []
        self._combinator(comb, fn, props)
        operands.append(self.use(init))
        return self.emit(ReduceOp, node, operands + fn, **props)

    def _reduce_window(self, node: Tree) -> Operation:
        _, x, comb, init, window, strides, padding = node.children
        operands = [self.use(x)]
        props: dict[str, Attribute] = {
            "window": self._int_array(window),
            "strides": self._int_array(strides),
            "padding": StringAttr(str(padding)),
        }
        fn: list[SSAValue] = []
        self._combinator(comb, fn, props)
        operands.append(self.use(init))
        return self.emit(ReduceWindowOp, node, operands + fn, **props)

    def _convolve(self, node: Tree) -> Operation:
        _, x, kernel, *clauses = node.children
        operands = [self.use(x), self.use(kernel)]
        props: dict[str, Attribute] = {}
        names = {
            "conv_strides": "strides",
            "conv_left": "left_dilation",
            "conv_right": "right_dilation",
        }
        for clause in clauses:
            if clause.data in names:
                props[names[clause.data]] = self._int_array(clause.children[0])
            elif clause.data == "conv_padding":
                flat = [int(tok) for pair in clause.children for tok in pair.children]
                props["padding"] = ArrayAttr([IntAttr(i) for i in flat])
            else:
                props["groups"] = IntAttr(int(clause.children[0]))
        return self.emit(ConvolveOp, node, operands, **props)

    def _keys(self, node: Tree, values: list[SSAValue]) -> ArrayAttr[Attribute]:
        keys: list[Attribute] = []
        for key in node.children:
            child = key.children[0]
            if isinstance(child, Tree):
                values.append(self.use(child))
                keys.append(ArrayAttr([]))
            elif child.type == "INT":
                keys.append(IntAttr(int(child)))
            else:
                keys.append(StringAttr(str(child)[1:]))
        return ArrayAttr(keys)

    def _extract(self, node: Tree) -> Operation:
        _, keys_node, x = node.children
        key_values: list[SSAValue] = []
        keys = self._keys(keys_node, key_values)
        return self.emit(ExtractOp, node, [self.use(x), *key_values], keys=keys)

    def _insert(self, node: Tree) -> Operation:
        _, value, dest, keys_node = node.children
        operands = [self.use(value), self.use(dest)]
        key_values: list[SSAValue] = []
        keys = self._keys(keys_node, key_values)
        return self.emit(InsertOp, node, operands + key_values, keys=keys)

    def _element_pointer(self, node: Tree) -> Operation:
        _, ptr, keys_node = node.children
        operands = [self.use(ptr)]
        key_values: list[SSAValue] = []
        keys = self._keys(keys_node, key_values)
        return self.emit(ElementPointerOp, node, operands + key_values, keys=keys)

    def _apply(self, node: Tree) -> Operation:
        _, callee, args_node, type_node = node.children
        t = self.build_type(type_node)
        if callee.type == "GLOBAL":
            name = str(callee)[1:]
            entry = self.values.get(name)
            if entry is None or entry[2] != "func":
                raise self.error(f"unknown function {callee}", callee)
            if not isinstance(t, FunctionType):
                raise self.error(
                    f"apply: callee type {format_type(t)} is not a function type", type_node
                )
            args = self._args(args_node)
            return self.emit(ApplyOp, node, args, callee=StringAttr(name), callee_type=t)
        fn = self._local_value(callee)
        self._check_use_type(callee, fn.type, t)
        return self.emit(ApplyIndirectOp, node, [fn, *self._args(args_node)])

    def _args(self, args_node: Tree) -> list[SSAValue]:
        if not args_node.children:
            return []
        return [self.use(u) for u in args_node.children[0].children]

    def _block(self, tok: Token) -> Block:
        scope = self.scope
        assert scope is not None
        block = scope.blocks.get(str(tok)[1:])
        if block is None:
            raise self.error(f"unknown basic block {tok}", tok)
        return block

    def _branch(self, node: Tree) -> Operation:
        _, label, args = node.children
        return BranchOp(self._block(label), self._args(args))

    def _conditional(self, node: Tree) -> Operation:
        _, cond, then_label, then_args, else_label, else_args = node.children
        c = self.use(cond)
        then_values = self._args(then_args)
        else_values = self._args(else_args)
        return ConditionalOp(
            c, self._block(then_label), then_values, self._block(else_label), else_values
        )

    def _branch_enum(self, node: Tree) -> Operation:
        _, value, *rest = node.children
        v = self.use(value)
        cases = [(str(rest[i])[1:], self._block(rest[i + 1])) for i in range(0, len(rest), 2)]
        return BranchEnumOp(v, cases)

    def _return(self, node: Tree) -> Operation:
        if len(node.children) == 1:
            return ReturnOp()
        return ReturnOp(self.use(node.children[1]))


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
