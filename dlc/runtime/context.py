"""Call contexts: the per-thread state a compiled call changes (`dlc.dialects.abi`).

A `CallContext` is `CTX_WORDS` i64 words and an arena, owned by one thread: the status
word, the recursion depth, the thread's stack limit, the address of the interrupt
flag, the arena's `[top, end)` and the value of the last failed bounds check. `Contexts(arena_bytes)` hands each thread its own
(created on its first call), so concurrent calls of one module from several threads
never share a status word, a depth counter or an arena, and no call needs the GIL
for correctness.

The stack limit is the calling thread's real stack end (glibc's
`pthread_getattr_np`) plus `STACK_RESERVE`; where it cannot be found the stack guard
is off (0) and only the call-depth guard remains.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from dlc.dialects import abi
from dlc.runtime import interrupts
from dlc.runtime.governor import GOVERNOR

STACK_RESERVE = 256 << 10
"""Stack kept free below the limit: for the guard page, signal handlers and the C
library functions a guarded native frame calls."""

ARENA_ALIGN = 64


class _ThreadStack(threading.local):
    bounds: tuple[int, int] | None = None
    known: bool = False


_STACK = _ThreadStack()


def stack_bounds() -> tuple[int, int] | None:
    """(lowest address, size) of the calling thread's stack, or None; found once per
    thread (glibc reads /proc/self/maps for the main thread: not per module)."""
    if not _STACK.known:
        _STACK.bounds, _STACK.known = _read_stack_bounds(), True
    return _STACK.bounds


def _read_stack_bounds() -> tuple[int, int] | None:
    try:
        libc = ctypes.CDLL(None)
        libc.pthread_self.restype = ctypes.c_ulong
        attr = ctypes.create_string_buffer(128)  # pthread_attr_t: 56 bytes on x86-64
        if libc.pthread_getattr_np(ctypes.c_ulong(libc.pthread_self()), attr) != 0:
            return None
        low, size = ctypes.c_void_p(), ctypes.c_size_t()
        ok = libc.pthread_attr_getstack(attr, ctypes.byref(low), ctypes.byref(size)) == 0
        libc.pthread_attr_destroy(attr)
        return (low.value or 0, size.value) if ok and low.value else None
    except (AttributeError, OSError):
        return None


class CallContext:
    """The ctx of one thread: `address` is what native calls take first."""

    def __init__(self, arena_bytes: int, threads: int = 1) -> None:
        self.words = np.zeros(abi.CTX_WORDS, np.int64)
        self.requested_threads = max(1, threads)
        self.words[abi.CTX_THREADS] = self.requested_threads
        self.address = int(self.words.ctypes.data)
        self.status = ctypes.c_int64.from_address(self.address + 8 * abi.CTX_STATUS)
        try:
            self.arena = np.empty(arena_bytes + ARENA_ALIGN, np.uint8)
        except MemoryError:  # calls that need the arena trap with "out of memory"
            self.arena = np.empty(ARENA_ALIGN, np.uint8)
        base = int(self.arena.ctypes.data)
        self.arena_base = (base + ARENA_ALIGN - 1) // ARENA_ALIGN * ARENA_ALIGN
        bounds = stack_bounds()
        self.words[abi.CTX_STACK_LIMIT] = bounds[0] + STACK_RESERVE if bounds else 0
        main = threading.current_thread() is threading.main_thread()
        self.words[abi.CTX_INTERRUPT] = interrupts.flag_address() if main else interrupts.quiet()
        self.reset()
        if self.requested_threads > 1:  # steps down to 1 while the cores are contended
            GOVERNOR.watch(self)

    def fit_arena(self, nbytes: int) -> None:
        """Grow the arena to hold `nbytes` (what the last call's buffers sized at run
        time wanted: they take the arena when they fit, the heap otherwise)."""
        if nbytes <= len(self.arena) - ARENA_ALIGN:
            return
        try:
            arena = np.empty(nbytes + ARENA_ALIGN, np.uint8)
        except MemoryError:  # the heap keeps serving what does not fit
            return
        self.arena = arena
        base = int(arena.ctypes.data)
        self.arena_base = (base + ARENA_ALIGN - 1) // ARENA_ALIGN * ARENA_ALIGN
        self.reset()

    def set_threads(self, threads: int) -> None:
        """The thread count of this context's next parallel loops (the load governor's)."""
        self.words[abi.CTX_THREADS] = threads

    def reset(self) -> None:
        """Back to the state before a call (the Python entry of every compiled function
        does the same natively: status, depth, arena top)."""
        self.words[abi.CTX_STATUS] = 0
        self.words[abi.CTX_FAULT] = 0
        self.words[abi.CTX_DEPTH] = 0
        self.words[abi.CTX_ARENA_BASE] = self.arena_base
        self.words[abi.CTX_ARENA_TOP] = self.arena_base
        self.words[abi.CTX_ARENA_END] = self.arena_base + len(self.arena) - ARENA_ALIGN


class Contexts(threading.local):
    """One `CallContext` per thread, made on the thread's first call; `threads` is how
    many threads its parallel loops may use."""

    def __init__(self, arena_bytes: int, threads: int = 1) -> None:
        self.arena_bytes = arena_bytes
        self.threads = threads
        self.current: CallContext | None = None

    def get(self) -> CallContext:
        ctx = self.current
        if ctx is None:
            ctx = self.current = CallContext(self.arena_bytes, self.threads)
        return ctx
