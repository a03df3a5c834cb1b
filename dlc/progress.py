"""Compile progress: the level a compile is at, the items of that level done and to do,
and the time each level took; drawn as one line on a terminal for long compiles.

`dlc.compile` and `dlc.compile_onnx` track their compile with a `Progress` (or join the
one the caller is `tracking`); `pipeline.run` reports each level as the module reaches
it, `lower-loop-to-llvm` the functions and kernels it has lowered, and the JIT the
`llvm` level (LLVM's optimizer and code generator).
A compile that has run for more than `DELAY` seconds shows

    dlc: [#########-----------] loop 12/56 kernels  3.4 s

on standard error when it is a terminal, redrawn at most `REDRAW` times a second and
erased when the compile ends; never when standard error is not a terminal or the
environment variable DLC_PROGRESS is 0. `Progress.phases` keeps the wall and CPU
seconds of each level (`tools/bench_compile.py` prints them).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TextIO

LEVELS = ("graph", "tensor", "loop", "llvm")
UNITS = {"loop": "kernels"}
DELAY = 1.0
REDRAW = 10
WIDTH = 20

_CURRENT: ContextVar[Progress | None] = ContextVar("dlc_progress", default=None)


def terminal(stream: TextIO | None) -> bool:
    """Whether a bar goes to `stream`: a terminal, and DLC_PROGRESS is not 0."""
    if os.environ.get("DLC_PROGRESS", "1").strip().lower() in ("0", "off", "false", "no"):
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):  # a closed or detached stream
        return False


class Progress:
    """One compile's progress (module docstring); `stream` None: timed, never drawn."""

    def __init__(self, stream: TextIO | None = None, delay: float = DELAY) -> None:
        self.stream, self.delay = stream, delay
        self.start = time.perf_counter()
        self.phases: dict[str, list[float]] = {}  # level -> [wall s, CPU s]
        self.level = ""
        self.done = self.total = 0
        self._since = (self.start, time.process_time())
        self._drawn = 0.0  # when the bar was last drawn (0: never)

    def enter(self, level: str) -> None:
        """The compile is now at `level` (one of `LEVELS`)."""
        if level == self.level:
            return
        self._close_phase()
        self.level, self.done, self.total = level, 0, 0
        self._draw()

    def items(self, done: int, total: int) -> None:
        """`done` of the current level's `total` items are lowered."""
        self.done, self.total = done, total
        self._draw()

    def finish(self) -> None:
        """The compile ended: time the last level and erase the bar."""
        self._close_phase()
        self.level = ""
        if self._drawn and self.stream is not None:
            self._write("\r\x1b[K")
            self._drawn = 0.0

    def _close_phase(self) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        if self.level:
            spent = self.phases.setdefault(self.level, [0.0, 0.0])
            spent[0] += wall - self._since[0]
            spent[1] += cpu - self._since[1]
        self._since = (wall, cpu)

    def line(self) -> str:
        """The bar's text."""
        at = LEVELS.index(self.level) if self.level in LEVELS else 0
        share = (self.done / self.total) if self.total else 0.0
        filled = int(WIDTH * (at + share) / len(LEVELS))
        count = f" {self.done}/{self.total} {UNITS.get(self.level, '')}" if self.total else ""
        elapsed = time.perf_counter() - self.start
        return f"dlc: [{'#' * filled}{'-' * (WIDTH - filled)}] {self.level}{count}  {elapsed:.1f} s"

    def _draw(self) -> None:
        if self.stream is None:
            return
        now = time.perf_counter()
        if now - self.start < self.delay or now - self._drawn < 1 / REDRAW:
            return
        self._drawn = now
        self._write("\r" + self.line() + "\x1b[K")

    def _write(self, text: str) -> None:
        try:
            assert self.stream is not None
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: stop drawing
            self.stream = None


def current() -> Progress | None:
    """The progress of the compile running in this context, if one is tracked."""
    return _CURRENT.get()


def enter(level: str) -> None:
    progress = _CURRENT.get()
    if progress is not None:
        progress.enter(level)


def items(done: int, total: int) -> None:
    progress = _CURRENT.get()
    if progress is not None:
        progress.items(done, total)


@contextmanager
def tracking(progress: Progress | None = None) -> Iterator[Progress]:
    """Track a compile: the caller's `progress`, the one already tracked (a nested
    compile joins it), or a new one drawing on standard error when it is a terminal."""
    outer = _CURRENT.get()
    if progress is None and outer is not None:
        yield outer
        return
    if progress is None:
        progress = Progress(sys.stderr if terminal(sys.stderr) else None)
    token = _CURRENT.set(progress)
    try:
        yield progress
    finally:
        _CURRENT.reset(token)
        progress.finish()
