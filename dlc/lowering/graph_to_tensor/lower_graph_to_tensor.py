"""lower-graph-to-tensor: straight-line graph functions -> `tensor.func` of computes."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from xdsl.builder import Builder, InsertPoint
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass

from dlc.analysis.levels import require_level
from dlc.diagnostics import copy_loc, error_at
from dlc.dialects import graph, tensor
from dlc.dialects import graph_memory as gm
from dlc.dialects import graph_tensor as gt
from dlc.dialects.graph import Symbols
from dlc.dialects.graph_symbolic import require_static
from dlc.dialects.graph_types import NominalType, TensorType, nest_leaves
from dlc.dialects.layout import LayoutError, leaves
from dlc.dialects.recursive_types import enum_tag
from dlc.dialects.tensor_memory import GlobalAddressOp
from dlc.lowering.graph_to_tensor.boxes import Boxes
from dlc.lowering.graph_to_tensor.compute_builder import Lowered, Splat, build_compute, tag_is
from dlc.lowering.graph_to_tensor.literals import UNSUPPORTED, lower_literal
from dlc.lowering.graph_to_tensor.memory import MemoryRules, lower_aggregate_key_op
from dlc.lowering.graph_to_tensor.memory import unflatten as memory_unflatten
from dlc.lowering.graph_to_tensor.ops import UnsupportedOp, rule_for
from dlc.lowering.graph_to_tensor.owned import OwnedLowering
from dlc.lowering.graph_to_tensor.ownership import Ownership
from dlc.lowering.scalar_ops import Unsupported

MEMORY_OPS = (
    gm.AllocateStackOp,
    gm.AllocateHeapOp,
    gm.AllocateBoxOp,
    gm.ProjectBoxOp,
    gm.RetainOp,
    gm.ReleaseOp,
    gm.DeallocateOp,
    gm.LoadOp,
    gm.StoreOp,
    gm.ElementPointerOp,
    gm.CopyOp,
    gt.BitCastOp,
    gm.RandomOp,
    gm.CreateStackOp,
    gm.PushOp,
    gm.PopOp,
    gm.DestroyStackOp,
)


def _has_aggregate(args: list[Lowered]) -> bool:
    return isinstance(args[0], list) or (len(args) > 1 and isinstance(args[1], list))


def check_type(op: Operation, t: Attribute, symbols: Symbols | None = None) -> None:
    """Types made of tensors of supported data types (layout.py: tuples, structs,
    arrays, enums, pointers, boxes)."""
    try:
        types = leaves(t, symbols or Symbols())
    except LayoutError as err:
        raise error_at(op, UNSUPPORTED + str(err)) from None
    for leaf in types:
        if leaf.dt not in tensor.SUPPORTED_DTYPES:
            raise error_at(op, UNSUPPORTED + f"{leaf.dt} data type")


def flatten(value: Lowered) -> list[SSAValue | Splat]:
    """Leaves of a (nested) tuple in order."""
    out: list[SSAValue | Splat] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(reversed(v))
        else:
            out.append(v)
    return out


def flatten_type(t: Attribute, symbols: Symbols | None = None) -> list[TensorType]:
    return leaves(t, symbols or Symbols())


def materialize(b: Builder, value: SSAValue | Splat) -> SSAValue:
    """A splat as a tensor value (a compute yielding the constant)."""
    if isinstance(value, SSAValue):
        return value
    return build_compute(b, value.type, lambda s, i, _: s.read(value, i)).result


def unflatten(t: Attribute, leaves: Iterator[SSAValue], symbols: Symbols | None = None) -> Lowered:
    """The `Lowered` value of (nested tuple) type `t` made of `leaves` in order (with
    `symbols`: of any aggregate type, see `memory_unflatten`)."""
    if symbols is not None:
        return memory_unflatten(t, leaves, symbols)
    return nest_leaves(t, leaves, list)


def reverse_post_order(entry: Block) -> list[Block]:
    """Blocks reachable from `entry`, each after its dominators (iterative DFS)."""
    seen = {entry}
    order: list[Block] = []
    stack: list[tuple[Block, Iterator[Block]]] = [(entry, iter(_successors(entry)))]
    while stack:
        block, succs = stack[-1]
        nxt = next(succs, None)
        if nxt is None:
            stack.pop()
            order.append(block)
        elif nxt not in seen:
            seen.add(nxt)
            stack.append((nxt, iter(_successors(nxt))))
    return order[::-1]


def _successors(block: Block) -> list[Block]:
    last = block.last_op
    return list(last.successors) if last is not None else []


class FunctionLowering(OwnedLowering):
    """Lowers one graph function definition to a `tensor.func` (a CFG of blocks)."""

    def __init__(
        self,
        func: graph.FuncOp,
        symbols: dict[str, graph.FuncOp] | None = None,
        types: Symbols | None = None,
        boxes: Boxes | None = None,
    ):
        self.func = func
        self.symbols = symbols or {}
        self.types = types or Symbols()
        self.memory = MemoryRules(self.types)
        self.boxes = boxes or Boxes(self.types, self.memory)
        self.values: dict[SSAValue, Lowered] = {}
        self.blocks: dict[Block, Block] = {}

    def run(self) -> tensor.FuncOp:
        ftype = self.func.function_type
        for t in ftype.args:
            check_type(self.func, t, self.types)
        entry = self.func.entry
        assert entry is not None
        order = reverse_post_order(entry)
        for block in order:
            self.precheck_block(block)
        self.own = Ownership(self.func, order, self.types)
        check_type(self.func, ftype.output, self.types)
        outputs = flatten_type(ftype.output, self.types)
        inputs = [leaf for t in ftype.args for leaf in flatten_type(t, self.types)]
        result = tensor.FuncOp(self.func.sym_name.data, inputs, outputs)
        copy_loc(self.func, result)
        self.blocks[entry] = result.body.blocks[0]
        for block in order[1:]:
            types = [leaf for a in block.args for leaf in flatten_type(a.type, self.types)]
            self.blocks[block] = Block(arg_types=types)
            result.body.add_block(self.blocks[block])
        for block in order:
            self.bind_args(block)
            builder = Builder(InsertPoint.at_end(self.blocks[block]))
            self.release_unused_args(builder, block)
            for op in block.ops:
                self.lower_op(builder, op)
        return result

    def bind_args(self, block: Block) -> None:
        leaves = iter(self.blocks[block].args)
        for arg in block.args:
            self.values[arg] = unflatten(arg.type, leaves, self.types)

    def precheck_block(self, block: Block) -> None:
        for arg in block.args:
            check_type(self.func, arg.type, self.types)
        for op in block.ops:
            self.precheck(op)

    def lower_op(self, b: Builder, op: Operation) -> None:
        """Lower `op` at the end of the builder's block; the new ops (after the block's
        old last op, and in blocks added to the region) get `op`'s location. No
        `len(block.ops)`: it walks the block, quadratic over a long function."""
        start = b.insertion_point.block
        assert start is not None and start.parent is not None
        last, last_block = start.last_op, start.parent.last_block
        assert last_block is not None  # `start` is one of the region's blocks
        try:
            block = op.parent_block()
            assert block is not None
            if not self.lower_counted_terminator(b, block, op):
                self._lower_op(b, op)
                self.after_op(b, block, op)
        except (UnsupportedOp, Unsupported) as err:
            raise error_at(op, UNSUPPORTED + str(err)) from None
        new = last.next_op if last is not None else start.first_op
        while new is not None:
            copy_loc(op, new)
            new = new.next_op
        block = last_block.next_block if b.insertion_point.block is not start else None
        while block is not None:  # a branch lowered into several blocks (branchEnum)
            for new in block.ops:
                copy_loc(op, new)
            block = block.next_block

    def _lower_op(self, b: Builder, op: Operation) -> None:
        if isinstance(op, graph.ReturnOp):
            leaves = flatten(self.values[op.value]) if op.value is not None else []
            b.insert(tensor.ReturnOp(*(materialize(b, v) for v in leaves)))
        elif isinstance(op, graph.BranchOp):
            b.insert(tensor.BrOp(self.blocks[op.dest], self.edge(b, op.args)))
        elif isinstance(op, graph.ConditionalOp):
            cond = materialize(b, self.values[op.cond])  # type: ignore[arg-type]
            then_args = self.edge(b, op.then_args)
            else_args = self.edge(b, op.else_args)
            b.insert(
                tensor.CondBrOp(
                    cond,
                    self.blocks[op.then_block],
                    then_args,
                    self.blocks[op.else_block],
                    else_args,
                )
            )
        elif isinstance(op, graph.BranchEnumOp):
            self.lower_branch_enum(b, op)
        elif isinstance(op, gm.ApplyOp):
            self.lower_apply(b, op)
        elif isinstance(op, graph.GlobalRefOp) and op.symbol.data in self.types.vars:
            var_type = self.types.vars[op.symbol.data]
            size = self.memory.size(var_type)
            addr = b.insert(GlobalAddressOp(op.symbol.data, size)).result
            self.values[op.result] = self.memory.allocation(b, addr, size)
        elif isinstance(op, graph.GlobalRefOp):
            self.values[op.result] = []  # a function: no tensor value
        elif type(op) in MEMORY_OPS:
            self.check_counted(op)
            old = self.old_contents(b, op)
            value = self.memory.lower(b, op, [self.values[o] for o in op.operands])
            if old is not None:
                self.boxes.release(b, op.operands[0].type, old)
            if op.results:
                self.values[op.results[0]] = value  # type: ignore[assignment]
        elif isinstance(op, gm.TrapOp):
            b.insert(tensor.TrapOp())
        else:
            args = [self.values[o] for o in op.operands]
            self.values[op.results[0]] = self.dispatch(b, op, args)

    def lower_branch_enum(self, b: Builder, op: graph.BranchEnumOp) -> None:
        """A chain of `tensor.cond_br` on the tag; the last case is the default."""
        t = op.value.type
        assert isinstance(t, NominalType)
        value = self.enum_body(b, t, self.values[op.value])
        assert isinstance(value, list)
        names = [c for c, _ in self.types.enums[t.ident]]
        tag = value[0]
        targets = list(zip([c.data for c in op.cases], op.dests, strict=True))
        for k, (case, dest) in enumerate(targets):
            index = names.index(case)
            stored = enum_tag(t, case, self.types)
            args = [materialize(b, v) for v in flatten(value[1 + index])]
            if k == len(targets) - 1:
                b.insert(tensor.BrOp(self.blocks[dest], args))
                return
            hit = tag_is(b, tag, stored)
            region = b.insertion_point.block.parent
            assert region is not None, "the builder inserts into a function body"
            next_block = Block()
            region.add_block(next_block)
            b.insert(tensor.CondBrOp(hit, self.blocks[dest], args, next_block, []))
            b.insertion_point = InsertPoint.at_end(next_block)

    def edge(self, b: Builder, args: Sequence[SSAValue]) -> list[SSAValue]:
        """Block arguments of a branch: tuple leaves, splats materialized."""
        return [materialize(b, v) for a in args for v in flatten(self.values[a])]

    def lower_apply(self, b: Builder, op: gm.ApplyOp) -> None:
        callee = self.symbols.get(op.callee.data)
        if callee is None:
            raise UnsupportedOp(f"apply of @{op.callee.data}, which has no definition")
        extern = callee.decl is not None and callee.decl.data == "extern"
        if callee.decl is not None and not extern:  # a declaration, not an extern
            raise UnsupportedOp(f"apply of the {callee.decl.data} declaration @{op.callee.data}")
        ftype = op.callee_type
        args = self.edge(b, op.args)
        out_types: list[TensorType] = (
            [] if graph.is_void(ftype.output) else flatten_type(ftype.output, self.types)
        )
        call = b.insert(tensor.CallOp(op.callee.data, args, out_types, extern=extern))
        if op.results:
            self.values[op.results[0]] = unflatten(ftype.output, iter(call.res), self.types)

    def precheck(self, op: Operation) -> None:
        """Unsupported opcodes and data types, reported at the op before any lowering."""
        if isinstance(op, graph.GlobalRefOp) and op.symbol.data in self.symbols:
            return  # a function use (combinator); its users decide
        if isinstance(op, graph.ReturnOp | graph.BranchOp | graph.ConditionalOp | gm.ApplyOp):
            pass
        elif isinstance(op, graph.BranchEnumOp | graph.GlobalRefOp) or type(op) in MEMORY_OPS:
            pass
        elif isinstance(op, gm.TrapOp):
            return
        elif not isinstance(op, graph.LiteralOp) and (rule_for(op) is None or not op.results):
            raise error_at(op, UNSUPPORTED + _terminator_opcode(getattr(op, "OPCODE", op.name)))
        for r in op.results:
            check_type(op, r.type, self.types)

    def dispatch(self, b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
        if isinstance(op, graph.LiteralOp):
            return lower_literal(b, op, args, self.types, self.boxes.new_box)
        if isinstance(op, gm.ExtractOp | gm.InsertOp) and _has_aggregate(args):
            return lower_aggregate_key_op(b, op, args, self.types)
        rule = rule_for(op)
        assert rule is not None
        return rule(b, op, args)


class LowerGraphToTensorPass(ModulePass):
    """Graph level -> tensor level.

    Input: a verified graph module. Every function definition whose body is a single
    block of supported ops becomes a `tensor.func` (tuple results flattened); each op
    becomes one `tensor.compute` (or a `tensor.constant`, or a compile-time splat/tuple).
    Declarations (extern, adjoint functions, types, vars) have no code and are
    dropped, so the result is purely tensor level. Anything else raises a located
    "not supported by the code generator yet: <opcode>" diagnostic, and so does a
    function of more than `MAX_FUNCTION_INSTRUCTIONS` instructions.
    """

    name = "lower-graph-to-tensor"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "graph", self.name)
        require_static(op, self.name)
        for func in op.body.block.ops:
            if isinstance(func, graph.FuncOp):
                _check_size(func)
        symbols = {f.sym_name.data: f for f in op.body.block.ops if isinstance(f, graph.FuncOp)}
        types = Symbols.of_module(op)
        boxes = Boxes(types, MemoryRules(types))
        lowered = [
            (FunctionLowering(func, symbols, types, boxes).run(), func)
            for func in op.body.block.ops
            if isinstance(func, graph.FuncOp) and not func.is_declaration
        ]
        for func, before in lowered:
            op.body.block.insert_op_before(func, before)
        if boxes.used:
            op.body.block.add_ops(boxes.functions())
        for child in list(op.body.block.ops):
            if not isinstance(child, tensor.FuncOp):
                child.detach()
                child.erase(safe_erase=False)


MAX_FUNCTION_INSTRUCTIONS = 10_000
"""The largest function code generation takes. Compile time grows about linearly with
size, ~5 ms per instruction on the 2-core development machine (xDSL builds every op of
every level in Python, and LLVM optimizes one function as a whole), so this keeps any
compile under a minute; a larger function is a located diagnostic, found before any
lowering work is spent on it."""


def _check_size(func: graph.FuncOp) -> None:
    count = 0
    for _ in func.body.walk():
        count += 1
        if count > MAX_FUNCTION_INSTRUCTIONS:
            raise error_at(
                func,
                f"function @{func.sym_name.data} is too large to compile: more than "
                f"{MAX_FUNCTION_INSTRUCTIONS} instructions (split it into smaller functions)",
            )


def _terminator_opcode(name: str) -> str:
    return {
        "graph.branch": "branch",
        "graph.conditional": "conditional",
        "graph.branch_enum": "branchEnum",
        "graph.branchEnum": "branchEnum",
    }.get(name, name)
