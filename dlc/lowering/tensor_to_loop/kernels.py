"""Kernels at the tensor level: a reduction that occurs more than once is lowered once.

Whole models repeat their layers: ResNet-50's 53 convolutions have about 23 distinct
shapes, a BERT model is one layer twelve times. With `lower-tensor-to-loop{kernels=true}`
(on in the pipeline unless bounds are checked or kernels profiled), every `tensor.compute`
with a combinator (a product, a convolution, a reduction; with its epilogue members),
and every fusion group with one, is keyed by its content up to renaming
(`compute_key`: the ops of the computes with their bodies, types, properties and
attributes, the schedule among them but not a group's id; the values they read from
outside numbered by first use, with whether each is a literal, and a splat literal's
value; which results are read elsewhere). A key found at two or more places in the
module's single-block functions becomes one `loop.func @<first caller>.kernel<k>`: the nest builder (`nest.py`) emits
the loops once, into it, and every place becomes a `loop.call` of it with its own
buffers. What differs between places stays in the caller: the buffers of the results
(and of epilogue members read elsewhere), the packed operand (scratch, or the packed
data of a literal), the buffers read. A splat literal read by the nest is recomputed
in the kernel (LLVM folds its loads). Kernels carry `dlc.kernel` and become internal
`noinline` functions in `lower-loop-to-llvm`.

The kernel runs the same loop nest on the same buffers, so results are bit-identical
with and without kernels. Elementwise computes stay in place: they are cheap to lower,
and plan-memory may give their results their input's bytes (a call's buffers are never
shared). Run-time messages of a kernel's code name the first place's location, so the
pipeline turns kernels off when bounds are checked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Protocol

from xdsl.builder import Builder, InsertPoint
from xdsl.dialects.builtin import MemRefType, ModuleOp, UnitAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue

from dlc.analysis.tensor_epilogue import epilogue_members
from dlc.diagnostics import DiagnosticError, copy_loc
from dlc.dialects import loop, tensor
from dlc.dialects.schedule import ScheduleAttr
from dlc.dialects.tensor_groups import fusion_of, group_members
from dlc.lowering.tensor_to_loop.body import index
from dlc.lowering.tensor_to_loop.epilogue import EpilogueMember, read_elsewhere
from dlc.lowering.tensor_to_loop.group import emit_group_loops, group_buffers
from dlc.lowering.tensor_to_loop.nest import NestBuilder

KERNEL = "dlc.kernel"
"""Unit attribute of a `loop.func` made by `KernelTable`."""

MIN_SITES = 2
"""A compute becomes a kernel when its key occurs at this many places."""


class FunctionLowering(Protocol):
    """What kernels use of `lower_tensor_to_loop.FunctionLowering`."""

    func: tensor.FuncOp
    b: Builder
    buffers: dict[SSAValue, SSAValue]
    dests: dict[SSAValue, SSAValue]
    done: set[Operation]

    def _buffer(self, value: SSAValue, dests: dict[SSAValue, SSAValue]) -> SSAValue: ...
    def _scratch(self, mtype: MemRefType) -> SSAValue: ...
    def _lower_constant(self, op: tensor.ConstantOp) -> None: ...


@dataclass
class _Kernel:
    name: str
    reads: list[int]  # the external values the nest reads, by first-use number


@dataclass
class KernelTable:
    """The kernels of one module: keys, how often each occurs, the functions made."""

    keys: dict[tensor.ComputeOp, tuple[Hashable, list[SSAValue]]] = field(default_factory=dict)
    counts: Counter[Hashable] = field(default_factory=Counter)
    kernels: dict[Hashable, _Kernel] = field(default_factory=dict)
    made: list[loop.FuncOp] = field(default_factory=list)
    taken: set[str] = field(default_factory=set)
    sites: int = 0  # computes lowered as a call of a kernel

    @classmethod
    def of(cls, module: ModuleOp) -> KernelTable:
        """Keys of every candidate compute of `module`'s single-block functions."""
        table = cls()
        for func in module.body.block.ops:
            if not isinstance(func, tensor.FuncOp):
                continue
            table.taken.add(func.sym_name.data)
            if len(func.body.blocks) != 1:
                continue
            for op in func.body.block.ops:
                keyed = _candidate_key(op)
                if keyed is not None:
                    table.keys[op] = keyed
                    table.counts[keyed[0]] += 1
        return table

    def lower(self, fl: FunctionLowering, op: tensor.ComputeOp) -> bool:
        """Lower `op` (with its epilogue members, or its fusion group) as a call of its
        kernel, made when first needed; False when `op` is no kernel's."""
        keyed = self.keys.get(op)
        if keyed is None or self.counts[keyed[0]] < MIN_SITES:
            return False
        key, outside = keyed
        new_buffer = lambda v: fl._buffer(v, fl.dests)  # noqa: E731
        if fusion_of(op) is None:
            builder, own = prepare_site(fl, op, new_buffer)
            results = {m.op.result: m.buffer for m in builder.epilogue if m.buffer is not None}
            results[op.result] = own[0]
            emit: Emit = lambda kb, reads, mapped: _emit_nest(builder, kb, reads, mapped)  # noqa: E731
        else:
            members = group_members(op)
            results = group_buffers(members, new_buffer)
            own = list(results.values())
            emit = lambda kb, reads, mapped: emit_group_loops(  # noqa: E731
                kb, members, {v: mapped[b] for v, b in results.items()}, reads
            )
        kernel = self.kernels.get(key)
        if kernel is None:
            kernel = self.kernels[key] = self._make(fl, emit, own, outside, results)
        args = [*own, *(fl.buffers[outside[i]] for i in kernel.reads)]
        copy_loc(op, fl.b.insert(loop.CallOp(kernel.name, args)))
        self.sites += 1
        return True

    def _make(
        self,
        fl: FunctionLowering,
        emit: Emit,
        own: list[SSAValue],
        outside: list[SSAValue],
        results: dict[SSAValue, SSAValue],
    ) -> _Kernel:
        """A kernel whose loops `emit` makes, taking `own` (the buffers of `results`'
        keys, and the packed operand's) then the buffers they read."""
        k = 0
        while f"{fl.func.sym_name.data}.kernel{k}" in self.taken:
            k += 1
        name = f"{fl.func.sym_name.data}.kernel{k}"
        self.taken.add(name)
        func = loop.FuncOp(name, [v.type for v in own])  # type: ignore[misc]
        func.attributes[KERNEL] = UnitAttr()
        copy_loc(fl.func, func)
        body = func.body.block
        kb = Builder(InsertPoint.at_end(body))
        kernel = _Kernel(name, [])
        mapped = dict(zip(own, body.args, strict=True))
        reads = _Reads(fl.buffers, outside, body, kernel.reads, kb)
        reads.update((value, mapped[buffer]) for value, buffer in results.items())
        emit(kb, reads, mapped)
        kb.insert(loop.ReturnOp())
        func.function_type = type(func.function_type).from_lists([a.type for a in body.args], [])
        self.made.append(func)
        return kernel


