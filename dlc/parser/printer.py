"""The DLVM-syntax printer for graph-level modules (shared/DLVM.md §1.7, with dlc's fixes).

Differences from DLVM's Writer: declarations keep their module order (DLVM groups them by
kind, which can break re-parsing); floats print as Python `repr` (`1e-05`, `inf`, `nan`),
which dlc's lexer reads back; names are made unique per function so the output always
re-parses (a clashing or malformed value name prints in the anonymous `%b.i` form, a
block parameter gets a fresh `%argB_K` name, an unnamed block prints as `'bb<index>`,
and block 0 always prints as `'entry`).

Inline literal operands (`LiteralOp` with `inline`) and global references (`GlobalRefOp`)
are not instructions: they print at their uses (`1: f32`, `@g: *f32`) and do not count
towards the `%b.i` numbering. Literals and types print iteratively, so deep nesting is fine.

`parse_module(print_module(m))` is structurally equal to `m` for every verified module.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue

from dlc.diagnostics import error_at
from dlc.dialects import graph_elementwise as ew
from dlc.dialects import graph_memory as mem
from dlc.dialects import graph_tensor as ts
from dlc.dialects.graph import (
    BranchEnumOp,
    BranchOp,
    ConditionalOp,
    EnumOp,
    FuncOp,
    GlobalRefOp,
    LiteralOp,
    ReturnOp,
    StructOp,
    Symbols,
    TypeAliasOp,
    VarOp,
)
from dlc.dialects.graph_literal import LitTree
from dlc.dialects.graph_types import (
    ArrayType,
    NominalType,
    TensorType,
    TupleType,
    _type_parts,  # pyright: ignore[reportPrivateUsage]
    format_type,
)

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


# ---------------------------------------------------------------------------
# Literals
# ---------------------------------------------------------------------------


class _TypeTexts:
    """Memoized `format_type` that also memoizes nested types, so printing each level of a
    deeply nested literal stays cheap. Keyed by identity: hashing a deep type recurses."""

    def __init__(self) -> None:
        self._texts: dict[int, tuple[Attribute, str]] = {}  # the type keeps its id unique

    def __call__(self, t: Attribute) -> str:
        work = [t]
        while work:
            top = work[-1]
            if id(top) in self._texts:
                work.pop()
                continue
            parts = _type_parts(top)
            missing = [p for p in parts if not isinstance(p, str) and id(p) not in self._texts]
            if missing:
                work.extend(missing)
                continue
            text = "".join(p if isinstance(p, str) else self._texts[id(p)][1] for p in parts)
            self._texts[id(top)] = (top, text)
            work.pop()
        return self._texts[id(t)][1]


def format_scalar(kind: str, value: Any) -> str:
    """`3`, `1.5`, `1e-05`, `inf`, `nan`, `true`: the DLVM spelling of a scalar payload."""
    if kind == "bool":
        return "true" if value else "false"
    if kind == "float":
        return repr(float(value))
    return str(int(value))


def format_literal(
    tree: LitTree,
    ty: Attribute,
    symbols: Symbols | None = None,
    operand: Callable[[int], str] | None = None,
) -> str:
    """A literal as a DLVM use, `LIT: T` (elements of aggregates carry their own types).

    `operand(k)` prints the literal op's k-th operand (a `("operand", k)` element);
    `symbols` gives struct fields and enum cases. Iterative: nesting depth is unbounded.
    """
    types = _TypeTexts()
    out: list[str] = []
    work: list[str | tuple[LitTree, Attribute]] = [(tree, ty)]
    while work:
        item = work.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        node, t = item
        if node[0] == "operand":
            if operand is None:
                raise ValueError("literal operand element printed without its operands")
            out.append(operand(node[1]))
            continue
        work.extend(reversed(_literal_parts(node, t, types(t), symbols)))
    return "".join(out)


def _literal_parts(
    node: LitTree, t: Attribute, type_text: str, symbols: Symbols | None
) -> list[str | tuple[LitTree, Attribute]]:
    """One level of a literal use: text pieces and (element, element type) pairs."""
    kind = node[0]
    if kind in ("int", "float", "bool"):
        return [f"{format_scalar(kind, node[1])}: {type_text}"]
    if kind in ("zero", "undefined", "null"):
        return [f"{kind}: {type_text}"]
    if kind == "struct":
        fields = dict(_struct_fields(t, symbols))
        pairs = [(f"#{name} = ", (value, fields[name])) for name, value in node[1]]
        return _joined("{", pairs, "}", type_text)
    if kind == "enum":
        case_types = _enum_case(t, node[1], symbols)
        return _joined(
            f"?{node[1]}(", [("", p) for p in zip(node[2], case_types, strict=True)], ")", type_text
        )
    brackets = {"tensor": ("<", ">"), "tuple": ("(", ")"), "array": ("[", "]")}
    if kind not in brackets:
        raise ValueError(f"unknown literal kind {kind!r}")
    elems = node[1]
    open_, close = brackets[kind]
    return _joined(
        open_,
        [("", p) for p in zip(elems, _element_types(kind, t, len(elems)), strict=True)],
        close,
        type_text,
    )


def _joined(
    open_: str, items: list[tuple[str, tuple[LitTree, Attribute]]], close: str, type_text: str
) -> list[str | tuple[LitTree, Attribute]]:
    parts: list[str | tuple[LitTree, Attribute]] = [open_]
    for i, (prefix, elem) in enumerate(items):
        parts.append((", " if i else "") + prefix)
        parts.append(elem)
    parts.append(f"{close}: {type_text}")
    return parts


def _element_types(kind: str, t: Attribute, count: int) -> Iterable[Attribute]:
    if kind == "tensor" and isinstance(t, TensorType) and t.rank >= 1:
        return [t.with_shape(t.dims[1:])] * count
    if kind == "tuple" and isinstance(t, TupleType) and len(t.types) == count:
        return t.types
    if kind == "array" and isinstance(t, ArrayType):
        return [t.element] * count
    raise ValueError(f"{kind} literal is not a valid value of type {format_type(t)}")


def _struct_fields(t: Attribute, symbols: Symbols | None) -> list[tuple[str, Attribute]]:
    if not isinstance(t, NominalType) or symbols is None or t.ident not in symbols.structs:
        raise ValueError(f"struct literal of type {format_type(t)} has no known struct")
    return symbols.structs[t.ident]


def _enum_case(t: Attribute, case: str, symbols: Symbols | None) -> tuple[Attribute, ...]:
    cases = dict(symbols.enums.get(t.ident, [])) if isinstance(t, NominalType) and symbols else {}
    if case not in cases:
        raise ValueError(f"enum literal ?{case} is not a case of {format_type(t)}")
    return cases[case]


# ---------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------


def is_hidden(op: Operation) -> bool:
    """Ops that print at their uses instead of as instructions."""
    return isinstance(op, GlobalRefOp) or (isinstance(op, LiteralOp) and op.inline is not None)


class _Names:
    """Printed names of one function's blocks and values, unique within the function."""

    def __init__(self, func: FuncOp):
        self.blocks: dict[Block, str] = {}
        self.values: dict[SSAValue, str] = {}
        wanted = self._wanted(func)
        taken: set[str] = set()
        for b, block in enumerate(func.body.blocks):
            self.blocks[block] = self._block_name(block, b, taken)
        taken = set()
        for b, block in enumerate(func.body.blocks):
            for k, arg in enumerate(block.args):
                name = _wanted_name(arg)
                if name is None or name in taken:
                    name = _fresh(f"arg{b}_{k}", taken | wanted)
                taken.add(name)
                self.values[arg] = name
            self._name_instructions(block, b, taken)

    @staticmethod
    def _wanted(func: FuncOp) -> set[str]:
        names = {_wanted_name(a) for block in func.body.blocks for a in block.args}
        names |= {_wanted_name(r) for op in func.body.walk() for r in op.results}
        return {n for n in names if n is not None}

    @staticmethod
    def _block_name(block: Block, index: int, taken: set[str]) -> str:
        name = getattr(block, "_name", None)
        if index == 0:
            name = "entry"
        elif not isinstance(name, str) or not _NAME_RE.fullmatch(name) or name in taken:
            name = _fresh(f"bb{index}", taken)
        if name == "entry" and index != 0:
            name = _fresh(f"bb{index}", taken)
        taken.add(name)
        return name

    def _name_instructions(self, block: Block, b: int, taken: set[str]) -> None:
        i = 0
        for op in block.ops:
            if is_hidden(op):
                continue
            for r in op.results:
                name = _wanted_name(r)
                if name is None or name in taken:
                    name = f"{b}.{i}"
                taken.add(name)
                self.values[r] = name
            i += 1


