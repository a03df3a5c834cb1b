"""Per-kernel profiles of a module compiled with `profile=True` (`mod.profile()`).

The compiled code appends timing marks to an event buffer (see
dlc/lowering/loop_to_llvm/profile.py); `EventBuffer` owns it and hands out what was
recorded. `Profile` pairs the marks into spans (a kernel inside a function's call; a
kernel of a function called from inside another kernel is that kernel's child, and each
span's `self_ns` leaves its children out, so nothing is counted twice), and describes
each kernel: its time, FLOPs and bytes, the GFLOP/s and GB/s it reached, and its
verdict against the roofline of this machine (`dlc.runtime.peaks`): memory-bound when
its arithmetic intensity (FLOPs per byte) times the peak bandwidth is below the peak
FMA throughput, compute-bound otherwise, with the percentage of that limit reached.
Output: `table()` (text, slowest first) and `chrome_trace()` / `save(path)` (the Chrome
trace format's `traceEvents`, which chrome://tracing and ui.perfetto.dev open).
A kernel whose buffers are sized at run time (symbolic dimensions) has no FLOPs or
bytes: its rates and verdict are unknown (`?` in the table, None in the trace).
"""

from __future__ import annotations

import ctypes
import json
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlc.dialects import abi
from dlc.runtime.peaks import Peaks

CAPACITY = 1 << 18
"""Events the buffer holds (4 MiB); later events overwrite the last slot and are
counted as lost (`Profile.lost`)."""


class EventBuffer:
    """The event buffer of one compiled module: count, capacity, (word, ns) pairs."""

    def __init__(self, jit: Any, capacity: int = CAPACITY) -> None:
        self.words = np.zeros(2 + 2 * capacity, np.int64)
        self.words[1] = capacity
        self.capacity = capacity
        address = jit.global_address(abi.PROFILE_BUFFER)
        if address is not None:  # a module without kernels may lack the global
            ctypes.c_int64.from_address(address).value = int(self.words.ctypes.data)

    def take(self) -> tuple[np.ndarray, int]:
        """The events recorded since the last `take` (an (n, 2) array) and how many
        were lost; the buffer starts again empty."""
        count = int(self.words[0])
        kept = min(count, self.capacity)
        events = self.words[2 : 2 + 2 * kept].reshape(kept, 2).copy()
        self.words[0] = 0
        return events, count - kept


@dataclass
class Span:
    """One run of a kernel (or a function's call): start and duration in ns, the time
    not spent in nested spans, its nesting depth."""

    kernel: int
    start_ns: int
    duration_ns: int
    self_ns: int
    depth: int


def spans(events: np.ndarray) -> list[Span]:
    """Pair begin and end marks (module docstring); unmatched marks (a call that
    trapped) are dropped."""
    found: list[Span] = []
    stack: list[list[int]] = []  # [kernel, start, children's ns]
    for word, ns in events.tolist():
        kernel, phase = divmod(word, 2)
        if phase == 0:
            stack.append([kernel, ns, 0])
            continue
        while stack and stack[-1][0] != kernel:
            stack.pop()
        if not stack:
            continue
        _, start, children = stack.pop()
        duration = ns - start
        found.append(Span(kernel, start, duration, duration - children, len(stack)))
        if stack:
            stack[-1][2] += duration
    found.sort(key=lambda s: s.start_ns)
    return found


@dataclass
class KernelRow:
    """One kernel over all its runs (a row of `Profile.table`)."""

    kernel: dict[str, Any]
    calls: int = 0
    ns: int = 0
    peaks: Peaks | None = None

    @property
    def sized(self) -> bool:
        """Whether its FLOPs and bytes are known (not sized at run time)."""
        return self.kernel["bytes"] is not None

    @property
    def gflops(self) -> float | None:
        if not self.sized:
            return None
        return self.kernel["flops"] * self.calls / self.ns if self.ns else 0.0

    @property
    def gbps(self) -> float | None:
        if not self.sized:
            return None
        return self.kernel["bytes"] * self.calls / self.ns if self.ns else 0.0

    @property
    def intensity(self) -> float:
        """FLOPs per byte (the roofline's x axis)."""
        return self.kernel["flops"] / self.kernel["bytes"] if self.kernel["bytes"] else 0.0

    @property
    def bound(self) -> str:
        """ "compute" or "memory": the roofline limit of this kernel's intensity ("?":
        not sized)."""
        peaks = self.peaks
        if not self.sized:
            return "?"
        if peaks is None or not self.kernel["flops"]:
            return "memory"
        return "compute" if self.intensity * self.limit_gbps >= peaks.gflops else "memory"

    @property
    def limit_gbps(self) -> float:
        """The bandwidth the roofline allows a working set of this kernel's bytes."""
        return self.peaks.gbps_for(self.kernel["bytes"]) if self.peaks and self.sized else 0.0

    @property
    def percent_of_limit(self) -> float | None:
        """Achieved GFLOP/s over the roofline's attainable GFLOP/s (copies: GB/s over
        the peak bandwidth), in percent."""
        peaks, gflops, gbps = self.peaks, self.gflops, self.gbps
        if gflops is None or gbps is None:
            return None
        if peaks is None or self.ns == 0:
            return 0.0
        if not self.kernel["flops"]:
            return 100 * gbps / self.limit_gbps
        return 100 * gflops / min(peaks.gflops, self.intensity * self.limit_gbps)

    @property
    def where(self) -> str:
        """Its source lines, else the ONNX nodes it came from."""
        names = self.kernel.get("sources") or self.kernel.get("nodes") or []
        more = f" (+{len(names) - 2} more)" if len(names) > 2 else ""
        return ", ".join(names[:2]) + more if names else "(no source)"

    def facts(self) -> dict[str, Any]:
        """What the trace's events carry in `args`."""
        k = self.kernel
        return {
            "function": k["function"],
            "sources": k.get("sources", []),
            "onnx_nodes": k.get("nodes", []),
            "flops": k["flops"],
            "bytes": k["bytes"],
            "estimate_exact": k["exact"],
            "gflops_per_s": _rounded(self.gflops, 3),
            "gb_per_s": _rounded(self.gbps, 3),
            "bound": self.bound,
            "percent_of_limit": _rounded(self.percent_of_limit, 1),
            "parallel": k["parallel"],
            "schedules": k["schedules"],
            "tuned": k["tuned"],
        }


