"""Thread-safe, re-entrant and interruptible calls (dlc/runtime/context.py, interrupts.py):
every call has its own status word, depth counter and arena (the call context of its
thread); deep recursion traps instead of overflowing the native stack; signals with a
Python handler stop long native loops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import dlc

N = 128  # 128 x 128 x 2 arrays: above the small-call size, so calls release the GIL

ARENA = f"""module "threads"
stage raw

func @inner: (<{N} x {N} x f32>) -> <{N} x {N} x f32> {{
'entry(%x: <{N} x {N} x f32>):
    %e = exp %x: <{N} x {N} x f32>
    %t = transpose %e: <{N} x {N} x f32>
    %u = add %e: <{N} x {N} x f32>, %t: <{N} x {N} x f32>
    %d = dot %u: <{N} x {N} x f32>, %e: <{N} x {N} x f32>
    %a1 = multiply %d: <{N} x {N} x f32>, 0.5: f32
    %a2 = add %a1: <{N} x {N} x f32>, %t: <{N} x {N} x f32>
    %a3 = multiply %a2: <{N} x {N} x f32>, 0.25: f32
    %a4 = add %a3: <{N} x {N} x f32>, %u: <{N} x {N} x f32>
    %a5 = multiply %a4: <{N} x {N} x f32>, %a4: <{N} x {N} x f32>
    %a6 = add %a5: <{N} x {N} x f32>, 1.0: f32
    %a7 = divide %a6: <{N} x {N} x f32>, %u: <{N} x {N} x f32>
    %a8 = subtract %a7: <{N} x {N} x f32>, %e: <{N} x {N} x f32>
    %a9 = multiply %a8: <{N} x {N} x f32>, 3.0: f32
    %b1 = add %a9: <{N} x {N} x f32>, %d: <{N} x {N} x f32>
    %b2 = transpose %b1: <{N} x {N} x f32>
    %b3 = add %b2: <{N} x {N} x f32>, %b1: <{N} x {N} x f32>
    %b4 = multiply %b3: <{N} x {N} x f32>, 0.125: f32
    %b5 = add %b4: <{N} x {N} x f32>, %t: <{N} x {N} x f32>
    %b6 = multiply %b5: <{N} x {N} x f32>, %b5: <{N} x {N} x f32>
    %b7 = add %b6: <{N} x {N} x f32>, %x: <{N} x {N} x f32>
    %b8 = multiply %b7: <{N} x {N} x f32>, 0.5: f32
    %c0 = add %b8: <{N} x {N} x f32>, %u: <{N} x {N} x f32>
    %c1 = add %c0: <{N} x {N} x f32>, %u: <{N} x {N} x f32>
    %c2 = add %c1: <{N} x {N} x f32>, %u: <{N} x {N} x f32>
    %c3 = add %c2: <{N} x {N} x f32>, %u: <{N} x {N} x f32>
    %c4 = add %c3: <{N} x {N} x f32>, %u: <{N} x {N} x f32>
    %c5 = add %c4: <{N} x {N} x f32>, %u: <{N} x {N} x f32>
    %c6 = add %c5: <{N} x {N} x f32>, %u: <{N} x {N} x f32>
    %c7 = add %c6: <{N} x {N} x f32>, %u: <{N} x {N} x f32>
    %c8 = add %c7: <{N} x {N} x f32>, %u: <{N} x {N} x f32>
    %c9 = add %c8: <{N} x {N} x f32>, %u: <{N} x {N} x f32>
    %c10 = add %c9: <{N} x {N} x f32>, %u: <{N} x {N} x f32>
    %c11 = add %c10: <{N} x {N} x f32>, %u: <{N} x {N} x f32>
    %c12 = add %c11: <{N} x {N} x f32>, %u: <{N} x {N} x f32>
    return %c12: <{N} x {N} x f32>
}}

func @outer: (<{N} x {N} x f32>) -> <{N} x {N} x f32> {{
'entry(%x: <{N} x {N} x f32>):
    %y = apply @inner(%x: <{N} x {N} x f32>): (<{N} x {N} x f32>) -> <{N} x {N} x f32>
    return %y: <{N} x {N} x f32>
}}

func @get: (<{N} x {N} x f32>, i64) -> f32 {{
'entry(%x: <{N} x {N} x f32>, %i: i64):
    %row = extract %i: i64 from %x: <{N} x {N} x f32>
    %e = extract 3 from %row: <{N} x f32>
    return %e: f32
}}
"""


def test_concurrent_calls_through_an_arena_function_are_all_right() -> None:
    """4 threads x 1,000 calls of a function without an arena that calls one with a
    planned arena (before: the threads shared the callee's static arena)."""
    mod = dlc.compile(ARENA)
    # inner is too big to inline (inline{max-ops=32}) and plans an arena; outer has none
    assert mod.stats("inner")["arena_bytes"] > 0 and "loop.call" in mod.ir("loop")
    assert mod.stats("outer")["arena_bytes"] == 0
    rng = np.random.default_rng(0)
    inputs = [rng.random((N, N), np.float32) for _ in range(8)]
    expected = [mod.outer(x) for x in inputs]

    def worker(seed: int) -> int:
        wrong = 0
        for call in range(1000):
            k = (seed + call) % len(inputs)
            wrong += not np.array_equal(mod.outer(inputs[k]), expected[k])
        return wrong

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(worker, range(4))) == [0, 0, 0, 0]


