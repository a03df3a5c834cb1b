"""What tools/bench.py and its peer modules share: the workload record, the timer and
the result check."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

MIN_SAMPLES = 7
SAMPLE_SECONDS = 2e-3
BUDGET_SECONDS = 0.5
SETTLE_SECONDS = 0.01
"""Pause between one system's samples and the next's: the OpenMP workers of the system
just timed (dlc's, libgomp's) spin for a millisecond or two after their last loop
before they sleep, and must not take the next system's cores while it is timed."""
TOLERANCE = 1e-3  # largest max_error a result may have and still count as matching

Arrays = list[np.ndarray]


@dataclass(frozen=True)
class Workload:
    """One BENCHMARKS.md row: a DLVM source, its inputs and a NumPy twin."""

    id: str
    title: str
    source: str  # relative to the repository root
    entry: str
    inputs: Callable[[np.random.Generator], Arrays]
    numpy: Callable[..., Any]
    flops: float | None = None
    chain: int = 0  # softmax applications in sequence (W2 only)
    # the last parameters, by name, bound to their inputs at compile time (weights the
    # program is compiled with, `dlc.compile(..., constants=)`); dlc's function takes
    # the others, the peers still take every input
    constants: tuple[str, ...] = ()

    @property
    def twin(self) -> str:
        """The id of the workload whose peer twins this one uses (W10c: W10's)."""
        return self.id.removesuffix("c")

    def bound(self, inputs: Arrays) -> tuple[dict[str, dict[str, Any]] | None, Arrays]:
        """(dlc.compile's `constants`, the inputs dlc's function takes)."""
        if not self.constants:
            return None, inputs
        free = len(inputs) - len(self.constants)
        return {self.entry: dict(zip(self.constants, inputs[free:], strict=True))}, inputs[:free]


def median_seconds(fn: Callable[..., Any], args: Sequence[Any]) -> float:
    """Median seconds per call: ≥ 7 samples of enough calls to last ≥ 2 ms, after a warm-up."""
    start = time.perf_counter()
    fn(*args)
    once = max(time.perf_counter() - start, 1e-7)
    inner = max(1, int(SAMPLE_SECONDS / once))
    samples: list[float] = []
    deadline = time.perf_counter() + BUDGET_SECONDS
    while len(samples) < MIN_SAMPLES or time.perf_counter() < deadline:
        start = time.perf_counter()
        for _ in range(inner):
            fn(*args)
        samples.append((time.perf_counter() - start) / inner)
        if len(samples) >= 200:
            break
    return statistics.median(samples)


def alternating_medians(
    calls: Sequence[Callable[[], Any]], budget: float = 2 * BUDGET_SECONDS
) -> list[float]:
    """Median seconds per call of each of `calls`, timed in turns (one sample of each,
    then the next round): on a loaded machine the systems compared see the same load,
    so their ratio holds where their times from separate windows would not. At least
    `MIN_SAMPLES` rounds of samples lasting ≥ 2 ms each, within `budget` seconds (the
    `SETTLE_SECONDS` pauses between samples are not counted)."""
    inner: list[int] = []
    for fn in calls:
        start = time.perf_counter()
        fn()
        inner.append(max(1, int(SAMPLE_SECONDS / max(time.perf_counter() - start, 1e-7))))
    samples: list[list[float]] = [[] for _ in calls]
    deadline = time.perf_counter() + budget
    while len(samples[0]) < MIN_SAMPLES or time.perf_counter() < deadline:
        for fn, n, own in zip(calls, inner, samples, strict=True):
            time.sleep(SETTLE_SECONDS)
            deadline += SETTLE_SECONDS
            start = time.perf_counter()
            for _ in range(n):
                fn()
            own.append((time.perf_counter() - start) / n)
        if len(samples[0]) >= 200:
            break
    return [statistics.median(s) for s in samples]


def leaves(result: Any) -> Arrays:
    """The outputs of one call as NumPy arrays (jax arrays and torch CPU tensors too)."""
    if isinstance(result, tuple | list):
        return [np.asarray(r) for r in result]
    return [np.asarray(result)]


def max_error(got: Any, want: Any) -> float:
    """Largest |got - want| / (1 + |want|) over all outputs (inf on a shape mismatch)."""
    worst = 0.0
    got_leaves, want_leaves = leaves(got), leaves(want)
    if len(got_leaves) != len(want_leaves):
        return float("inf")
    for g, w in zip(got_leaves, want_leaves, strict=True):
        if g.shape != w.shape:
            return float("inf")
        diff = np.abs(g.astype(np.float64) - w.astype(np.float64)) / (
            1 + np.abs(w.astype(np.float64))
        )
        worst = max(worst, float(np.nanmax(diff)) if diff.size else 0.0)
    return worst


Prepared = tuple[Callable[..., Any], Sequence[Any]]
"""A peer's twin of a workload, ready to time: call `fn(*args)`."""


class Peer(Protocol):
    """A system dlc is compared with: one column of the report."""

    name: str  # the column's short name, e.g. "ort"

    def installed(self) -> bool: ...

    def status(self) -> str:
        """One header line: version and the settings used (threads, spinning, ...)."""
        ...

    def prepare(self, w: Workload, inputs: Arrays) -> Prepared | None:
        """The workload's twin on this system, or None when it has none."""
        ...


def cell(dlc_s: float, peer_s: float | str) -> str:
    """A peer's table cell: its µs and dlc / peer, or the word saying why not."""
    if isinstance(peer_s, str):
        return f" {peer_s:>20}"
    return f" {peer_s * 1e6:10.1f} {dlc_s / peer_s:9.2f}"
