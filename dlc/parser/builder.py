"""Lark parse tree -> `graph` dialect IR, with DLVM's name and type rules (docs/reference/language.md).

Everything here is iterative: types and literals are built with explicit stacks, and
instructions are flat. Declarations are processed in textual order (type aliases and
`var`s must be declared before use; struct and enum names are registered first, so
types may refer to them anywhere, as recursive types need); every function signature is
registered before any body is built (functions may be forward-referenced). Type inference runs per instruction
through the op class's `infer`, as DLVM's parser does.
"""

from __future__ import annotations

from lark import Token, Tree
from xdsl.dialects.builtin import ArrayAttr, IntAttr, ModuleOp, StringAttr, UnitAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue

from dlc.diagnostics import set_block_loc
from dlc.dialects import graph_symbolic as symbolic
from dlc.dialects.graph import EnumOp, FuncOp, StructOp, TypeAliasOp, VarOp
from dlc.dialects.graph_types import FunctionType, NominalType, format_type
from dlc.parser.builder_instructions import InstructionBuilder
from dlc.parser.builder_literals import FunctionScope
from dlc.parser.builder_types import as_token, first_token, ints_of


class ModuleBuilder(InstructionBuilder):
    """Builds one verified-ready `builtin.module` from a `start` tree."""

    # ---- module ----------------------------------------------------------------------

    def build(self, tree: Tree) -> ModuleOp:
        name_tok, stage_tok = as_token(tree.children[0]), tree.children[1]
        decls = tree.children[2:]
        ops: list[Operation] = []
        bodies: list[tuple[FuncOp, Tree, int]] = []
        for index, decl in enumerate(decls):  # structs and enums may be used before
            if decl.data in ("struct", "enum"):  # their declaration (recursive types)
                self.current_index = index
                tok = as_token(decl.children[0])
                self._declare_type(tok, NominalType(str(tok)[1:], decl.data))
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
        if name in self.types and self.types[name][1] < self.current_index:
            raise self.error(f"redefinition of type ${name}", tok)  # (a struct or enum
            # declared later is registered early: its own declaration reports it)
        self.types[name] = (t, self.current_index)

    def _declare_value(self, tok: Token, t: Attribute, kind: str) -> str:
        name = str(tok)[1:]
        if name in self.values:
            raise self.error(f"redefinition of @{name}", tok)
        self.values[name] = (t, self.current_index, kind)
        return name

    def _typealias(self, decl: Tree) -> Operation:
        tok, target = as_token(decl.children[0]), decl.children[1]
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
        tok, fields = as_token(decl.children[0]), decl.children[1:]
        name = str(tok)[1:]
        built = [(str(f.children[0])[1:], self.build_type(f.children[1])) for f in fields]
        self._declare_type(tok, NominalType(name, "struct"))
        self.symbols.structs[name] = built
        op = StructOp(name, built)
        self.locate(op, tok)
        return op

    def _enum(self, decl: Tree) -> Operation:
        tok, cases = as_token(decl.children[0]), decl.children[1:]
        name = str(tok)[1:]
        self._declare_type(tok, NominalType(name, "enum"))
        built = [
            (str(c.children[0])[1:], [self.build_type(t) for t in c.children[1:]]) for c in cases
        ]
        self.symbols.enums[name] = [(c, tuple(ts)) for c, ts in built]
        op = EnumOp(name, built)
        self.locate(op, tok)
        return op

    def _var(self, decl: Tree) -> Operation:
        tok, type_node = as_token(decl.children[0]), decl.children[1]
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
        tok, type_node, body = as_token(rest[0]), rest[1], rest[2:]
        t = self.build_type(type_node)
        if not isinstance(t, FunctionType):
            raise self.error(
                f"type signature {format_type(t)} of @{str(tok)[1:]} is not a function type",
                type_node,
            )
        if (message := symbolic.signature_problem(t)) is not None:
            raise self.error(message, type_node)
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
                props["from_index"] = IntAttr(int(as_token(clause.children[0])))
            elif clause.data == "wrt_clause":
                props["wrt"] = ArrayAttr([IntAttr(i) for i in ints_of(clause.children[0])])
            else:
                props["keeping"] = ArrayAttr([IntAttr(i) for i in ints_of(clause.children[0])])
        return props

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
        label, rest = as_token(block_tree.children[0]), block_tree.children[1:]
        params = [p for p in rest if isinstance(p, Tree) and p.data == "param"]
        name = str(label)[1:]
        if name in scope.blocks:
            raise self.error(f"redefinition of block '{name}", label)
        block = Block(arg_types=[self.build_type(p.children[1]) for p in params])
        block._name = name
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
        self._check_symbolic(op, kind)
        self.locate(op, kind)
        scope.block.add_op(op)
        self._name_result(op, result_tok, kind)
        scope.inst_index += 1

    def _check_symbolic(self, op: Operation, kind: Tree) -> None:
        """Ops outside the symbolic subset (`emit` checked those it infers before)."""
        if (message := symbolic.op_problem(op)) is not None:
            raise self.error(message, kind)

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
