"""lower-tensor-to-loop: `tensor.func` of computes -> `loop.func` of loop nests over buffers.

Each compute becomes the loops its `#schedule.nest` says (`nest.py`; a fusion group
becomes one nest, `group.py`): this pass carries schedules out and decides nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.builder import Builder, InsertPoint
from xdsl.context import Context
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from dlc.analysis.kernel_origins import NestOrigin, is_tuned, record_nest
from dlc.analysis.levels import require_level
from dlc.analysis.tensor_epilogue import epilogue_members
from dlc.diagnostics import copy_loc, error_at, location_prefix
from dlc.dialects import loop, tensor
from dlc.dialects.graph_types import TensorType
from dlc.dialects.tensor_groups import fusion_of, group_members
from dlc.dialects.tensor_memory import MEMORY_OPS
from dlc.lowering.scalar_ops import ScalarBuilder, Unsupported
from dlc.lowering.tensor_to_loop.body import by_value, index, load, memref_type, store
from dlc.lowering.tensor_to_loop.group import emit_group
from dlc.lowering.tensor_to_loop.kernels import KernelTable, prepare_site
from dlc.lowering.tensor_to_loop.memory import BufferFn, MemoryOpLowering

CONSTANT_STORES = 16
"""Constants of at most this many elements are stored element by element (the
stores fold into their uses); larger ones are read-only data: a `loop.const_buffer`
in straight-line functions when they are not a result (nothing writes them there),
else a `loop.const_copy` into their buffer."""


def _as_data(op: tensor.ConstantOp) -> bool:
    """Whether the literal `op` is kept as read-only data (`CONSTANT_STORES`); bool data
    (i1) is stored element by element into its i8 buffer."""
    t = op.result.type
    assert isinstance(t, TensorType)
    return t.num_elements > CONSTANT_STORES and t.dt != "bool"


class FunctionLowering:
    """Lowers one `tensor.func`: assigns buffers, then emits one loop nest per compute."""

    def __init__(self, func: tensor.FuncOp, kernels: KernelTable | None = None):
        self.func, self.kernels = func, kernels
        ftype = func.function_type
        types = [memref_type(t) for t in (*ftype.inputs.data, *ftype.outputs.data)]
        self.result = loop.FuncOp(func.sym_name.data, types)
        copy_loc(func, self.result)
        n_in = len(ftype.inputs.data)
        self.outputs = self.result.args[n_in:]
        self.buffers: dict[SSAValue, SSAValue] = dict(
            zip(func.args, self.result.args[:n_in], strict=True)
        )
        self.allocs: list[SSAValue] = []
        self.b = Builder(InsertPoint.at_end(self.result.body.block))
        self.dests: dict[SSAValue, SSAValue] = {}
        self.done: set[Operation] = set()  # lowered with an earlier op (an epilogue)

    def run(self) -> loop.FuncOp:
        ret = self.func.body.block.last_op
        assert isinstance(ret, tensor.ReturnOp)
        dests, copies = self._assign_outputs(ret)
        self.dests = dests
        for op in self.func.body.block.ops:
            if op in self.done:
                continue
            if isinstance(op, tensor.ConstantOp):
                self._lower_constant(op)
            elif isinstance(op, tensor.ComputeOp):
                self._located_compute(op)
            elif isinstance(op, tensor.ScanOp):
                self._scan(op, self._buffer(op.result, dests))
            elif isinstance(op, tensor.CallOp):
                self._call(op, [self._buffer(r, dests) for r in op.res])
            elif isinstance(op, tensor.TrapOp):
                self._trap(op)
            elif type(op) in MEMORY_OPS:
                self._memory(op, lambda v: self._buffer(v, dests))
            elif not isinstance(op, tensor.ReturnOp):
                raise error_at(op, f"not supported by the code generator yet: {op.name}")
        for value, out in copies:
            self.b.insert(loop.CopyOp(self.buffers[value], out))
        for buffer in reversed(self.allocs):
            self.b.insert(loop.DeallocOp(buffer))
        self.b.insert(loop.ReturnOp())
        for const in [o for o in self.result.body.block.ops if isinstance(o, loop.ConstBufferOp)]:
            if not const.res.uses:  # read only as a packed constant (`pack.py`)
                const.detach()
                const.erase()
        return self.result

    def _assign_outputs(
        self, ret: tensor.ReturnOp
    ) -> tuple[dict[SSAValue, SSAValue], list[tuple[SSAValue, SSAValue]]]:
        """Results computed here write straight into their (first) output buffer;
        arguments and values returned twice are copied."""
        dests: dict[SSAValue, SSAValue] = {}
        copies: list[tuple[SSAValue, SSAValue]] = []
        for value, out in zip(ret.values, self.outputs, strict=True):
            if value in self.buffers or value in dests:
                copies.append((value, out))
            else:
                dests[value] = out
        return dests, copies

    def _lower_constant(self, op: tensor.ConstantOp) -> None:
        """Read-only data, or stored into its buffer (`CONSTANT_STORES`)."""
        if op.result not in self.dests and _as_data(op):
            self.buffers[op.result] = self.b.insert(
                loop.ConstBufferOp(op.value, memref_type(op.result.type))
            ).res
            return
        self._constant(op, self._buffer(op.result, self.dests))

    def _buffer(self, value: SSAValue, dests: dict[SSAValue, SSAValue]) -> SSAValue:
        buffer = dests.get(value)
        if buffer is None:
            buffer = self.b.insert(loop.AllocOp(memref_type(value.type))).res
            self.allocs.append(buffer)
        self.buffers[value] = buffer
        return buffer

    def _memory(self, op: Operation, new_buffer: BufferFn) -> None:
        """Memory ops (tensor_memory.py) via tensor_to_loop_memory.py, located."""
        before = len(self.b.insertion_point.block.ops)
        MemoryOpLowering(self.b, self.buffers, new_buffer).lower(op)
        for new in list(self.b.insertion_point.block.ops)[before:]:
            copy_loc(op, new)

    def _trap(self, op: tensor.TrapOp) -> None:
        copy_loc(op, self.b.insert(loop.TrapOp(f"{location_prefix(op)}trap")))

    def _call(self, op: tensor.CallOp, outputs: Sequence[SSAValue]) -> None:
        """`loop.call` with caller-allocated outputs; extern calls pass scalars by value
        and, unless they take and return scalars only, tensors and results by pointer."""
        inputs = [self.buffers[a] for a in op.args]
        if op.extern is None:
            call = self.b.insert(loop.CallOp(op.callee.data, [*inputs, *outputs]))
            copy_loc(op, call)
            return
        loaded = [
            buf if a.type.rank else load(self.b, buf, [], a.type.dt)  # type: ignore[attr-defined]
            for buf, a in zip(inputs, op.args)
        ]
        if not by_value(op):  # results written through pointers, nothing returned
            copy_loc(op, self.b.insert(loop.ExternCallOp(op.callee.data, [*loaded, *outputs], [])))
            return
        types = [tensor.scalar_type(r.type.dt) for r in op.res]
        extern = self.b.insert(loop.ExternCallOp(op.callee.data, loaded, types))
        copy_loc(op, extern)
        for value, buf, r in zip(extern.res, outputs, op.res, strict=True):
            store(self.b, value, buf, [], r.type.dt)

    def _constant(self, op: tensor.ConstantOp, buffer: SSAValue) -> None:
        """A few elements: one store each; more: one `loop.const_copy` of the data."""
        t = op.result.type
        assert isinstance(t, TensorType)
        if _as_data(op):
            self.b.insert(loop.ConstCopyOp(op.value, buffer))
            return
        scalars = ScalarBuilder(self.b)
        data_dt = "i16" if t.dt == "bf16" else t.dt  # bf16 data are its bits already
        for flat, value in enumerate(op.values):
            indices, rest = [], flat
            for n in reversed(t.dims):
                indices.append(index(self.b, rest % n))
                rest //= n
            store(self.b, scalars.const(value, data_dt), buffer, indices[::-1], t.dt)

    def _located_compute(self, op: tensor.ComputeOp) -> None:
        """`_compute`, and the schedules its new top-level ops ran with, for the profiler
        (`dlc.analysis.kernel_origins`)."""
        block = self.b.insertion_point.block
        last = block.last_op
        if self.kernels is None or not self.kernels.lower(self, op):
            self._compute(op, lambda v: self._buffer(v, self.dests))
        members = group_members(op) if fusion_of(op) is not None else []
        members = members or [op, *epilogue_members(op)]
        schedules = dict.fromkeys(str(m.schedule) for m in members if m.schedule is not None)
        origin = NestOrigin(tuple(schedules), any(is_tuned(m) for m in members))
        new = last.next_op if last is not None else block.first_op
        while new is not None:
            record_nest(new, origin)
            new = new.next_op

    def _compute(self, op: tensor.ComputeOp, new_buffer: Callable[[SSAValue], SSAValue]) -> None:
        """A compute's nest, or its whole fusion group's, as its schedule says."""
        if fusion_of(op) is not None:
            emit_group(self.b, op, self.buffers, new_buffer)
            return
        builder, _ = prepare_site(self, op, new_buffer)  # literal members lowered first
        builder.emit_loops(self.b)

    def _scratch(self, mtype: MemRefType) -> SSAValue:
        """A buffer of the nest builder's own (a packed operand), freed with the others."""
        buffer = self.b.insert(loop.AllocOp(mtype)).res
        self.allocs.append(buffer)
        return buffer

    def _scan(self, op: tensor.ScanOp, buffer: SSAValue) -> None:
        """`for other indices (C order): acc = x[..0..]; out[..0..] = acc;
        for k in 1..n: acc = comb(acc, x[..k..]); out[..k..] = acc`."""
        t = op.result.type
        assert isinstance(t, TensorType)
        if t.num_elements == 0:
            return
        dim, source = op.dim.data, self.buffers[op.input]
        b, blocks, ivs = self.b, [], []
        zero, one = index(b, 0), index(b, 1)
        for d, n in enumerate(t.dims):
            if d == dim:
                continue
            nest = b.insert(loop.ForOp(zero, index(b, n), one))
            copy_loc(op, nest)
            ivs.append(nest.iv)
            blocks.append(nest.body.block)
            b = Builder(InsertPoint.at_end(nest.body.block))

        def at(k: SSAValue) -> list[SSAValue]:
            return [*ivs[:dim], k, *ivs[dim:]]

        first = load(b, source, at(zero), t.dt)
        store(b, first, buffer, at(zero), t.dt)
        scan = b.insert(loop.ForOp(one, index(b, t.dims[dim]), one, [first]))
        copy_loc(op, scan)
        inner = Builder(InsertPoint.at_end(scan.body.block))
        element = load(inner, source, at(scan.iv), t.dt)
        try:
            value = ScalarBuilder(inner).binary(
                op.combinator.data, t.dt, scan.iter_args[0], element
            )
        except Unsupported as err:
            raise error_at(op, f"not supported by the code generator yet: scan by {err}") from None
        copy_loc(op, value.owner)  # type: ignore[arg-type]
        store(inner, value, buffer, at(scan.iv), t.dt)
        inner.insert(loop.YieldOp(value))
        for block in blocks:
            block.add_op(loop.YieldOp())