@dataclass
class Profile:
    """The kernels a module ran since the last `mod.profile()` (module docstring)."""

    kernels: list[dict[str, Any]]
    spans: list[Span]
    peaks: Peaks  # one thread's
    lost: int = 0
    threads: int = 1  # the module's: the limits of kernels with parallel loops scale
    rows: list[KernelRow] = field(default_factory=list)

    def __post_init__(self) -> None:
        by_id: dict[int, KernelRow] = {}
        for span in self.spans:
            kernel = self.kernels[span.kernel]
            if kernel["kind"] == "function":
                continue
            row = by_id.get(span.kernel)
            if row is None:
                peaks = self.peaks.scaled(self.threads if kernel["parallel"] else 1)
                row = by_id[span.kernel] = KernelRow(kernel, peaks=peaks)
            row.calls += 1
            row.ns += span.self_ns
        self.rows = sorted(by_id.values(), key=lambda r: -r.ns)

    @property
    def kernel_ns(self) -> int:
        """The time of all kernels (nothing counted twice)."""
        return sum(r.ns for r in self.rows)

    @property
    def call_ns(self) -> int:
        """The time of the outermost calls of compiled functions, from the first mark
        inside them to the last (argument checks and result boxing are outside)."""
        return sum(s.duration_ns for s in self.spans if s.depth == 0)

    def table(self, limit: int | None = None) -> str:
        """The kernels as text, slowest first (`limit`: that many rows)."""
        total = self.kernel_ns or 1
        head = (
            f"{'time ms':>9} {'%':>5} {'calls':>5}  {'kernel':<14} {'GFLOP/s':>8} "
            f"{'GB/s':>7}  {'bound':<7} {'% limit':>7}  {'tuned':<5}  source"
        )
        lines = [head]
        for row in self.rows[:limit]:
            lines.append(
                f"{row.ns / 1e6:9.3f} {100 * row.ns / total:5.1f} {row.calls:5d}  "
                f"{row.kernel['name']:<14} {_shown(row.gflops, 8, 2)} {_shown(row.gbps, 7, 2)}  "
                f"{row.bound:<7} {_shown(row.percent_of_limit, 7, 1)}  "
                f"{'yes' if row.kernel['tuned'] else 'no':<5}  {row.where}"
            )
        lines.append(
            f"kernels {self.kernel_ns / 1e6:.3f} ms of {self.call_ns / 1e6:.3f} ms in calls; "
            f"limits of one thread: {self.peaks.gflops:.1f} GFLOP/s, "
            f"{self.peaks.gbps:.1f} GB/s from memory ({self.peaks.cpu}; x{self.threads} "
            "for kernels with parallel loops)" + (f"; {self.lost} events lost" if self.lost else "")
        )
        return "\n".join(lines)

    def chrome_trace(self) -> dict[str, Any]:
        """The spans as Chrome trace events (`X`: complete events, in microseconds)."""
        origin = self.spans[0].start_ns if self.spans else 0
        rows = {id(r.kernel): r for r in self.rows}
        events: list[dict[str, Any]] = []
        for span in self.spans:
            kernel = self.kernels[span.kernel]
            row = rows.get(id(kernel))
            events.append(
                {
                    "name": kernel["name"],
                    "cat": kernel["kind"],
                    "ph": "X",
                    "ts": (span.start_ns - origin) / 1e3,
                    "dur": span.duration_ns / 1e3,
                    "pid": os.getpid(),
                    "tid": 1,
                    "args": row.facts() if row is not None else {},
                }
            )
        peaks = {
            "thread_gflops_per_s": self.peaks.gflops,
            "thread_gb_per_s_by_working_set": self.peaks.bandwidth,
            "threads": self.threads,
        }
        return {
            "traceEvents": events,
            "displayTimeUnit": "ms",
            "otherData": {"cpu": self.peaks.cpu, **peaks, "lost_events": self.lost},
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write `chrome_trace()` as JSON to `path` (OSError when it cannot)."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.chrome_trace(), f)


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _shown(value: float | None, width: int, digits: int) -> str:
    """`value` in a column of `width` ("?": unknown)."""
    return f"{'?':>{width}}" if value is None else f"{value:{width}.{digits}f}"