def _wanted_name(value: SSAValue) -> str | None:
    name = getattr(value, "_name", None)
    if isinstance(name, str) and _NAME_RE.fullmatch(name):
        return name
    return None


def _fresh(base: str, taken: set[str]) -> str:
    name, n = base, 0
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return name


# ---------------------------------------------------------------------------
# Instructions
# ---------------------------------------------------------------------------


class _Context:
    """What instruction formatters need: value names, block names, symbols, type texts."""

    def __init__(self, names: _Names, symbols: Symbols | None):
        self.names = names
        self.symbols = symbols
        self.ty = _TypeTexts()

    def ref(self, v: SSAValue) -> str:
        """The bare reference `%x` / `@g` of a value, without its type."""
        if isinstance(v.owner, GlobalRefOp):
            return "@" + v.owner.symbol.data
        if v not in self.names.values:
            raise error_at(
                _owner_op(v), "cannot print a use of a value defined outside the function"
            )
        return "%" + self.names.values[v]

    def use(self, v: SSAValue) -> str:
        """`%x: T`, `@g: *T` or an inline literal `1: f32`."""
        owner = v.owner
        if isinstance(owner, LiteralOp) and owner.inline is not None:
            return self.literal(owner)
        return f"{self.ref(v)}: {self.ty(v.type)}"

    def uses(self, values: Iterable[SSAValue]) -> str:
        return ", ".join(self.use(v) for v in values)

    def literal(self, op: LiteralOp) -> str:
        return format_literal(
            op.value.data, op.result.type, self.symbols, lambda k: self.use(op.elements[k])
        )

    def dest(self, block: Block, args: Iterable[SSAValue]) -> str:
        return f"'{self.names.blocks[block]}({self.uses(args)})"