def test_a_failing_call_does_not_fail_other_threads_calls() -> None:
    """One thread passes out-of-range indices to a bounds-checked function, three pass
    valid ones: every exception and every result is that call's own (before: they
    shared one status word, and valid calls raised the other thread's IndexError)."""
    mod = dlc.compile(ARENA, bounds_check=True, filename="t.dl")
    x = np.arange(N * N, dtype=np.float32).reshape(N, N)

    def worker(bad: bool) -> tuple[int, int]:
        errors = right = 0
        for call in range(3000):
            i = np.int64(N + call % 7 if bad else call % N)
            try:
                right += mod.get(x, i) == x[i, 3]
            except IndexError as e:
                errors += "out-of-bounds extract index" in str(e)
        return errors, right

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(worker, [True, False, False, False]))
    assert results == [(3000, 0), (0, 3000), (0, 3000), (0, 3000)]


RECURSION = """module "deep"
stage raw

func @framed: (i64) -> i64 {
'entry(%n: i64):
    %p = allocateStack [4096 x i64] count 1
    %q = elementPointer %p: *[4096 x i64] at 4000
    store %n: i64 to %q: *i64
    %done = lessThan %n: i64, 1: i64
    conditional %done: bool then 'base() else 'step()
'base():
    return 0: i64
'step():
    %m = subtract %n: i64, 1: i64
    %r = apply @framed(%m: i64): (i64) -> i64
    %k = load %q: *i64
    %s = add %r: i64, %k: i64
    return %s: i64
}

func @plain: (i64) -> i64 {
'entry(%n: i64):
    %done = lessThan %n: i64, 1: i64
    conditional %done: bool then 'base() else 'step()
'base():
    return 0: i64
'step():
    %m = subtract %n: i64, 1: i64
    %r = apply @plain(%m: i64): (i64) -> i64
    %s = add %r: i64, 1: i64
    return %s: i64
}
"""


def test_recursion_with_big_frames_traps_at_any_depth() -> None:
    """32 KiB frames, 5,000 deep: far beyond an 8 MiB stack (before: SIGSEGV)."""
    mod = dlc.compile(RECURSION, filename="deep.dl")
    assert mod.framed(np.int64(100)) == 5050
    for depth in (5_000, 50_000):
        with pytest.raises(dlc.TrapError, match=r"^deep\.dl:4:6: stack overflow in @framed"):
            mod.framed(np.int64(depth))
    assert mod.framed(np.int64(100)) == 5050  # the context was reset


def test_plain_recursion_in_a_small_thread_stack_traps() -> None:
    """19,999 calls deep (under the call-depth limit) in a thread with a 512 KiB stack."""
    mod = dlc.compile(RECURSION, filename="deep.dl")
    out: list[object] = []

    def run() -> None:
        try:
            out.append(mod.plain(np.int64(19_999)))
        except dlc.TrapError as e:
            out.append(str(e))
        out.append(mod.plain(np.int64(1_000)))

    old = threading.stack_size(512 * 1024)
    try:
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
    finally:
        threading.stack_size(old)
    assert out[0] == "deep.dl:21:6: stack overflow in @plain (native stack exhausted)"
    assert out[1] == 1_000
    assert mod.plain(np.int64(19_999)) == 19_999  # the main thread's stack is big enough


SPIN = """module "spin"
stage raw

func @spin: (i64) -> i64 {
'entry(%n: i64):
    branch 'loop(%n: i64)
'loop(%i: i64):
    %j = add %i: i64, 1: i64
    %c = greaterThan %j: i64, -5: i64
    conditional %c: bool then 'loop(%j: i64) else 'exit(%j: i64)
'exit(%k: i64):
    return %k: i64
}
"""


class _Alarm(Exception):
    pass


def test_sigalrm_handler_runs_during_an_endless_native_loop() -> None:
    def on_alarm(signum: int, frame: object) -> None:
        raise _Alarm

    old = signal.signal(signal.SIGALRM, on_alarm)
    try:
        mod = dlc.compile(SPIN)
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(_Alarm):
            mod.spin(np.int64(0))
        assert mod.spin(np.int64(-100)) == -99  # a fresh context: not interrupted
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_a_signal_whose_handler_returns_stops_the_call_with_trap_error() -> None:
    old = signal.signal(signal.SIGALRM, lambda signum, frame: None)
    try:
        mod = dlc.compile(SPIN, filename="spin.dl")
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(dlc.TrapError, match=r"interrupted by a signal$"):
            mod.spin(np.int64(0))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_dlc_run_exits_130_on_ctrl_c(tmp_path: Path) -> None:
    source = tmp_path / "spin.dl"
    source.write_text(SPIN)
    cmd = [
        sys.executable,
        "-c",
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler);"
        " from dlc.cli.dlc_run import main; sys.exit(main())",
    ]
    proc = subprocess.Popen(
        [*cmd, str(source), "--entry", "spin", "--random-inputs"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    threading.Timer(3.0, lambda: os.kill(proc.pid, signal.SIGINT)).start()
    _, err = _communicate(proc)
    assert proc.returncode == 130 and "Traceback" not in err


def _communicate(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """The child's output; a child still running after 60 s is killed (a failure).
    The children install Python's SIGINT handler themselves: a runner that ignores
    SIGINT (a background shell) passes SIG_IGN on."""
    try:
        return proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