class CFGLowering(FunctionLowering):
    """Lowers a multi-block `tensor.func` to a multi-block `loop.func`.

    Every tensor value (op results and block arguments) gets its own buffer, allocated
    in the entry block and freed before each `loop.return`: a block executed again (a
    loop) overwrites its buffers. A branch copies its arguments into the destination's
    block-argument buffers (through temporaries when one argument buffer is the source
    of another: a parallel copy) and jumps; a return copies into the output buffers.
    """

    def run(self) -> loop.FuncOp:
        entry = self.result.body.blocks[0]
        self.returns: list[loop.ReturnOp] = []
        blocks = list(self.func.body.blocks)
        self.blocks = {}
        for block in blocks:
            self.blocks[block] = Block()
            self.result.body.add_block(self.blocks[block])
        jump = loop.BrOp(self.blocks[blocks[0]])
        entry.add_op(jump)
        self.prologue = Builder(InsertPoint.before(jump))  # entry: allocations only
        for block in blocks[1:]:
            for arg in block.args:
                self.buffers[arg] = self._buffer(arg, {})
        for block in blocks:
            self.b = Builder(InsertPoint.at_end(self.blocks[block]))
            for op in block.ops:
                self._op(op)
        for ret in self.returns:
            for buffer in reversed(self.allocs):
                Builder(InsertPoint.before(ret)).insert(loop.DeallocOp(buffer))
        return self.result

    def _buffer(self, value: SSAValue, dests: dict[SSAValue, SSAValue]) -> SSAValue:
        buffer = self.prologue.insert(loop.AllocOp(memref_type(value.type))).res
        self.allocs.append(buffer)
        self.buffers[value] = buffer
        return buffer

    def _scratch(self, mtype: MemRefType) -> SSAValue:
        buffer = self.prologue.insert(loop.AllocOp(mtype)).res
        self.allocs.append(buffer)
        return buffer

    def _lower_constant(self, op: tensor.ConstantOp) -> None:
        self._constant(op, self._buffer(op.result, {}))

    def _op(self, op: Operation) -> None:
        if op in self.done:
            return
        if isinstance(op, tensor.ConstantOp):
            self._lower_constant(op)
        elif isinstance(op, tensor.ComputeOp):
            self._compute(op, lambda v: self._buffer(v, {}))
        elif isinstance(op, tensor.ScanOp):
            self._scan(op, self._buffer(op.result, {}))
        elif isinstance(op, tensor.CallOp):
            self._call(op, [self._buffer(r, {}) for r in op.res])
        elif isinstance(op, tensor.TrapOp):
            self._trap(op)
        elif type(op) in MEMORY_OPS:
            self._memory(op, lambda v: self._buffer(v, {}))
        elif isinstance(op, tensor.ReturnOp):
            for value, out in zip(op.values, self.outputs, strict=True):
                self.b.insert(loop.CopyOp(self.buffers[value], out))
            self.returns.append(self.b.insert(loop.ReturnOp()))
        elif isinstance(op, tensor.BrOp):
            self._edge(self.b, op.args, op.dest)
            self.b.insert(loop.BrOp(self.blocks[op.dest]))
        elif isinstance(op, tensor.CondBrOp):
            cond = load(self.b, self.buffers[op.cond], [], "bool")
            then_block = self._edge_block(op.then_args, op.then_block)
            else_block = self._edge_block(op.else_args, op.else_block)
            self.b.insert(loop.CondBrOp(cond, then_block, else_block))
        else:
            raise error_at(op, f"not supported by the code generator yet: {op.name}")

    def _edge_block(self, args: Sequence[SSAValue], dest: Block) -> Block:
        """`dest` itself, or a new block doing the argument copies then jumping there."""
        if all(self.buffers[a] is self.buffers[d] for a, d in zip(args, dest.args, strict=True)):
            return self.blocks[dest]
        block = Block()
        self.result.body.add_block(block)
        b = Builder(InsertPoint.at_end(block))
        self._edge(b, args, dest)
        b.insert(loop.BrOp(self.blocks[dest]))
        return block

    def _edge(self, b: Builder, args: Sequence[SSAValue], dest: Block) -> None:
        """Parallel copy of the branch arguments into the block-argument buffers."""
        targets = [self.buffers[d] for d in dest.args]
        sources = [self.buffers[a] for a in args]
        overwritten = set(targets)
        staged: list[SSAValue] = []
        for src, dst in zip(sources, targets, strict=True):
            if src is not dst and src in overwritten:
                temp = self.prologue.insert(loop.AllocOp(src.type)).res  # type: ignore[arg-type]
                self.allocs.append(temp)
                b.insert(loop.CopyOp(src, temp))
                src = temp
            staged.append(src)
        for src, dst in zip(staged, targets, strict=True):
            if src is not dst:
                b.insert(loop.CopyOp(src, dst))