def _owner_op(v: SSAValue) -> Operation | None:
    return v.owner if isinstance(v.owner, Operation) else v.owner.parent_op()


def _ints(attr: Attribute | None) -> str:
    assert isinstance(attr, ArrayAttr)
    return ", ".join(str(x.data) for x in attr.data)  # type: ignore[union-attr]


def _keys(op: Operation, ctx: _Context) -> str:
    """Element keys: `0`, `#field`, or a value use for a dynamic key."""
    keys = op.properties["keys"]
    assert isinstance(keys, ArrayAttr)
    values = iter(op.key_values)  # type: ignore[attr-defined]
    out: list[str] = []
    for k in keys.data:
        if isinstance(k, IntAttr):
            out.append(str(k.data))
        elif isinstance(k, StringAttr):
            out.append("#" + k.data)
        else:
            out.append(ctx.use(next(values)))
    return ", ".join(out)


def _combinator(op: Any, ctx: _Context) -> str:
    if op.combinator_fn is not None:
        return ctx.use(op.combinator_fn)
    return op.combinator.data


def _convolve(op: ts.ConvolveOp, ctx: _Context) -> str:
    text = f"convolve {ctx.use(op.lhs)} kernel {ctx.use(op.kernel)}"
    if op.strides is not None:
        text += f" strides {_ints(op.strides)}"
    if op.padding is not None:
        pads = [x.data for x in op.padding.data]
        text += " padding " + ", ".join(
            f"({lo}, {hi})" for lo, hi in zip(pads[::2], pads[1::2], strict=True)
        )
    if op.left_dilation is not None:
        text += f" leftDilation {_ints(op.left_dilation)}"
    if op.right_dilation is not None:
        text += f" rightDilation {_ints(op.right_dilation)}"
    if op.groups is not None:
        text += f" groups {op.groups.data}"
    return text


