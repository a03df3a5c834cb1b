"""The load governor: parallel loops step down to one thread while the cores are
contended, and back up when they are free again.

A fork-join parallel loop is as fast as its slowest thread: when other processes keep
the cores busy, the thread the OS deschedules holds the whole team at the join, and a
loop on two threads ran many times slower than on one. The governor watches the
kernel's CPU pressure (`/proc/pressure/cpu`, the share of time some runnable task waited
for a core) from a daemon thread, every `PERIOD` seconds while calls with more than
one thread exist, and sets the thread word of those calls' contexts
(`abi.CTX_THREADS`): 1 once the pressure over a period exceeds `HIGH`, the requested
count again after `CALM_PERIODS` periods below `LOW`. The thread count never changes
a result (parallel loops are bit-identical for any count). Without pressure
information (not Linux, or PSI off) or with `DLC_LOAD_GOVERNOR=0`, nothing changes.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from typing import Protocol

PSI_PATH = "/proc/pressure/cpu"
PERIOD = 0.2
HIGH = 0.5
LOW = 0.1
CALM_PERIODS = 5


class Governed(Protocol):
    requested_threads: int

    def set_threads(self, threads: int) -> None: ...


def read_some_total(path: str = PSI_PATH) -> int | None:
    """Microseconds, since boot, that some runnable task waited for a CPU; None when
    the kernel does not say."""
    try:
        with open(path, encoding="ascii") as f:
            first = f.readline()
    except OSError:
        return None
    for field in first.split()[1:]:
        key, _, value = field.partition("=")
        if key == "total" and value.isdigit():
            return int(value)
    return None


class Decision:
    """The step-down rule, apart from the clock and the kernel (tested alone)."""

    def __init__(self) -> None:
        self.contended = False
        self.calm = 0

    def update(self, pressure: float) -> bool:
        """Feed one period's pressure (0..1); return whether the cores are contended."""
        if pressure > HIGH:
            self.contended, self.calm = True, 0
        elif self.contended and pressure < LOW:
            self.calm += 1
            if self.calm >= CALM_PERIODS:
                self.contended, self.calm = False, 0
        else:
            self.calm = 0
        return self.contended


class Governor:
    def __init__(self) -> None:
        self.watched: weakref.WeakSet[Governed] = weakref.WeakSet()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.decision = Decision()

    def watch(self, ctx: Governed) -> None:
        """Govern `ctx`'s thread word from now on (contexts of more than one thread)."""
        if os.environ.get("DLC_LOAD_GOVERNOR", "1") == "0" or read_some_total() is None:
            return
        with self.lock:
            self.watched.add(ctx)
            if self.decision.contended:
                ctx.set_threads(1)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="dlc-governor", daemon=True)
                self.thread.start()

    def _run(self) -> None:
        last_total, last_time = read_some_total(), time.monotonic()
        while True:
            time.sleep(PERIOD)
            with self.lock:
                if not self.watched:
                    self.thread = None
                    return
            total, now = read_some_total(), time.monotonic()
            if total is None or last_total is None:
                return
            pressure = (total - last_total) / 1e6 / max(now - last_time, 1e-3)
            last_total, last_time = total, now
            before = self.decision.contended
            if self.decision.update(pressure) != before:
                self.apply()

    def apply(self) -> None:
        with self.lock:
            for ctx in list(self.watched):
                ctx.set_threads(1 if self.decision.contended else ctx.requested_threads)


GOVERNOR = Governor()


def _after_fork() -> None:  # the watching thread does not survive a fork
    GOVERNOR.thread = None
    GOVERNOR.lock = threading.Lock()
    if GOVERNOR.watched:
        GOVERNOR.thread = threading.Thread(target=GOVERNOR._run, name="dlc-governor", daemon=True)
        GOVERNOR.thread.start()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