@dataclass(frozen=True)
class LowerTensorToLoopPass(ModulePass):
    """Tensor level -> loop level.

    Input: a module of `tensor.func`s (and leftover graph declarations, which are
    dropped). Each function becomes a `loop.func` taking input buffers then output
    buffers (tuple results flattened). Each `tensor.compute` becomes the loop nest its
    schedule says (none: output loops, then reduction loops carrying an accumulator; a
    fusion group: one nest for all members) storing into a fresh `loop.alloc` buffer, or
    into the output buffer when the value is returned; an invalid or unsupported
    schedule is a located diagnostic; returned arguments and values returned twice are
    `loop.copy`d. Intermediate buffers are freed before `loop.return`. Bool tensors are
    i8 buffers: loads truncate to i1, stores zero-extend. With `kernels`, reductions
    that occur more than once are lowered once, into a `loop.func` each place calls
    (`kernels.py`).
    """

    name = "lower-tensor-to-loop"
    kernels: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "tensor", self.name)
        table = KernelTable.of(op) if self.kernels else None
        for child in list(op.body.block.ops):
            if not isinstance(child, tensor.FuncOp):
                continue
            multi = len(child.body.blocks) > 1
            lowered = CFGLowering(child).run() if multi else FunctionLowering(child, table).run()
            op.body.block.insert_op_before(lowered, child)
            child.detach()
            child.erase(safe_erase=False)
        op.body.block.add_ops(table.made if table is not None else [])