def _shape(attr: ArrayAttr[IntAttr]) -> str:
    return " x ".join(str(d.data) for d in attr.data) or "scalar"


def _branch_enum(op: BranchEnumOp, ctx: _Context) -> str:
    cases = " ".join(
        f"case ?{c.data} '{ctx.names.blocks[b]}"
        for c, b in zip(op.cases.data, op.dests, strict=True)
    )
    return f"branchEnum {ctx.use(op.value)} {cases}"


Formatter = Callable[[Any, _Context], str]

# One rule a line: op class -> its DLVM spelling (shared/DLVM.md §2.2). Subclasses of
# UnaryOp and BinaryOp find their base's rule through the MRO.
FORMATTERS: dict[type[Operation], Formatter] = {
    ew.UnaryOp: lambda op, c: f"{op.OPCODE} {c.use(op.operand)}",
    ew.BinaryOp: lambda op, c: f"{op.OPCODE} {c.use(op.lhs)}, {c.use(op.rhs)}",
    ew.NotOp: lambda op, c: f"not {c.use(op.operand)}",
    ew.SelectOp: lambda op, c: f"select {c.use(op.lhs)}, {c.use(op.rhs)} by {c.use(op.mask)}",
    ew.DataTypeCastOp: lambda op, c: f"dataTypeCast {c.use(op.operand)} to {op.dtype.data}",
    ts.ScanOp: lambda op, c: (
        f"scan {c.use(op.operand)} by {_combinator(op, c)} along {_ints(op.dims)}"
    ),
    ts.ReduceOp: lambda op, c: (
        f"reduce {c.use(op.operand)} by {_combinator(op, c)} init {c.use(op.init)} along {_ints(op.dims)}"
    ),
    ts.ReduceWindowOp: lambda op, c: (
        f"reduceWindow {c.use(op.operand)} by {_combinator(op, c)} init {c.use(op.init)} "
        f"dims {_ints(op.window)} strides {_ints(op.strides)} padding {op.padding.data}"
    ),
    ts.DotOp: lambda op, c: f"dot {c.use(op.lhs)}, {c.use(op.rhs)}",
    ts.ConcatenateOp: lambda op, c: f"concatenate {c.uses(op.inputs)} along {op.axis.data}",
    ts.TransposeOp: lambda op, c: f"transpose {c.use(op.operand)}",
    ts.ReverseOp: lambda op, c: f"reverse {c.use(op.operand)} along {_ints(op.dims)}",
    ts.SliceOp: lambda op, c: (
        f"slice {c.use(op.operand)} from {op.lower.data} upto {op.upper.data}"
    ),
    ts.ConvolveOp: _convolve,
    ts.RankOp: lambda op, c: f"rank of {c.use(op.operand)}",
    ts.ShapeOp: lambda op, c: f"shape of {c.use(op.operand)}",
    ts.UnitCountOp: lambda op, c: f"unitCount of {c.use(op.operand)}",
    ts.PadShapeOp: lambda op, c: f"padShape {c.use(op.operand)} at {op.index.data}",
    ts.SqueezeShapeOp: lambda op, c: f"squeezeShape {c.use(op.operand)} at {op.index.data}",
    ts.ShapeCastOp: lambda op, c: f"shapeCast {c.use(op.operand)} to {_shape(op.shape)}",
    ts.BitCastOp: lambda op, c: f"bitCast {c.use(op.operand)} to {c.ty(op.target)}",
    mem.ExtractOp: lambda op, c: f"extract {_keys(op, c)} from {c.use(op.operand)}",
    mem.InsertOp: lambda op, c: f"insert {c.use(op.source)} to {c.use(op.dest)} at {_keys(op, c)}",
    mem.ApplyOp: lambda op, c: (
        f"apply @{op.callee.data}({c.uses(op.args)}): {c.ty(op.callee_type)}"
    ),
    mem.ApplyIndirectOp: lambda op, c: (
        f"apply {c.ref(op.callee)}({c.uses(op.args)}): {c.ty(op.callee.type)}"
    ),
    mem.CreateStackOp: lambda op, c: "createStack",
    mem.DestroyStackOp: lambda op, c: f"destroyStack {c.use(op.stack)}",
    mem.PushOp: lambda op, c: f"push {c.use(op.value)} to {c.use(op.stack)}",
    mem.PopOp: lambda op, c: f"pop {c.ty(op.elem_type)} from {c.use(op.stack)}",
    mem.AllocateStackOp: lambda op, c: f"allocateStack {c.ty(op.elem_type)} count {op.count.data}",
    mem.AllocateHeapOp: lambda op, c: f"allocateHeap {c.ty(op.elem_type)} count {c.use(op.count)}",
    mem.AllocateBoxOp: lambda op, c: f"allocateBox {c.ty(op.elem_type)}",
    mem.ProjectBoxOp: lambda op, c: f"projectBox {c.use(op.box)}",
    mem.RetainOp: lambda op, c: f"retain {c.use(op.box)}",
    mem.ReleaseOp: lambda op, c: f"release {c.use(op.box)}",
    mem.DeallocateOp: lambda op, c: f"deallocate {c.use(op.pointer)}",
    mem.LoadOp: lambda op, c: f"load {c.use(op.pointer)}",
    mem.StoreOp: lambda op, c: f"store {c.use(op.value)} to {c.use(op.pointer)}",
    mem.ElementPointerOp: lambda op, c: f"elementPointer {c.use(op.pointer)} at {_keys(op, c)}",
    mem.CopyOp: lambda op, c: (
        f"copy from {c.use(op.source)} to {c.use(op.dest)} count {c.use(op.count)}"
    ),
    mem.TrapOp: lambda op, c: "trap",
    mem.RandomOp: lambda op, c: (
        f"random {_shape(op.shape)} from {c.use(op.low)} upto {c.use(op.high)}"
    ),
    LiteralOp: lambda op, c: f"literal {c.literal(op)}",
    BranchOp: lambda op, c: f"branch {c.dest(op.dest, op.args)}",
    ConditionalOp: lambda op, c: (
        f"conditional {c.use(op.cond)} then {c.dest(op.then_block, op.then_args)} "
        f"else {c.dest(op.else_block, op.else_args)}"
    ),
    BranchEnumOp: _branch_enum,
    ReturnOp: lambda op, c: "return" if op.value is None else f"return {c.use(op.value)}",
}


