"""The DLVM-syntax printer for graph-level modules (docs/reference/language.md).

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
Literal and attribute texts live in `printer_literals`, the naming rules in `printer_names`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Block, Operation, SSAValue

from dlc.diagnostics import error_at
from dlc.dialects import graph_composite as gc
from dlc.dialects import graph_elementwise as ew
from dlc.dialects import graph_gather as gg
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
    prints_at_use,
)
from dlc.dialects.graph_types import format_type
from dlc.parser.printer_literals import (
    TypeTexts,
    format_dense,
    format_ints,
    format_literal,
    format_shape,
    format_string,
)
from dlc.parser.printer_names import FunctionNames

# ---------------------------------------------------------------------------
# Instructions
# ---------------------------------------------------------------------------


class _Context:
    """What instruction formatters need: value names, block names, symbols, type texts."""

    def __init__(
        self, names: FunctionNames, symbols: Symbols | None, dense: Callable[[bytes], str]
    ):
        self.names = names
        self.symbols = symbols
        self.ty = TypeTexts()
        self.dense = dense

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
            op.value.data,
            op.result.type,
            self.symbols,
            lambda k: self.use(op.elements[k]),
            self.dense,
        )

    def dest(self, block: Block, args: Iterable[SSAValue]) -> str:
        return f"'{self.names.blocks[block]}({self.uses(args)})"


def _owner_op(v: SSAValue) -> Operation | None:
    return v.owner if isinstance(v.owner, Operation) else v.owner.parent_op()


def _keys(op: Operation, ctx: _Context) -> str:
    """Element keys: `0`, `#field`, or a value use for a dynamic key."""
    assert isinstance(op, mem.ExtractOp | mem.InsertOp | mem.ElementPointerOp), op.name
    keys = op.properties["keys"]
    assert isinstance(keys, ArrayAttr)
    values = iter(op.key_values)
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
        text += f" strides {format_ints(op.strides)}"
    if op.padding is not None:
        pads = [x.data for x in op.padding.data]
        text += " padding " + ", ".join(
            f"({lo}, {hi})" for lo, hi in zip(pads[::2], pads[1::2], strict=True)
        )
    if op.left_dilation is not None:
        text += f" leftDilation {format_ints(op.left_dilation)}"
    if op.right_dilation is not None:
        text += f" rightDilation {format_ints(op.right_dilation)}"
    if op.groups is not None:
        text += f" groups {op.groups.data}"
    return text


def _branch_enum(op: BranchEnumOp, ctx: _Context) -> str:
    cases = " ".join(
        f"case ?{c.data} '{ctx.names.blocks[b]}"
        for c, b in zip(op.cases.data, op.dests, strict=True)
    )
    return f"branchEnum {ctx.use(op.value)} {cases}"


def _gather_nd(op: gg.GatherNDOp, ctx: _Context) -> str:
    batch = op.batch_dims.data
    tail = f" batchDims {batch}" if batch else ""
    return f"gatherND {ctx.use(op.data)} at {ctx.use(op.indices)}{tail}"


def _scatter(op: gg.ScatterElementsOp | gg.ScatterNDOp, ctx: _Context, axis: str) -> str:
    by = f" by {op.reduction.data}" if op.reduction is not None else ""
    head = f"{op.OPCODE} {ctx.use(op.updates)} to {ctx.use(op.data)}"
    return f"{head} at {ctx.use(op.indices)}{axis}{by}"


def _top_k(op: gc.TopKOp | gc.TopKIndicesOp, ctx: _Context) -> str:
    tail = " smallest" if op.smallest is not None else ""
    return f"{op.OPCODE} {ctx.use(op.operand)} count {op.count.data} along {op.axis.data}{tail}"


Formatter = Callable[[Any, _Context], str]

# One rule a line: op class -> its DLVM spelling (docs/reference/language.md). Subclasses of
# UnaryOp and BinaryOp find their base's rule through the MRO.
FORMATTERS: dict[type[Operation], Formatter] = {
    ew.UnaryOp: lambda op, c: f"{op.OPCODE} {c.use(op.operand)}",
    ew.BinaryOp: lambda op, c: f"{op.OPCODE} {c.use(op.lhs)}, {c.use(op.rhs)}",
    ew.NotOp: lambda op, c: f"not {c.use(op.operand)}",
    ew.SelectOp: lambda op, c: f"select {c.use(op.lhs)}, {c.use(op.rhs)} by {c.use(op.mask)}",
    ew.DataTypeCastOp: lambda op, c: f"dataTypeCast {c.use(op.operand)} to {op.dtype.data}",
    ts.ScanOp: lambda op, c: (
        f"scan {c.use(op.operand)} by {_combinator(op, c)} along {format_ints(op.dims)}"
    ),
    ts.ReduceOp: lambda op, c: (
        f"reduce {c.use(op.operand)} by {_combinator(op, c)} init {c.use(op.init)} along {format_ints(op.dims)}"
    ),
    ts.ReduceWindowOp: lambda op, c: (
        f"reduceWindow {c.use(op.operand)} by {_combinator(op, c)} init {c.use(op.init)} "
        f"dims {format_ints(op.window)} strides {format_ints(op.strides)} padding {op.padding.data}"
    ),
    ts.DotOp: lambda op, c: f"dot {c.use(op.lhs)}, {c.use(op.rhs)}",
    ts.ConcatenateOp: lambda op, c: f"concatenate {c.uses(op.inputs)} along {op.axis.data}",
    ts.TransposeOp: lambda op, c: f"transpose {c.use(op.operand)}",
    ts.ReverseOp: lambda op, c: f"reverse {c.use(op.operand)} along {format_ints(op.dims)}",
    ts.SliceOp: lambda op, c: (
        f"slice {c.use(op.operand)} from {op.lower.data} upto {op.upper.data}"
    ),
    ts.ConvolveOp: _convolve,
    ts.RankOp: lambda op, c: f"rank of {c.use(op.operand)}",
    ts.ShapeOp: lambda op, c: f"shape of {c.use(op.operand)}",
    ts.UnitCountOp: lambda op, c: f"unitCount of {c.use(op.operand)}",
    ts.PadShapeOp: lambda op, c: f"padShape {c.use(op.operand)} at {op.index.data}",
    ts.SqueezeShapeOp: lambda op, c: f"squeezeShape {c.use(op.operand)} at {op.index.data}",
    ts.ShapeCastOp: lambda op, c: f"shapeCast {c.use(op.operand)} to {format_shape(op.shape)}",
    ts.BitCastOp: lambda op, c: f"bitCast {c.use(op.operand)} to {c.ty(op.target)}",
    gg.GatherOp: lambda op, c: (
        f"gather {c.use(op.data)} at {c.use(op.indices)} along {op.axis.data}"
    ),
    gg.GatherElementsOp: lambda op, c: (
        f"gatherElements {c.use(op.data)} at {c.use(op.indices)} along {op.axis.data}"
    ),
    gg.GatherNDOp: _gather_nd,
    gg.ScatterElementsOp: lambda op, c: _scatter(op, c, f" along {op.axis.data}"),
    gg.ScatterNDOp: lambda op, c: _scatter(op, c, ""),
    gc.EinsumOp: lambda op, c: (
        f'einsum "{op.equation.data}" ' + ", ".join(c.use(v) for v in op.inputs)
    ),
    gc.TopKOp: lambda op, c: _top_k(op, c),
    gc.TopKIndicesOp: lambda op, c: _top_k(op, c),
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
        f"random {format_shape(op.shape)} from {c.use(op.low)} upto {c.use(op.high)}"
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
        text += f" wrt {format_ints(func.wrt)}"
    if func.keeping is not None:
        text += f" keeping {format_ints(func.keeping)}"
    if func.seedable is not None:
        text += " seedable"
    return text + "]"


def _format_block(block: Block, ctx: _Context) -> list[str]:
    params = ", ".join(f"%{ctx.names.values[a]}: {ctx.ty(a.type)}" for a in block.args)
    lines = [f"'{ctx.names.blocks[block]}({params}):"]
    lines.extend("    " + format_instruction(op, ctx) for op in block.ops if not prints_at_use(op))
    return lines


def print_function(
    func: FuncOp, symbols: Symbols | None = None, dense: Callable[[bytes], str] = format_dense
) -> str:
    """A function in DLVM syntax (attribute and declaration lines, signature, body);
    `dense` spells the payloads of dense literals (`format_literal`)."""
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
    ctx = _Context(FunctionNames(func), symbols, dense)
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


def format_declaration(
    op: Operation, symbols: Symbols | None = None, dense: Callable[[bytes], str] = format_dense
) -> str:
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
        return print_function(op, symbols, dense)
    raise error_at(op, f"the DLVM printer does not know the declaration '{op.name}'")


def _module_attr(module: ModuleOp, key: str, default: str) -> str:
    attr = module.attributes.get(key)
    return attr.data if isinstance(attr, StringAttr) else default


def print_module(module: ModuleOp, dense: Callable[[bytes], str] = format_dense) -> str:
    """A graph-level module in DLVM syntax; declarations keep their module order.
    `dense(data)` spells the payload of each dense literal: base64 (`format_dense`), or
    for the compile cache's key a digest of the bytes (text that does not parse)."""
    symbols = Symbols.of_module(module)
    name = _module_attr(module, "dlc.name", "")
    stage = _module_attr(module, "dlc.stage", "raw")
    parts = [f"module {format_string(name)}\nstage {stage}\n"]
    for op in module.ops:
        parts.append("\n" + format_declaration(op, symbols, dense) + "\n")
    return "".join(parts)
