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
"""

from __future__ import annotations

import ctypes
import signal
import threading

import llvmlite.binding as llvm_binding

SIGNALS = ("SIGINT", "SIGALRM", "SIGTERM")
_SA_SIGINFO = 4
_LOCK = threading.Lock()
_FLAG = ctypes.c_int32(0)
_QUIET = ctypes.c_int32(0)
_HANDLER: list[object] = []  # [engine, module, target machine, address, previous table]


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

define void @dlc_on_signal(i32 %sig) {{
entry:
  store volatile i32 1, ptr inttoptr (i64 {flag} to ptr), align 4
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
}}
"""


def _handler() -> tuple[int, ctypes.Array]:
    """The JIT-compiled handler's address and its table of previous handlers."""
    if not _HANDLER:
        from dlc.runtime.jit import target_machine

        tm = target_machine(2)
        module = llvm_binding.parse_assembly(_IR.format(flag=flag_address()))
        engine = llvm_binding.create_mcjit_compiler(module, tm)
        engine.finalize_object()
        table = (ctypes.c_int64 * 65).from_address(engine.get_global_value_address("previous"))
        _HANDLER.extend([engine, module, tm, engine.get_function_address("dlc_on_signal"), table])
    return _HANDLER[3], _HANDLER[4]  # type: ignore[return-value]


def _python_handled(signum: int) -> bool:
    handler = signal.getsignal(signum)
    return callable(handler) and handler not in (signal.SIG_DFL, signal.SIG_IGN)


def install() -> None:
    """Chain dlc's handler in front of every Python-handled signal of `SIGNALS`."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        sigaction = libc.sigaction
    except (OSError, AttributeError):
        return  # not glibc: calls are not interruptible
    with _LOCK:
        address, table = _handler()
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