def format_instruction(op: Operation, ctx: _Context) -> str:
    """One instruction line without indentation: `%x = add …`, or `store …` when void."""
    for cls in type(op).__mro__:
        rule = FORMATTERS.get(cls)
        if rule is not None:
            break
    else:
        raise error_at(op, f"the DLVM printer does not know the operation '{op.name}'")
    text = rule(op, ctx)
    if not op.results:
        return text
    return f"%{ctx.names.values[op.results[0]]} = {text}"


# ---------------------------------------------------------------------------
# Functions, declarations, modules
# ---------------------------------------------------------------------------


def _decl_line(func: FuncOp) -> str | None:
    """`[extern]` or `[adjoint @p from 0 wrt 1, 2 keeping 0 seedable]` (present clauses only)."""
    if func.decl is None:
        return None
    if func.decl.data == "extern":
        return "[extern]"
    text = f"[{func.decl.data} @{func.primal.data if func.primal else ''}"
    if func.from_index is not None:
        text += f" from {func.from_index.data}"
    if func.wrt is not None:
        text += f" wrt {_ints(func.wrt)}"
    if func.keeping is not None:
        text += f" keeping {_ints(func.keeping)}"
    if func.seedable is not None:
        text += " seedable"
    return text + "]"


def _format_block(block: Block, ctx: _Context) -> list[str]:
    params = ", ".join(f"%{ctx.names.values[a]}: {ctx.ty(a.type)}" for a in block.args)
    lines = [f"'{ctx.names.blocks[block]}({params}):"]
    lines.extend("    " + format_instruction(op, ctx) for op in block.ops if not is_hidden(op))
    return lines


