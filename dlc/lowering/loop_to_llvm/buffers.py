"""The buffer half of the function emitter (`lower_loop_to_llvm.FuncEmitter`): element
addresses of `memref` buffers (row-major GEP), bounds checks, whole-vector loads,
stores and broadcasts, and buffer allocation (arena slots, `aligned_alloc`, `free`,
copies) and calls."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    DenseArrayBase,
    IntAttr,
    IntegerAttr,
    MemRefType,
    VectorType,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from dlc.diagnostics import error_at, location_prefix
from dlc.dialects import abi, llvm_lanes, loop
from dlc.lowering import prebuilt
from dlc.lowering.loop_to_llvm.context import ContextEmitter, arena_element
from dlc.lowering.loop_to_llvm.scalar import const, icmp
from dlc.lowering.prebuilt import make

PTR = llvm.LLVMPointerType()
OFFSET = loop.ARENA_OFFSET  # set by plan-memory on arena-placed allocs
CONST_PREFIX = "__dlc_const_"  # read-only data of `loop.const_copy`


def element_bytes(mtype: MemRefType, op: Operation) -> int:
    """Byte size of a memref element; other element types are rejected."""
    size = loop.element_bytes(mtype.element_type)
    if size is None:
        raise error_at(
            op, f"not supported by the code generator yet: {mtype.element_type} data type"
        )
    return size


def buffer_type(buffer: SSAValue) -> MemRefType:
    """The type of a buffer operand: a `memref` (the loop dialect's verifiers hold it)."""
    mtype = buffer.type
    assert isinstance(mtype, MemRefType), mtype
    return mtype


def element_count(mtype: MemRefType) -> int:
    count = 1
    for dim in mtype.get_shape():
        count *= dim
    return count


class BufferEmitter(ContextEmitter):
    """Buffer accesses and allocation (module docstring)."""

    values: dict[SSAValue, SSAValue]
    arena: SSAValue | None

    def address(
        self, op: Operation, buffer: SSAValue, indices: Sequence[SSAValue], lanes: int = 1
    ) -> tuple[SSAValue, int]:
        """Element pointer `&buffer[indices]` (row-major GEP) and its alignment; `lanes`
        elements from there along the last dimension are accessed (vectors)."""
        mtype = buffer_type(buffer)
        align = element_bytes(mtype, op)
        base = self.get(buffer)
        if not indices:
            return base, align
        shape = mtype.get_shape()
        linear = self.get(indices[0])
        for dim, index in zip(shape[1:], indices[1:], strict=True):
            scaled = self.emit(prebuilt.mul(linear, const(self, dim, i64)))
            linear = self.emit(prebuilt.add(scaled, self.get(index)))
        if self.status.bounds_check:
            linear = self.checked(op, linear, indices, shape, lanes)
        return self.emit(prebuilt.element(base, linear, mtype.element_type)), align

    def lower_vector(self, op: Operation) -> None:
        """Whole-register loads, stores and broadcasts (dlc/dialects/loop_vector.py)."""
        match op:
            case loop.VLoadOp():
                lanes = op.res.type.get_shape()[0]
                ptr, align = self.address(op, op.buffer, op.indices, lanes)
                self.values[op.res] = self.emit(prebuilt.load(ptr, op.res.type, align))
            case loop.VStoreOp():
                vtype = op.value.type
                assert isinstance(vtype, VectorType), vtype
                lanes = vtype.get_shape()[0]
                ptr, align = self.address(op, op.buffer, op.indices, lanes)
                self.emit(prebuilt.store(self.get(op.value), ptr, align))
            case loop.BroadcastOp():
                vtype = op.res.type
                lanes = vtype.get_shape()[0]
                first = self.emit(
                    make(
                        llvm.InsertElementOp,
                        self.emit(make(llvm.UndefOp, vtype)),
                        self.get(op.source),
                        const(self, 0, i32),
                    )
                )
                mask = DenseArrayBase.from_list(i32, [0] * lanes)
                self.values[op.res] = self.emit(
                    make(llvm.ShuffleVectorOp, first, first, mask, vtype)
                )
            case loop.ShuffleOp():
                lhs, rhs = self.get(op.lhs), self.get(op.rhs)
                shuffle = make(llvm.ShuffleVectorOp, lhs, rhs, op.mask, op.res.type)
                self.values[op.res] = self.emit(shuffle)
            case loop.VCmpfOp():
                self.values[op.res] = self.lane_compare(op)
            case loop.VSelectOp():
                cond, lhs, rhs = (self.get(v) for v in op.operands)
                self.values[op.res] = self.emit(make(llvm_lanes.SelectOp, cond, lhs, rhs))

    def lane_compare(self, op: loop.VCmpfOp) -> SSAValue:
        """`fcmp` on whole vectors (a `<W x i1>`: `dlc.dialects.llvm_lanes`)."""
        predicate = op.predicate.value.data
        if predicate in (0, 15):  # false / true
            return const(self, int(predicate == 15), op.res.type)
        lhs, rhs = self.get(op.lhs), self.get(op.rhs)
        return self.emit(make(llvm_lanes.FCmpOp, lhs, rhs, IntegerAttr(predicate, i64)))

    def constant_data(self, value: Attribute, mtype: MemRefType) -> SSAValue:
        """A pointer to `value` as an internal constant global of the module; through an
        integer, since llvmlite types a global's address `[N x T]*` and intrinsics and
        GEPs here take plain pointers."""
        name = f"{CONST_PREFIX}{len(self.status.constants)}"
        array = llvm.LLVMArrayType(IntAttr(element_count(mtype)), mtype.element_type)
        self.status.constants.append((name, array, value))
        address = self.emit(
            make(llvm.PtrToIntOp, self.emit(make(llvm.AddressOfOp, name, PTR)), i64)
        )
        return self.emit(make(llvm.IntToPtrOp, address))

    def lower_memory(self, op: Operation) -> None:
        match op:
            case loop.AllocOp() if OFFSET in op.attributes:  # planned by plan-memory
                assert self.arena is not None, "a planned alloc in a function without arena"
                offset = op.attributes[OFFSET]
                assert isinstance(offset, IntAttr), offset
                self.values[op.res] = arena_element(self, self.arena, offset.data)
            case loop.AllocOp():
                mtype = op.res.type
                align = op.align.data
                nbytes = element_count(mtype) * element_bytes(mtype, op)
                size = max(align, (nbytes + align - 1) // align * align)  # a multiple of align
                self.declare("aligned_alloc", [i64, i64], PTR)
                args = [const(self, align, i64), const(self, size, i64)]
                call = make(llvm.CallOp, "aligned_alloc", *args, return_type=PTR)
                self.values[op.res] = self.trap_if_null(self.emit(call), op, size)
            case loop.AllocSizedOp():
                self.values[op.res] = self.sized_alloc(op)
            case loop.DeallocOp():
                self.dealloc(op)
            case loop.ConstBufferOp():
                self.values[op.res] = self.constant_data(op.value, op.res.type)
            case loop.ConstCopyOp():
                mtype = buffer_type(op.dest)
                nbytes = element_count(mtype) * element_bytes(mtype, op)
                source = self.constant_data(op.value, mtype)
                args = [self.get(op.dest), source, const(self, nbytes, i64), const(self, 0, i1)]
                self.emit(make(llvm.CallIntrinsicOp, "llvm.memcpy.p0.p0.i64", args, []))
            case loop.CopyOp():
                mtype = buffer_type(op.source)
                nbytes = element_count(mtype) * element_bytes(mtype, op)
                args = [self.get(op.dest), self.get(op.source), const(self, nbytes, i64)]
                args.append(const(self, 0, i1))
                self.emit(make(llvm.CallIntrinsicOp, "llvm.memcpy.p0.p0.i64", args, []))
            case loop.CallOp():
                buffers = [self.get(v) for v in op.buffers]
                self.emit(
                    make(llvm.CallOp, abi.function_symbol(op.callee.data), self.ctx, *buffers)
                )
                self.return_if_status()

    def sized_alloc(self, op: loop.AllocSizedOp) -> SSAValue:
        """`count` elements, `n` bytes rounded up past a multiple of 64 (so never 0),
        taken at the arena's top when they fit below its end, else from
        `aligned_alloc(64, n)` (a NULL traps with "out of memory"). The top moves by `n`
        either way: after the call it says how many bytes the call's buffers wanted, and
        the runtime grows the arena to that for the next calls
        (`dlc.runtime.symbolic`), which then touch no fresh pages."""
        align = loop.ARENA_ALIGN
        count = self.get(op.count)
        nbytes = self.emit(
            make(llvm.MulOp, count, const(self, element_bytes(op.res.type, op), i64))
        )
        padded = self.emit(make(llvm.AddOp, nbytes, const(self, align, i64)))
        size = self.emit(make(llvm.AndOp, padded, const(self, -align, i64)))
        top = self.load_word(abi.CTX_ARENA_TOP)
        after = self.emit(make(llvm.AddOp, top, size))
        self.store_word(after, abi.CTX_ARENA_TOP)
        fits = icmp(self, "ule", after, self.load_word(abi.CTX_ARENA_END))
        arena, heap, done = Block(), Block(), Block(arg_types=[PTR])
        self.emit(make(llvm.CondBrOp, fits, arena, [], heap, []))
        self.start(arena)
        self.emit(make(llvm.BrOp, done, self.emit(make(llvm.IntToPtrOp, top))))
        self.start(heap)
        self.declare("aligned_alloc", [i64, i64], PTR)
        call = make(llvm.CallOp, "aligned_alloc", const(self, align, i64), size, return_type=PTR)
        pointer = self.emit(call)
        failed = icmp(
            self, "eq", self.emit(make(llvm.PtrToIntOp, pointer, i64)), const(self, 0, i64)
        )
        self.trap_when(failed, op, "trap", "out of memory allocating a buffer sized at run time")
        self.emit(make(llvm.BrOp, done, pointer))
        self.start(done)
        return done.args[0]

    def dealloc(self, op: loop.DeallocOp) -> None:
        """`free` the buffer (one of `sized_alloc`: `sized_free`)."""
        if isinstance(op.buffer.owner, loop.AllocSizedOp):
            self.sized_free(op)
            return
        self.declare("free", [PTR], llvm.LLVMVoidType())
        self.emit(make(llvm.CallOp, "free", self.get(op.buffer)))

    def sized_free(self, op: loop.DeallocOp) -> None:
        """Free a `sized_alloc` buffer that came from the heap (one in the arena goes
        when the call's arena is reset)."""
        address = self.emit(make(llvm.PtrToIntOp, self.get(op.buffer), i64))
        below = icmp(self, "ult", address, self.load_word(abi.CTX_ARENA_BASE))
        above = icmp(self, "uge", address, self.load_word(abi.CTX_ARENA_END))
        heap, done = Block(), Block()
        self.emit(make(llvm.CondBrOp, self.emit(make(llvm.OrOp, below, above)), heap, [], done, []))
        self.start(heap)
        self.declare("free", [PTR], llvm.LLVMVoidType())
        self.emit(make(llvm.CallOp, "free", self.get(op.buffer)))
        self.emit(make(llvm.BrOp, done))
        self.start(done)

    def checked(
        self,
        op: Operation,
        linear: SSAValue,
        indices: Sequence[SSAValue],
        shape: Sequence[int],
        lanes: int = 1,
    ) -> SSAValue:
        """Bounds check: an out-of-range index (the last one: with `lanes` elements from
        it) records the op's message in the status word (the first violation wins) and
        accesses element 0 instead."""
        bad = None
        limits = [*shape[:-1], shape[-1] - lanes + 1]
        for dim, index, extent in zip(limits, indices, shape, strict=True):
            if extent == DYNAMIC_INDEX:  # sized at run time: its size is not at hand here
                continue
            out = icmp(self, "uge", self.get(index), const(self, max(dim, 0), i64))
            bad = out if bad is None else self.emit(make(llvm.OrOp, bad, out))
        if bad is None:
            return linear
        where = location_prefix(op)
        kind = "load from" if isinstance(op, loop.LoadOp | loop.VLoadOp) else "store to"
        text = f"{where}out-of-bounds {kind} a buffer of shape {list(shape)} ({op.name})"
        code = self.status.code("bounds", text)
        word = self.load_word(abi.CTX_STATUS)
        first = icmp(self, "eq", word, const(self, 0, i64))
        record = self.emit(make(llvm.AndOp, bad, first))
        self.store_word(
            self.emit(make(llvm.SelectOp, record, const(self, code, i64), word)), abi.CTX_STATUS
        )
        return self.emit(make(llvm.SelectOp, bad, const(self, 0, i64), linear))