Emit = Callable[[Builder, dict, dict], None]
"""Emits a kernel's loops at a builder, given its reads (`_Reads`) and the kernel
arguments of the place's own buffers."""


def _emit_nest(builder: NestBuilder, kb: Builder, reads: dict, mapped: dict) -> None:
    """`builder`'s loops at `kb`, on the kernel's arguments instead of the caller's
    buffers (`prepare_site` made the rest in the caller)."""
    builder.buffer = mapped[builder.buffer]
    builder.epilogue = [
        EpilogueMember(m.op, None if m.buffer is None else mapped[m.buffer])
        for m in builder.epilogue
    ]
    if builder.pack is not None:
        builder.pack.buffer = mapped[builder.pack.buffer]
        if builder.pack.constant is not None:
            builder.pack.k_base = index(kb, 0)
    builder.buffers = reads
    builder.emit_loops(kb)


class _Reads(dict):
    """The nest builder's buffers in a kernel: an external value's caller buffer
    becomes a new argument of the kernel at its first read (a splat constant is
    recomputed in the kernel instead), noted in `reads` by its first-use number."""

    def __init__(self, caller: dict, outside: list, body: Block, reads: list, kb: Builder):
        super().__init__()
        self.caller, self.body, self.reads, self.kb = caller, body, reads, kb
        self.numbers = {v: i for i, v in enumerate(outside)}

    def __missing__(self, value: SSAValue) -> SSAValue:
        buffer = self.caller[value]
        owner = buffer.owner
        if isinstance(owner, loop.ConstBufferOp) and _splat(value):
            local: SSAValue = self.kb.insert(owner.clone()).res
        else:
            local = self.body.insert_arg(buffer.type, len(self.body.args))
            self.reads.append(self.numbers[value])
        self[value] = local
        return local


