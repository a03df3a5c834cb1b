"""Ctrl-C and other Python-handled signals during native calls.

Python runs its signal handlers between bytecodes, never while native code runs, so a
long or endless compiled loop would ignore Ctrl-C. dlc chains a tiny C-level handler
(JIT-compiled here) in front of the C handler of every signal that has a Python
handler (SIGINT always, SIGALRM and SIGTERM when one is set): it sets the process-wide
flag `flag_address()` and calls the previous handler, so Python still sees the signal.
Compiled loops that may run long poll the flag (only in calls from the main thread,
where Python delivers signals; other threads' contexts point at `quiet()`, a flag
never set) and return with an "interrupt" status; the caller then runs the Python
handlers (`PyErr_CheckSignals`): KeyboardInterrupt, or whatever the handler raises.

`install()` runs at each compile. A handler installed later with `signal.signal`
replaces dlc's C handler (no crash: calls are then just not interruptible until the
next compile). Handlers installed with SA_SIGINFO are left alone.

The handler's object code (`handler_object()`) is the same in every process: the flag
is the symbol `FLAG_SYMBOL`, bound when the code is loaded. Compile-cache entries carry
it, so a warm start loads it with the module's code instead of compiling it (which
would load `llvmlite.binding` and LLVM's code generator).
"""

from __future__ import annotations

import ctypes
import signal
import threading
from typing import Any

SIGNALS = ("SIGINT", "SIGALRM", "SIGTERM")
_SA_SIGINFO = 4
_LOCK = threading.Lock()
_FLAG = ctypes.c_int32(0)
_QUIET = ctypes.c_int32(0)
FLAG_SYMBOL = "dlc.interrupt.flag"
_HANDLER: list[Any] = []  # [JITModule, address, previous table, object code]


class _SigAction(ctypes.Structure):
    """glibc's `struct sigaction` on 64-bit Linux."""

    _fields_ = (
        ("handler", ctypes.c_void_p),
        ("mask", ctypes.c_ubyte * 128),
        ("flags", ctypes.c_int),
        ("restorer", ctypes.c_void_p),
    )


def flag_address() -> int:
    """The flag dlc's signal handler sets (polled by main-thread calls)."""
    return ctypes.addressof(_FLAG)


def quiet() -> int:
    """A flag that is never set (polled by calls from other threads)."""
    return ctypes.addressof(_QUIET)


def clear() -> None:
    _FLAG.value = 0


_IR = """
@previous = global [65 x i64] zeroinitializer
@"dlc.interrupt.flag" = external global i32

define void @dlc_on_signal(i32 %sig) {
entry:
  store volatile i32 1, ptr @"dlc.interrupt.flag", align 4
  %index = zext i32 %sig to i64
  %slot = getelementptr [65 x i64], ptr @previous, i64 0, i64 %index
  %prev = load i64, ptr %slot, align 8
  %chain = icmp ugt i64 %prev, 1
  br i1 %chain, label %call, label %done
call:
  %fn = inttoptr i64 %prev to ptr
  call void %fn(i32 %sig)
  br label %done
done:
  ret void
}
"""


def _load(code: bytes | memoryview | None) -> None:
    """Load the handler: object code `code` (from a cache entry) if it loads, else
    compiled here. It stays loaded for the life of the process."""
    from dlc import llvm_c
    from dlc.runtime.jit import JITModule, build_object

    llvm_c.add_symbol(FLAG_SYMBOL, flag_address())
    jit = None
    if code is not None:
        try:
            jit = JITModule.from_object(bytes(code), 2)
        except (RuntimeError, ValueError):
            jit = None
    if jit is None or code is None:
        code = build_object(_IR, 2)
        jit = JITModule.from_object(code, 2)
    previous = jit.global_address("previous")
    assert previous is not None, "the handler's code has no table of previous handlers"
    table = (ctypes.c_int64 * 65).from_address(previous)
    _HANDLER.extend([jit, jit.address("dlc_on_signal"), table, bytes(code)])


def handler_object() -> bytes:
    """The handler's object code (compiled on first use), for compile-cache entries."""
    with _LOCK:
        if not _HANDLER:
            _load(None)
        return _HANDLER[3]


def _python_handled(signum: int) -> bool:
    handler = signal.getsignal(signum)
    return handler not in (signal.SIG_DFL, signal.SIG_IGN) and callable(handler)


def install(code: bytes | memoryview | None = None) -> None:
    """Chain dlc's handler in front of every Python-handled signal of `SIGNALS`; when
    this process has not loaded the handler yet, from its object code `code` (a cache
    entry's) if given."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        sigaction = libc.sigaction
    except (OSError, AttributeError):
        return  # not glibc: calls are not interruptible
    with _LOCK:
        if not _HANDLER:
            _load(code)
        address, table = _HANDLER[1], _HANDLER[2]
        for name in SIGNALS:
            signum = getattr(signal, name, None)
            if signum is None or not _python_handled(signum):
                continue
            old = _SigAction()
            if sigaction(signum, None, ctypes.byref(old)) != 0 or old.handler == address:
                continue
            if old.flags & _SA_SIGINFO:
                continue
            table[signum] = old.handler or 0
            new = _SigAction.from_buffer_copy(old)
            new.handler = address
            sigaction(signum, ctypes.byref(new), None)


def raise_pending() -> None:
    """After a call stopped for a signal: run Python's handlers now (they raise
    KeyboardInterrupt, or what the user's handler raises)."""
    clear()
    ctypes.pythonapi.PyErr_CheckSignals()
