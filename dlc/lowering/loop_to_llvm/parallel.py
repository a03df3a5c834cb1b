"""Outlining: parallel loops for libgomp's `GOMP_parallel`, top-level nests of large functions.

The outermost `parallel` loop of a nest becomes an internal `@f$omp<k>` run by
`GOMP_parallel`, its iterations claimed in dynamic chunks (results do not depend on the
thread count); functions above `split_ops` loop-level ops have runs of top-level nests
outlined into `noinline` `@f$nest<k>` (runs alike share one). Details:
docs/design/fusion-and-memory.md.
"""

from __future__ import annotations

from collections.abc import Hashable

from xdsl.dialects import arith, llvm
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerAttr,
    IntegerType,
    MemRefType,
    UnitAttr,
    i1,
    i8,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from dlc.analysis.walk import walk_ops
from dlc.dialects import abi, loop
from dlc.dialects import loop_memory as lm
from dlc.lowering.loop_to_llvm.chunks import (
    chunk_boundary,
    chunk_key,
    free_values,
    is_buffer,
    rematerialized,
)
from dlc.lowering.loop_to_llvm.context import ContextEmitter
from dlc.lowering.loop_to_llvm.profile import KernelTable
from dlc.lowering.loop_to_llvm.scalar import const, icmp
from dlc.lowering.prebuilt import make

PTR = llvm.LLVMPointerType()
VOID = llvm.LLVMVoidType()

CHUNKS_PER_THREAD = 4
"""Dynamic chunks per thread of a parallel loop: enough that a descheduled thread's
share is taken over by the others, few enough that claiming a chunk (an atomic add in
libgomp) costs nothing next to it."""

SPLIT_OPS = 2000
SPLIT_CHUNK = 1500
"""Functions of more loop-level ops than `SPLIT_OPS` have their top-level nests outlined
in runs of about `SPLIT_CHUNK` ops: LLVM's optimizer takes time superlinear in a
function's size (measured: docs/performance.md, "Measurements behind the defaults")."""


def can_outline(op: loop.ForOp) -> bool:
    """A parallel loop the runtime can split across threads (module docstring)."""
    if op.parallel is None or op.iter_inits:
        return False
    unsafe = (loop.CallOp, lm.ScalarCallOp, lm.StackAllocOp, loop.ExternCallOp)
    return not any(isinstance(inner, unsafe) for inner in op.body.walk())


def _float_bits(t: Attribute) -> int:
    assert isinstance(t, Float16Type | Float32Type | Float64Type), t
    return t.bitwidth