def prepare_site(
    fl: FunctionLowering, op: tensor.ComputeOp, new_buffer: Callable[[SSAValue], SSAValue]
) -> tuple[NestBuilder, list[SSAValue]]:
    """All but the loops of `op`'s nest, at `fl`'s insertion point: its literal epilogue
    members lowered, its result buffers assigned (`new_buffer`), its packed operand made;
    the nest builder and the buffers of this place (results, epilogue members read
    elsewhere, packed operand)."""
    members = epilogue_members(op)
    after: Operation = op
    while members and after is not members[-1]:  # the members and literals among them
        following = after.next_op
        assert following is not None, "the epilogue members follow in the block"
        after = following
        fl.done.add(after)
        if isinstance(after, tensor.ConstantOp):
            fl._lower_constant(after)
    buffer = new_buffer(op.result)
    epilogue = [
        EpilogueMember(m, new_buffer(m.result) if read_elsewhere(m.result, members) else None)
        for m in members
    ]
    keep = not members or read_elsewhere(op.result, members)
    builder = NestBuilder(
        op, buffer, fl.buffers, scratch=fl._scratch, epilogue=epilogue, keep_result=keep
    )
    builder._pack_buffer(fl.b)
    own = [buffer, *(m.buffer for m in epilogue if m.buffer is not None)]
    if builder.pack is not None and builder.pack.buffer is not None:
        own.append(builder.pack.buffer)
    return builder, own


def _candidate_key(op: Operation) -> tuple[Hashable, list[SSAValue]] | None:
    """`compute_key` of a reduction (with its epilogue members), or of the first member
    of a fusion group with a reduction; else None."""
    if not isinstance(op, tensor.ComputeOp):
        return None
    if fusion_of(op) is not None:
        members = group_members(op)
        if not any(m.combinator is not None for m in members):
            return None
        return compute_key(op, members[1:])
    if op.combinator is None:
        return None
    try:
        members = epilogue_members(op)
    except DiagnosticError:  # reported where the compute is lowered
        return None
    return compute_key(op, members)


def _splat(value: SSAValue) -> bytes | None:
    """The bits of one element of a literal whose elements all have the same, or None."""
    owner = value.owner
    if not isinstance(owner, tensor.ConstantOp) or not owner.is_splat():
        return None
    return owner.value.data.data[: owner.value.get_element_type().compile_time_size]


def compute_key(
    op: tensor.ComputeOp, members: list[tensor.ComputeOp]
) -> tuple[Hashable, list[SSAValue]]:
    """The content of `op` and its epilogue `members` up to renaming (module
    docstring), and the values they read from outside, by first use."""
    tokens: dict[SSAValue, Hashable] = {}
    outside: list[SSAValue] = []
    parts: list[Hashable] = [tuple(read_elsewhere(c.result, members) for c in (op, *members))]
    ops: list[Operation] = [op]
    while members and ops[-1] is not members[-1]:
        after = ops[-1].next_op
        assert after is not None, "the epilogue members follow in the block"
        ops.append(after)
    for inner in (w for top in ops if isinstance(top, tensor.ComputeOp) for w in top.walk()):
        for value in inner.operands:
            if value not in tokens:
                owner = value.owner
                literal = isinstance(owner, tensor.ConstantOp)
                tokens[value] = ("in", len(outside), value.type, literal, _splat(value))
                outside.append(value)
        for region in inner.regions:
            for block in region.blocks:
                for arg in block.args:
                    tokens[arg] = (len(tokens), arg.type)
        for result in inner.results:
            tokens[result] = len(tokens)
        parts.append(
            (
                inner.name,
                tuple(tokens[v] for v in inner.operands),
                tuple(r.type for r in inner.results),
                tuple(sorted((k, _ungrouped(v)) for k, v in inner.properties.items())),
                tuple(sorted(inner.attributes.items())),
                tuple(len(region.blocks) for region in inner.regions),
            )
        )
    return tuple(parts), outside


def _ungrouped(value: Attribute) -> Attribute:
    """A schedule without its fusion group's id (alike groups differ only there)."""
    if not isinstance(value, ScheduleAttr) or value.fusion is None:
        return value
    _, at, feeds, internal = value.fusion
    return value.with_group((0, at, feeds, internal))
