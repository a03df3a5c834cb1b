"""The call context in generated code (`dlc.dialects.abi`, `ctx`): status, guards, arena.

Every lowered function takes `ptr ctx` first. `ContextEmitter` (a base of the function
emitter) reads and writes its words:

- the status word: traps, bounds violations, failed allocations and interrupts store a
  message code and return; after each call the caller returns too when it is set;
- the call depth of recursive functions (`MAX_CALL_DEPTH`);
- the stack guard: a function that calls others or has stack slots compares its stack
  pointer (less its slots and `STACK_MARGIN`) with the thread's stack limit on entry,
  and traps instead of running off the end of the stack (a crash);
- interrupt polls at loop back edges that may run long (`poll_interrupt`): the flag's
  address is laundered through an empty `asm` each time, so LLVM cannot hoist the load
  out of the loop, and nothing else in the loop is constrained;
- the arena: a planned function takes `[top, top + size)` of the caller's arena on
  entry and restores `top` before each return.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects import llvm
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, i8, i32, i64
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from dlc.diagnostics import location_prefix
from dlc.dialects import abi
from dlc.lowering.loop_to_llvm.scalar import const, icmp
from dlc.lowering.prebuilt import make

PTR = llvm.LLVMPointerType()

MAX_CALL_DEPTH = 20_000
"""Nesting limit of recursive calls (the reference interpreter's limit too)."""

STACK_MARGIN = 64 << 10
"""Stack a guarded function may use below its guard without another check: its own
spills and the C library functions it calls (allocators, libm)."""


@dataclass
class StatusTable:
    """Messages of traps, bounds checks and interrupts, shared by a module's functions."""

    bounds_check: bool = False
    messages: list[str] = field(default_factory=list)
    variables: dict[str, int] = field(default_factory=dict)
    depth_used: bool = False
    constants: list[tuple[str, Attribute, Attribute]] = field(default_factory=list)
    """(symbol, llvm array type, dense data) of the read-only data of `loop.const_copy`."""

    polls: bool = False
    """Whether the module polls the interrupt flag (`note_poll`)."""

    def code(self, kind: str, text: str) -> int:
        self.messages.append(f"{kind}\t{text}")
        return len(self.messages)

    def note_poll(self) -> None:
        """The module polls: its polls store `abi.STATUS_INTERRUPTED`, and the one
        "interrupt" message says that its calls can stop."""
        if not self.polls:
            self.polls = True
            self.code("interrupt", "interrupted")


class ContextEmitter:
    """The ctx half of the function emitter (it provides `emit`, `start`, `region`)."""

    ctx: SSAValue
    status: StatusTable

    def emit(self, op: Operation) -> SSAValue:  # provided by the function emitter
        raise NotImplementedError

    def declare(self, name: str, inputs: Sequence[Attribute], output: Attribute) -> None:
        raise NotImplementedError  # provided by the function emitter

    def constant(self, value: IntegerAttr | FloatAttr, t: Attribute) -> SSAValue:
        raise NotImplementedError  # provided by the function emitter

    def get(self, value: SSAValue) -> SSAValue:
        raise NotImplementedError  # provided by the function emitter

    def start(self, block: Block) -> None:
        raise NotImplementedError

    def word(self, index: int) -> SSAValue:
        """Pointer to ctx word `index`."""
        if index == 0:
            return self.ctx
        gep = make(llvm.GEPOp, self.ctx, [index], i64, inbounds=True)
        return self.emit(gep)

    def load_word(self, index: int) -> SSAValue:
        return self.emit(make(llvm.LoadOp, self.word(index), i64, alignment=8))

    def store_word(self, value: SSAValue, index: int) -> None:
        self.emit(make(llvm.StoreOp, value, self.word(index), alignment=8))

    # -- status -------------------------------------------------------------------------

    def return_if_status(self) -> None:
        """After a call: return at once when the callee set the status word."""
        failed = icmp(self, "ne", self.load_word(abi.CTX_STATUS), const(self, 0, i64))
        leave, resume = Block(), Block()
        self.emit(make(llvm.CondBrOp, failed, leave, [], resume, []))
        self.start(leave)
        self.emit(make(llvm.ReturnOp))
        self.start(resume)

    def trap_when(
        self,
        failed: SSAValue,
        op: Operation | None,
        kind: str,
        message: str,
        value: SSAValue | None = None,
    ) -> Operation:
        """If `failed` (i1): record "FILE:LINE:COL: message" of `op` in the status word
        and return (Python raises TrapError, IndexError for kinds "bounds" and
        "bounds-value", KeyboardInterrupt for "interrupt"); otherwise continue. With
        `value` (i64, kind "bounds-value") `message` is "before\\tafter" and the value,
        stored in ctx word `CTX_FAULT`, is shown between. Returns the failing path's
        `llvm.return`."""
        return self.leave_with(failed, self.status.code(kind, location_prefix(op) + message), value)

    def leave_with(self, failed: SSAValue, code: int, value: SSAValue | None = None) -> Operation:
        """If `failed` (i1): store status `code` (and `value` in word `CTX_FAULT`) and
        return; otherwise continue. Returns the failing path's `llvm.return`."""
        leave, resume = Block(), Block()
        self.emit(make(llvm.CondBrOp, failed, leave, [], resume, []))
        self.start(leave)
        if value is not None:
            self.store_word(value, abi.CTX_FAULT)
        self.store_word(const(self, code, i64), abi.CTX_STATUS)
        leaving = make(llvm.ReturnOp)
        self.emit(leaving)
        self.start(resume)
        return leaving

    def trap_if_null(self, pointer: SSAValue, op: Operation, nbytes: int) -> SSAValue:
        """A NULL from an allocator becomes a trap ("out of memory") instead of a pointer
        that later stores would write through."""
        as_int = self.emit(make(llvm.PtrToIntOp, pointer, i64))
        failed = icmp(self, "eq", as_int, const(self, 0, i64))
        self.trap_when(failed, op, "trap", f"out of memory allocating {nbytes} bytes")
        return pointer

    # -- guards -------------------------------------------------------------------------

    def enter_depth_guard(self, func: Operation, name: str) -> None:
        """At entry of `func`: trap when `MAX_CALL_DEPTH` recursive calls are active,
        else count this one (`leave_depth_guard` uncounts it)."""
        self.status.depth_used = True
        depth = self.load_word(abi.CTX_DEPTH)
        full = icmp(self, "sge", depth, const(self, MAX_CALL_DEPTH, i64))
        text = f"call depth limit exceeded ({MAX_CALL_DEPTH}) in @{name}"
        self.trap_when(full, func, "trap", text)
        self.store_word(self.emit(make(llvm.AddOp, depth, const(self, 1, i64))), abi.CTX_DEPTH)

    def leave_depth_guard(self, returns: list[Operation]) -> None:
        """Uncount the call before each of `returns` (those after the count)."""
        for ret in returns:
            ops = self._word_ops(abi.CTX_DEPTH)
            depth = make(llvm.LoadOp, ops[-1].results[0], i64, alignment=8)
            one = make(llvm.ConstantOp, IntegerAttr(1, i64), i64)
            less = make(llvm.SubOp, depth.dereferenced_value, one.result)
            store = make(llvm.StoreOp, less.res, ops[-1].results[0], alignment=8)
            Rewriter.insert_op([*ops, depth, one, less, store], InsertPoint.before(ret))

    def _word_ops(self, index: int) -> list[Operation]:
        """Ops computing a pointer to ctx word `index` (for insertion elsewhere)."""
        return [make(llvm.GEPOp, self.ctx, [index], i64, inbounds=True)]

    def stack_guard(self, func: Operation, name: str, frame_bytes: int) -> None:
        """Trap ("stack overflow") at the entry of `func` when the stack pointer, less
        `frame_bytes` and `STACK_MARGIN`, is below the thread's stack limit."""
        sp = self.emit(make(llvm.CallIntrinsicOp, "llvm.stacksave.p0", [], [PTR]))
        need = const(self, frame_bytes + STACK_MARGIN, i64)
        lowest = self.emit(make(llvm.SubOp, self.emit(make(llvm.PtrToIntOp, sp, i64)), need))
        limit = self.load_word(abi.CTX_STACK_LIMIT)
        below = icmp(self, "ult", lowest, limit)
        self.trap_when(below, func, "trap", f"stack overflow in @{name} (native stack exhausted)")

    def poll_interrupt(self, op: Operation | None) -> None:
        """Return with an "interrupt" status when the interrupt flag is set."""
        address = self.emit(make(llvm.IntToPtrOp, self.load_word(abi.CTX_INTERRUPT)))
        opaque = make(llvm.InlineAsmOp, "", "=r,0", [address], [PTR], has_side_effects=True)
        flag = self.emit(make(llvm.LoadOp, self.emit(opaque), i32, alignment=4))
        raised = icmp(self, "ne", flag, const(self, 0, i32))
        self.status.note_poll()
        self.leave_with(raised, abi.STATUS_INTERRUPTED)

    # -- arena --------------------------------------------------------------------------

    def enter_arena(self, size: int, op: Operation) -> SSAValue:
        """Take `size` bytes at the caller's arena top; the block's base pointer."""
        base = self.load_word(abi.CTX_ARENA_TOP)
        top = self.emit(make(llvm.AddOp, base, const(self, size, i64)))
        full = icmp(self, "ugt", top, self.load_word(abi.CTX_ARENA_END))
        self.trap_when(full, op, "trap", f"out of memory allocating {size} bytes (arena)")
        self.store_word(top, abi.CTX_ARENA_TOP)
        self.arena_base_word = base
        return self.emit(make(llvm.IntToPtrOp, base))

    def leave_arena(self, returns: list[Operation]) -> None:
        """Give the block back (`top = base`) before every return."""
        for ret in returns:
            ops = self._word_ops(abi.CTX_ARENA_TOP)
            store = make(llvm.StoreOp, self.arena_base_word, ops[-1].results[0], alignment=8)
            Rewriter.insert_op([*ops, store], InsertPoint.before(ret))


def arena_element(em: ContextEmitter, base: SSAValue, offset: int) -> SSAValue:
    """`&arena[offset]`."""
    if offset == 0:
        return base
    index = em.emit(make(llvm.ConstantOp, IntegerAttr(offset, i64), i64))
    return em.emit(
        make(llvm.GEPOp, base, [llvm.GEP_USE_SSA_VAL], i8, ssa_indices=[index], inbounds=True)
    )
