"""Which kernel computes which value: the fusion groups of a function, traced back to
the graph-level instructions whose values they write.

The graph level is optimized first (the passes of the opt level), then every
instruction of the function gets a location object of its own (same file, line and
column: `copy_loc` hands the object on to everything a lowering builds from it). After
lowering to the tensor level and fusing and scheduling there, the location object of a
`tensor.compute` names the instruction it came from. A kernel is a fusion group (the
computes lowered as one loop nest) or a compute outside any group; its checkpoints are
the instructions whose whole value one of its materialized computes writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects.builtin import ArrayAttr, IntAttr, ModuleOp
from xdsl.ir import Operation, SSAValue

from dlc import pipeline
from dlc.diagnostics import DiagnosticError, Location, clone_located, error_at, get_loc, set_loc
from dlc.dialects.graph import FuncOp, LiteralOp, ReturnOp
from dlc.dialects.graph_aggregate import InsertOp
from dlc.dialects.graph_literal import LiteralAttr
from dlc.dialects.graph_types import FunctionType, TensorType, TupleType


@dataclass
class Kernel:
    """One loop nest of the compiled function: its number in program order, the
    fusion group it is (None: a lone compute), its members (the instruction each
    compute came from, its location and its schedule) and the graph instructions
    (`checkpoints`, indices into the entry block) whose values it writes."""

    number: int
    group: int | None
    members: list[tuple[str, str, str]] = field(default_factory=list)
    checkpoints: list[int] = field(default_factory=list)


def entry_function(module: ModuleOp, name: str) -> FuncOp:
    """The defined function `name`, straight-line (one block): the bisector's unit."""
    for op in module.body.block.ops:
        if isinstance(op, FuncOp) and op.sym_name.data == name and op.body.blocks:
            if len(op.body.blocks) != 1:
                raise error_at(
                    op,
                    f"dlc-bisect checks straight-line functions; @{name} has "
                    f"{len(op.body.blocks)} blocks (branches)",
                )
            return op
    raise DiagnosticError(f"no function @{name} is defined")


def optimized(module: ModuleOp, options: pipeline.Options) -> ModuleOp:
    """A copy of graph `module` after the graph-level passes of `options`."""
    steps = [pipeline.Step("graph", p, False) for p in pipeline.level_passes("graph", options)]
    return pipeline.run(clone_located(module), steps)


def instruction_name(op: Operation) -> str:
    """`%h = max` (or `max`), as the instruction reads in DLVM."""
    opcode = op.name.removeprefix("graph.")
    names = [f"%{r.name_hint}" for r in op.results if r.name_hint]
    return f"{', '.join(names)} = {opcode}" if names else opcode


def where(op: Operation) -> str:
    """`FILE:LINE:COL` of `op`, or "" for an op without a location (ONNX)."""
    loc = get_loc(op)
    return "" if loc is None or loc.line <= 0 else f"{loc.filename}:{loc.line}:{loc.column}"


def kernels(graph: ModuleOp, name: str, options: pipeline.Options) -> list[Kernel]:
    """The kernels of function `name` of optimized graph module `graph`, in order."""
    work = clone_located(graph)
    ops = list(entry_function(work, name).body.blocks[0].ops)
    tags: dict[int, int] = {}
    for i, op in enumerate(ops):
        loc = get_loc(op) or Location("", 0, 0)
        tag = Location(loc.filename, loc.line, loc.column, loc.source_line)
        set_loc(op, tag)
        tags[id(tag)] = i
    steps = [pipeline.Step("graph", pipeline.lowering("graph", options), True)]
    steps += [pipeline.Step("tensor", p, False) for p in pipeline.level_passes("tensor", options)]
    pipeline.run(work, steps)
    return _group(work, name, ops, tags)


def _group(
    tensor_level: ModuleOp, name: str, ops: list[Operation], tags: dict[int, int]
) -> list[Kernel]:
    from dlc.dialects.tensor_compute import ComputeOp
    from dlc.dialects.tensor_control import FuncOp as TensorFuncOp

    func = next(
        f
        for f in tensor_level.body.block.ops
        if isinstance(f, TensorFuncOp) and f.sym_name.data == name
    )
    found: list[Kernel] = []
    by_group: dict[int, Kernel] = {}
    for op in func.body.blocks[0].ops:
        index = tags.get(id(get_loc(op)))
        if not isinstance(op, ComputeOp) or index is None:
            continue
        fusion = op.schedule.fusion if op.schedule is not None else None
        group = fusion[0] if fusion is not None else None
        kernel = by_group.get(group) if group is not None else None
        if kernel is None:
            kernel = Kernel(len(found), group)
            found.append(kernel)
            if group is not None:
                by_group[group] = kernel
        schedule = str(op.schedule) if op.schedule is not None else "(no schedule)"
        kernel.members.append((instruction_name(ops[index]), where(ops[index]), schedule))
        internal = fusion is not None and fusion[3]
        if not internal and op.result.type == ops[index].results[0].type:
            for other in found:  # the last kernel writing the whole value holds it
                if index in other.checkpoints:
                    other.checkpoints.remove(index)
            kernel.checkpoints.append(index)
    return found


def with_checkpoints(graph: ModuleOp, name: str, indices: list[int]) -> ModuleOp:
    """A copy of `graph` whose function `name` returns (its result, the values of the
    instructions `indices`...) as one tuple."""
    work = clone_located(graph)
    func = entry_function(work, name)
    block = func.body.blocks[0]
    ops = list(block.ops)
    ret = block.last_op
    assert isinstance(ret, ReturnOp)
    values: list[SSAValue] = [ops[i].results[0] for i in indices]
    if ret.value is not None:
        values.insert(0, ret.value)
    tuple_type = TupleType([v.type for v in values])
    current: SSAValue = _before(ret, LiteralOp(LiteralAttr(("undefined",)), tuple_type)).results[0]
    for k, value in enumerate(values):
        insert = InsertOp.create(
            operands=[value, current],
            result_types=[tuple_type],
            properties={"keys": ArrayAttr([IntAttr(k)])},
        )
        current = _before(ret, insert).results[0]
    ret.operands = [current]
    func.function_type = FunctionType(func.function_type.args, tuple_type)
    return work


def _before(anchor: Operation, op: Operation) -> Operation:
    block = anchor.parent_block()
    assert block is not None
    block.insert_op_before(op, anchor)
    return op


def checkpoint_candidates(graph: ModuleOp, name: str) -> list[int]:
    """Indices of the entry block's instructions with one tensor result (not literals)."""
    ops = list(entry_function(graph, name).body.blocks[0].ops)
    return [
        i
        for i, op in enumerate(ops)
        if not isinstance(op, LiteralOp | ReturnOp)
        and len(op.results) == 1
        and isinstance(op.results[0].type, TensorType)
    ]