class ParallelEmitter(ContextEmitter):
    """The outlining half of the function emitter (module docstring)."""

    values: dict[SSAValue, SSAValue]
    region: Region
    outlined: list[Operation]
    name: str
    arena: SSAValue | None
    chunks: dict[Hashable, str]  # `chunk_key` of an outlined run -> its function
    walks: dict[Operation, list[Operation]]  # `walk_ops` of the top-level ops in runs
    profile: KernelTable | None
    openmp: bool  # FuncEmitter's field: parallel loops outlined for GOMP_parallel

    def child(self, openmp: bool = False, name: str = "") -> ParallelEmitter:
        """A fresh emitter for an outlined function (same module state)."""
        raise NotImplementedError

    def drain(self) -> None:
        raise NotImplementedError

    def lower_op(self, op: Operation) -> None:
        raise NotImplementedError

    def lower_for(self, op: loop.ForOp) -> None:
        raise NotImplementedError

    def lower_marked(self, ops: list[Operation]) -> None:
        raise NotImplementedError

    def run_loop(self, op: loop.ForOp, begin: SSAValue, end: SSAValue) -> None:
        """Emit `op`'s body for iteration numbers [begin, end) (provided)."""
        raise NotImplementedError

    def lower_parallel_for(self, op: loop.ForOp) -> None:
        """Outline the parallel loop `op` into `@f$omp<k>(data)` and run it on threads.
        Constants and buffers planned in the arena are recomputed there from the arena's
        base (passed once) at their offsets, as in `lower_split_chunk`: captured
        pointers are of unknown origin, so a nest writing in place over its input
        (plan-memory's reuse) failed LLVM's run-time overlap check and ran its scalar
        loop; from one base, LLVM sees the same address."""
        free = free_values(op)
        local = [v for v in free if rematerialized(v) and self._can_recompute(v)]
        captured = [v for v in free if v not in local]
        planned = any(isinstance(v.owner, loop.AllocOp) for v in local)
        data = self._pack(captured, 1 if planned else 0)
        if planned:  # the arena's base in the slot after the captured values
            assert self.arena is not None
            slot = self.emit(make(llvm.GEPOp, data, [1 + len(captured)], i64, inbounds=True))
            self.emit(make(llvm.StoreOp, self._to_word(self.arena), slot, alignment=8))
        name = f"{self.name}$omp{len(self.outlined)}"
        worker = self.child(name=name)  # what it outlines in turn is named after it
        entry = Block(arg_types=[PTR])
        worker.start(entry)
        worker.unpack(entry.args[0], captured)
        arena = worker._slot(entry.args[0], 1 + len(captured), PTR) if planned else None
        worker._receive(local, arena)
        lb, ub, step = (worker.get(v) for v in (op.lb, op.ub, op.step))
        worker.run_chunks(op, worker.trip_count(lb, ub, step))
        self.outlined.append(
            llvm.FuncOp(
                name,
                llvm.LLVMFunctionType([PTR]),
                linkage=llvm.LinkageAttr("internal"),
                body=worker.region,
            )
        )
        self.outlined.extend(worker.outlined)
        self._call(name, data)
        self.return_if_status()

    def _receive(self, local: list[SSAValue], arena: SSAValue | None) -> None:
        """In an outlined function: its arena's base (None: `local` holds no arena
        buffer), then the constants and arena buffers of `local`, recomputed at their
        known values and offsets."""
        self.arena = arena
        for value in local:
            assert isinstance(value.owner, Operation), "local values are op results"
            self.lower_op(value.owner)

    def _can_recompute(self, value: SSAValue) -> bool:
        """A constant, or an arena buffer of a function that has its arena."""
        return isinstance(value.owner, arith.ConstantOp) or self.arena is not None

    def lower_split_chunk(self, ops: list[Operation]) -> None:
        """Outline the consecutive top-level ops `ops` (loop nests and the scalar ops
        between them: `split_chunks`) into `@f$nest<k>(data, arena, buffers...)` and
        call it (module docstring); values they define that later ops use come back
        through slots after the captured values.

        What LLVM knows about aliasing stays as in the whole function: the function's
        buffer arguments are `noalias` arguments again, and buffers planned in the
        arena are recomputed from the arena's base (one `noalias` argument) at their
        offsets, not passed as pointers of unknown origin (which cost run-time overlap
        checks and scalar fallback loops)."""
        walked = [inner for op in ops for inner in self.walks.get(op) or walk_ops(op)]
        inside = {id(inner) for inner in walked}
        free, outputs = chunk_boundary(ops, walked, inside)
        local = [v for v in free if rematerialized(v)]
        direct: list[SSAValue] = [v for v in free if isinstance(v, BlockArgument) and is_buffer(v)]
        direct = [v for v in direct if isinstance(v.owner.parent_op(), loop.FuncOp)]
        captured = [v for v in free if v not in local and v not in direct]
        planned = any(isinstance(v.owner, loop.AllocOp) for v in local)
        data = self._pack(captured, len(outputs))
        key = chunk_key(walked, [captured, direct], outputs, self.status.bounds_check)
        if self.profile is not None:  # marks name their kernels: no two runs alike
            key = (key, tuple(self.profile.ids.get(op) for op in ops))
        name = self.chunks.get(key)
        if name is None:
            name = self.chunks[key] = f"{self.name}$nest{len(self.outlined)}"
            self._outline_chunk(name, ops, (captured, direct, local, outputs), planned)
        arena = self.arena if planned else data  # unused without planned buffers
        assert arena is not None, "a planned buffer in a function without arena"
        self.emit(make(llvm.CallOp, name, data, arena, *[self.get(v) for v in direct]))
        self.return_if_status()
        for i, result in enumerate(outputs, start=1 + len(captured)):
            slot = self.emit(make(llvm.GEPOp, data, [i], i64, inbounds=True))
            word = self.emit(make(llvm.LoadOp, slot, i64, alignment=8))
            self.values[result] = self._from_word(word, result.type)

    def _outline_chunk(
        self,
        name: str,
        ops: list[Operation],
        boundary: tuple[list[SSAValue], list[SSAValue], list[SSAValue], list[SSAValue]],
        planned: bool,
    ) -> None:
        """Define `@name`, the outlined function of the run `ops` (`lower_split_chunk`)."""
        captured, direct, local, outputs = boundary
        worker = self.child(self.openmp, name)  # its parallel loops: @f$nest<k>$omp<j>
        entry = Block(arg_types=[PTR] * (2 + len(direct)))
        worker.start(entry)
        worker.unpack(entry.args[0], captured)
        worker.values.update(zip(direct, entry.args[2:], strict=True))
        worker._receive(local, entry.args[1] if planned else None)
        for op in ops:
            worker.lower_marked([op])
        for i, result in enumerate(outputs, start=1 + len(captured)):
            slot = worker.emit(make(llvm.GEPOp, entry.args[0], [i], i64, inbounds=True))
            worker.emit(make(llvm.StoreOp, worker._to_word(worker.get(result)), slot, alignment=8))
        worker.emit(make(llvm.ReturnOp))
        noalias = DictionaryAttr({"llvm.noalias": UnitAttr()})
        self.outlined.append(
            llvm.FuncOp(
                name,
                llvm.LLVMFunctionType([PTR] * (2 + len(direct))),
                linkage=llvm.LinkageAttr("internal"),
                body=worker.region,
                other_props={
                    "no_inline": UnitAttr(),
                    "arg_attrs": ArrayAttr([DictionaryAttr({})] + [noalias] * (1 + len(direct))),
                },
            )
        )
        self.outlined.extend(worker.outlined)

    def _pack(self, values: list[SSAValue], results: int = 0) -> SSAValue:
        """Stack slots holding ctx, then `values`, then room for `results` more (8 bytes
        each)."""
        entry = self.region.blocks.first
        assert entry is not None
        count = make(llvm.ConstantOp, IntegerAttr(1 + len(values) + results, i64), i64)
        data = make(llvm.AllocaOp, count, i64, alignment=16)
        if entry.first_op is None:
            entry.add_ops([count, data])
        else:
            entry.insert_ops_before([count, data], entry.first_op)
        slots = data.results[0]
        self.emit(llvm.StoreOp(self.emit(llvm.PtrToIntOp(self.ctx, i64)), slots, alignment=8))
        for i, value in enumerate(values, start=1):
            slot = self.emit(make(llvm.GEPOp, slots, [i], i64, inbounds=True))
            self.emit(make(llvm.StoreOp, self._to_word(self.get(value)), slot, alignment=8))
        return slots

    def unpack(self, data: SSAValue, values: list[SSAValue]) -> None:
        """Load ctx and `values` from the slots into this emitter's value map."""
        self.ctx = self.emit(llvm.IntToPtrOp(self.emit(llvm.LoadOp(data, i64, alignment=8))))
        for i, value in enumerate(values, start=1):
            t: Attribute = PTR if isinstance(value.type, MemRefType) else value.type
            self.values[value] = self._slot(data, i, t)

    def _slot(self, data: SSAValue, i: int, t: Attribute) -> SSAValue:
        """The value of type `t` in slot `i` of `data`."""
        slot = self.emit(make(llvm.GEPOp, data, [i], i64, inbounds=True))
        return self._from_word(self.emit(make(llvm.LoadOp, slot, i64, alignment=8)), t)

    def _to_word(self, value: SSAValue) -> SSAValue:
        """`value` (a pointer, an integer or a float) as the bits of an i64."""
        t = value.type
        if isinstance(t, llvm.LLVMPointerType):
            return self.emit(make(llvm.PtrToIntOp, value, i64))
        if isinstance(t, IntegerType):
            return value if t.width.data == 64 else self.emit(make(llvm.ZExtOp, value, i64))
        bits = IntegerType(_float_bits(t))
        as_int = self.emit(make(llvm.BitcastOp, value, bits))
        return as_int if bits.width.data == 64 else self.emit(make(llvm.ZExtOp, as_int, i64))

    def _from_word(self, word: SSAValue, t: Attribute) -> SSAValue:
        if isinstance(t, llvm.LLVMPointerType):
            return self.emit(make(llvm.IntToPtrOp, word))
        if isinstance(t, IntegerType):
            return word if t.width.data == 64 else self.emit(make(llvm.TruncOp, word, t))
        bits = IntegerType(_float_bits(t))
        narrow = word if bits.width.data == 64 else self.emit(make(llvm.TruncOp, word, bits))
        return self.emit(make(llvm.BitcastOp, narrow, t))

    def _call(self, name: str, data: SSAValue) -> None:
        """`GOMP_parallel(@name, data, threads, 0)`, or a plain call with one thread."""
        threads = self.emit(make(llvm.TruncOp, self.load_word(abi.CTX_THREADS), i32))
        team, alone, join = Block(), Block(), Block()
        many = icmp(self, "sgt", threads, const(self, 1, i32))
        self.emit(make(llvm.CondBrOp, many, team, [], alone, []))
        self.start(team)
        self.declare("GOMP_parallel", [PTR, PTR, i32, i32], VOID)
        fn = self.emit(make(llvm.AddressOfOp, name, PTR))
        self.emit(make(llvm.CallOp, "GOMP_parallel", fn, data, threads, const(self, 0, i32)))
        self.emit(make(llvm.BrOp, join))
        self.start(alone)
        self.emit(make(llvm.CallOp, name, data))
        self.emit(make(llvm.BrOp, join))
        self.start(join)

    def trip_count(self, lb: SSAValue, ub: SSAValue, step: SSAValue) -> SSAValue:
        """max(0, ceil((ub - lb) / step)) for step > 0."""
        zero, one = const(self, 0, i64), const(self, 1, i64)
        span = self.emit(
            llvm.AddOp(self.emit(llvm.SubOp(ub, lb)), self.emit(llvm.SubOp(step, one)))
        )
        trip = self.emit(make(llvm.SDivOp, span, step))
        return self.emit(make(llvm.SelectOp, icmp(self, "sgt", trip, zero), trip, zero))

    def run_chunks(self, op: loop.ForOp, trip: SSAValue) -> None:
        """Run iteration numbers [0, trip) of `op` in the chunks libgomp's dynamic
        schedule hands this thread (module docstring), then return. Alone (no team)
        the whole range is one chunk."""
        for name, inputs, output in (
            ("omp_get_num_threads", [], i32),
            ("GOMP_loop_dynamic_start", [i64, i64, i64, i64, PTR, PTR], i8),
            ("GOMP_loop_dynamic_next", [PTR, PTR], i8),
            ("GOMP_loop_end_nowait", [], VOID),
        ):
            self.declare(name, inputs, output)
        entry = self.region.blocks.first
        assert entry is not None
        two = make(llvm.ConstantOp, IntegerAttr(2, i64), i64)
        bounds = make(llvm.AllocaOp, two, i64, alignment=16)  # [begin, end) of the chunk
        Rewriter.insert_op([two, bounds], InsertPoint.at_start(entry))
        begin_slot = bounds.results[0]
        end_slot = self.emit(make(llvm.GEPOp, begin_slot, [1], i64, inbounds=True))
        zero, one = const(self, 0, i64), const(self, 1, i64)
        threads = self._omp("omp_get_num_threads")
        alone = icmp(self, "eq", threads, one)
        solo, team, check, body, done = Block(), Block(), Block(arg_types=[i1]), Block(), Block()
        self.emit(make(llvm.CondBrOp, alone, solo, [], team, []))

        self.start(solo)  # the whole range, claimed once
        self.emit(make(llvm.StoreOp, zero, begin_slot, alignment=8))
        self.emit(make(llvm.StoreOp, trip, end_slot, alignment=8))
        self.emit(make(llvm.BrOp, check, icmp(self, "sgt", trip, zero)))

        self.start(team)
        per = self.emit(make(llvm.MulOp, threads, const(self, CHUNKS_PER_THREAD, i64)))
        size = self.emit(
            llvm.SDivOp(self.emit(llvm.AddOp(trip, self.emit(llvm.SubOp(per, one)))), per)
        )
        size = self.emit(make(llvm.SelectOp, icmp(self, "sgt", size, one), size, one))
        got = self.emit(
            llvm.CallOp(
                "GOMP_loop_dynamic_start",
                zero,
                trip,
                one,
                size,
                begin_slot,
                end_slot,
                return_type=i8,
            )
        )
        self.emit(make(llvm.BrOp, check, icmp(self, "ne", got, const(self, 0, i8))))

        self.start(check)
        self.emit(make(llvm.CondBrOp, check.args[0], body, [], done, []))
        self.start(body)
        begin = self.emit(make(llvm.LoadOp, begin_slot, i64, alignment=8))
        end = self.emit(make(llvm.LoadOp, end_slot, i64, alignment=8))
        self.run_loop(op, begin, end)
        more, last = Block(), Block()  # alone: no next chunk; in a team: ask for one
        self.emit(make(llvm.CondBrOp, alone, last, [], more, []))
        self.start(more)
        got = self.emit(llvm.CallOp("GOMP_loop_dynamic_next", begin_slot, end_slot, return_type=i8))
        self.emit(make(llvm.BrOp, check, icmp(self, "ne", got, const(self, 0, i8))))
        self.start(last)
        self.emit(make(llvm.BrOp, check, const(self, 0, i1)))

        self.start(done)
        finish, leave = Block(), Block()
        self.emit(make(llvm.CondBrOp, alone, leave, [], finish, []))
        self.start(finish)
        self.emit(make(llvm.CallOp, "GOMP_loop_end_nowait", return_type=None))
        self.emit(make(llvm.BrOp, leave))
        self.start(leave)
        self.emit(make(llvm.ReturnOp))

    def _omp(self, name: str) -> SSAValue:
        return self.emit(llvm.SExtOp(self.emit(llvm.CallOp(name, return_type=i32)), i64))