def print_function(func: FuncOp, symbols: Symbols | None = None) -> str:
    """A function in DLVM syntax (attribute and declaration lines, signature, body)."""
    if symbols is None:
        parent = func.parent_op()
        symbols = Symbols.of_module(parent) if parent is not None else None
    lines = ["!inline"] if func.inline is not None else []
    decl = _decl_line(func)
    if decl is not None:
        lines.append(decl)
    signature = f"func @{func.sym_name.data}: {format_type(func.function_type)}"
    if func.is_declaration:
        return "\n".join([*lines, signature])
    ctx = _Context(_Names(func), symbols)
    lines.append(signature + " {")
    for block in func.body.blocks:
        lines.extend(_format_block(block, ctx))
    lines.append("}")
    return "\n".join(lines)


def _format_struct(op: StructOp) -> str:
    fields = "".join(f"    #{name}: {format_type(t)}\n" for name, t in op.fields)
    return f"struct ${op.sym_name.data} {{\n{fields}}}"


def _format_enum(op: EnumOp) -> str:
    lines = "".join(
        f"    ?{name}({', '.join(format_type(t) for t in ts_)})\n" for name, ts_ in op.cases
    )
    return f"enum ${op.sym_name.data} {{\n{lines}}}"


def _format_alias(op: TypeAliasOp) -> str:
    target = "opaque" if op.aliased is None else format_type(op.aliased)
    return f"type ${op.sym_name.data} = {target}"


def format_declaration(op: Operation, symbols: Symbols | None = None) -> str:
    """One top-level declaration in DLVM syntax (no surrounding blank lines)."""
    if isinstance(op, StructOp):
        return _format_struct(op)
    if isinstance(op, EnumOp):
        return _format_enum(op)
    if isinstance(op, TypeAliasOp):
        return _format_alias(op)
    if isinstance(op, VarOp):
        return f"var @{op.sym_name.data}: {format_type(op.var_type)}"
    if isinstance(op, FuncOp):
        return print_function(op, symbols)
    raise error_at(op, f"the DLVM printer does not know the declaration '{op.name}'")


def format_string(text: str) -> str:
    """A DLVM string literal with the escapes \\" \\\\ \\n \\t \\r."""
    return '"' + "".join(_ESCAPES.get(ch, ch) for ch in text) + '"'


def _module_attr(module: ModuleOp, key: str, default: str) -> str:
    attr = module.attributes.get(key)
    return attr.data if isinstance(attr, StringAttr) else default


def print_module(module: ModuleOp) -> str:
    """A graph-level module in DLVM syntax; declarations keep their module order."""
    symbols = Symbols.of_module(module)
    name = _module_attr(module, "dlc.name", "")
    stage = _module_attr(module, "dlc.stage", "raw")
    parts = [f"module {format_string(name)}\nstage {stage}\n"]
    for op in module.ops:
        parts.append("\n" + format_declaration(op, symbols) + "\n")
    return "".join(parts)
