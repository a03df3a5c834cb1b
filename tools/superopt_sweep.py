"""The superoptimizer's sweep (`python tools/bench_superopt.py --sweep`): opt_level 3
against opt_level 2 on the attention, LSTM-step and Inception programs and W0–W7, each
at several shapes, some multiples of the register tile (MR rows × NR columns: 6 × 16 on
AVX2, 12 × 32 on AVX-512) and some not. Each point compiles the program at both levels
(weights bound at compile time where the program says so), checks that the results
agree, times the two functions in alternating rounds (tools/bench_common) and reports
their ratio, the products each level runs, whether the two compiled to the same LLVM IR
and what the guard of `superoptimize` did. Each round also times O2 a second time (the
O2 / O2 control); a point whose control is off by more than 3 % was disturbed by other
work on the machine and is timed again (up to ATTEMPTS times, keeping the timing whose
control is closest to 1).
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from bench_common import MIN_SAMPLES, SAMPLE_SECONDS, max_error

ROOT = Path(__file__).resolve().parents[1]
ATTEMPTS = 3  # timings of a point at most, while its O2 / O2 control is off by > 3 %
TYPE = re.compile(r"<((?:\d+ x )+)([a-z]\w*)>")


def resize(text: str, dims: dict[int, int], extra: dict[str, str] | None = None) -> str:
    """`text` with every dimension `d` of a tensor type replaced by `dims[d]`, then the
    literal replacements `extra` (constants that follow a size, such as 1/√d)."""

    def one(m: re.Match[str]) -> str:
        sizes = [dims.get(int(d), int(d)) for d in m.group(1).split(" x ")[:-1]]
        return "<" + "".join(f"{d} x " for d in sizes) + m.group(2) + ">"

    text = TYPE.sub(one, text)
    for old, new in (extra or {}).items():
        text = text.replace(old, new)
    return text


@dataclass(frozen=True)
class Point:
    """One program at one shape."""

    program: str  # the sweep's name for it (W-number or family)
    shape: str  # what was varied, e.g. "x 112×448"
    text: str
    entry: str
    constants: tuple[str, ...]  # the last parameters, bound at compile time
    mn: tuple[int, int]  # rows and columns of its main product (for the tile column)


def program(name: str) -> str:
    return (ROOT / name).read_text()


def attention(s: int, d: int) -> Point:
    scale = {"0.044194173824159216": repr(float(1 / np.sqrt(d)))}
    text = resize(program("benchmarks/attention.dl"), {128: s, 512: d}, scale)
    return Point("attention (W11c)", f"x {s}×{d}", text, "attention", ("wq", "wk", "wv"), (s, d))


def lstm_step(b: int, h: int) -> Point:
    text = resize(program("benchmarks/lstm_step.dl"), {64: b, 1024: h})
    return Point(
        "LSTM step (W10c)", f"x {b}×{h}", text, "lstm_step", ("wf", "wi", "wj", "wo"), (b, h)
    )


def inception(hw: int) -> Point:
    text = resize(program("benchmarks/inception.dl"), {28: hw})
    return Point("Inception 3a (W12)", f"x 1×192×{hw}×{hw}", text, "inception", (), (192, hw * hw))


def plain(
    wid: str, path: str, entry: str, dims: dict[int, int], mn: tuple[int, int], **kw: str
) -> Point:
    shape = ", ".join(f"{a}→{b}" if a != b else str(a) for a, b in dims.items())
    return Point(wid, shape, resize(program(path), dims, kw or None), entry, (), mn)


def points() -> list[Point]:
    """The sweep: 32 points."""
    out = [attention(s, d) for s, d in SHAPES_ATTENTION]
    out += [lstm_step(b, h) for b, h in SHAPES_LSTM]
    out += [inception(hw) for hw in (28, 24, 17, 14)]
    out += [
        plain("W0", "benchmarks/call_overhead.dl", "add_one", {1: 1}, (1, 1)),
        plain("W0", "benchmarks/call_overhead.dl", "add_one", {1: 1000}, (1, 1000)),
        plain("W1", "benchmarks/lstm_tail.dl", "lstm_tail", {64: 64, 1024: 1024}, (64, 1024)),
        plain("W1", "benchmarks/lstm_tail.dl", "lstm_tail", {64: 60, 1024: 1000}, (60, 1000)),
        plain("W2", "benchmarks/softmax_chain20.dl", "softmax_chain", {1000: 1000}, (1, 1000)),
        plain("W2", "benchmarks/softmax_chain20.dl", "softmax_chain", {1000: 1024}, (1, 1024)),
        plain("W3", "benchmarks/mlp_b64.dl", "mlp", {64: 48}, (48, 256)),
        plain("W3", "benchmarks/mlp_b64.dl", "mlp", {64: 50}, (50, 256)),
        plain("W4", "benchmarks/matmul.dl", "matmul", {1024: 384}, (384, 384)),
        plain("W4", "benchmarks/matmul.dl", "matmul", {1024: 250}, (250, 250)),
        plain("W5", "benchmarks/conv2d.dl", "conv2d", {56: 28}, (64, 28 * 28)),
        plain("W5", "benchmarks/conv2d.dl", "conv2d", {56: 30}, (64, 30 * 30)),
        plain(
            "W6", "benchmarks/mlp_train.dl", "train_step", {64: 48}, (48, 256), **{"-64.0": "-48.0"}
        ),
        plain(
            "W6", "benchmarks/mlp_train.dl", "train_step", {64: 50}, (50, 256), **{"-64.0": "-50.0"}
        ),
        plain(
            "W7", "benchmarks/layernorm_gelu.dl", "layernorm_gelu", {128: 96, 768: 768}, (96, 768)
        ),
        plain(
            "W7",
            "benchmarks/layernorm_gelu.dl",
            "layernorm_gelu",
            {128: 100, 768: 750},
            (100, 750),
            **{"768.0": "750.0"},
        ),
    ]
    return out


# attention: the benchmark's shape, the 112×448, multiples of 6×16 and not
SHAPES_ATTENTION = (
    (128, 512),
    (112, 448),
    (96, 384),
    (120, 480),
    (100, 400),
    (72, 288),
    (64, 256),
    (50, 200),
)
SHAPES_LSTM = ((64, 256), (48, 256), (60, 240), (50, 250))


def tile() -> tuple[int, int]:
    """(MR, NR) of this host's register tile (dlc/passes/tensor/schedule_policy.py)."""
    from dlc.passes.tensor.schedule_policy import ROWS, ROWS_32
    from dlc.target import Target

    lanes = Target.host().vector_bytes // 4
    return (ROWS_32 if lanes == 16 else ROWS), 2 * lanes


DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}


def inputs(fn: Any, rng: np.random.Generator) -> list[np.ndarray]:
    """Random arrays for every parameter of the graph function `fn` (its types)."""
    from dlc.dialects.graph_types import TensorType  # type: ignore[attr-defined]

    out = []
    for t in fn.function_type.inputs.data:
        assert isinstance(t, TensorType)
        out.append((rng.standard_normal(t.dims) * 0.1).astype(DTYPES[t.dt]))
    return out


@dataclass
class Row:
    point: Point
    o2_us: float
    o3_us: float
    control: float  # O2 / O2: the same function timed in two places of each round
    products: tuple[int, int]
    guard: str
    compile_s: tuple[float, float]
    measured: int
    measuring_ms: int
    error: float
    same_code: bool  # O3 compiled to the LLVM IR O2 did: any ratio but 1 is noise
    attempts: int  # timings of the point (again while the control was off by > 3 %)

    @property
    def ratio(self) -> float:
        return self.o2_us / self.o3_us

    @property
    def code_differs(self) -> bool:
        return not self.same_code


def products(compiled: Any) -> int:
    graph = compiled.ir("graph")
    return graph.count("= dot ") + graph.count("= convolve ")


def guard_of(stats: dict[str, int]) -> str:
    """What the guard did, from the pass statistics."""
    said = [k.removeprefix("guard: ") for k in stats if k.startswith("guard: ")]
    return "; ".join(said) if said else "no rewrite found"


def rotating_medians(calls: Sequence[Callable[[], Any]], budget: float) -> list[float]:
    """Median seconds per call of each of `calls`, timed in rounds (one sample of each,
    a sample lasting ≥ 2 ms) whose order rotates, so no call always runs first or
    after the same other: at least MIN_SAMPLES rounds per order, within `budget`."""
    repeats = []
    for fn in calls:
        start = time.perf_counter()
        fn()
        repeats.append(max(1, int(SAMPLE_SECONDS / max(time.perf_counter() - start, 1e-7))))
    samples: list[list[float]] = [[] for _ in calls]
    deadline = time.perf_counter() + budget
    rounds = 0
    while rounds < MIN_SAMPLES * len(calls) or (time.perf_counter() < deadline and rounds < 300):
        order = list(range(len(calls)))
        order = order[rounds % len(calls) :] + order[: rounds % len(calls)]
        for i in order:
            start = time.perf_counter()
            for _ in range(repeats[i]):
                calls[i]()
            samples[i].append((time.perf_counter() - start) / repeats[i])
        rounds += 1
    return [statistics.median(s) for s in samples]


def measure_point(p: Point, threads: int, budget: float, seed: int = 0) -> Row:
    import dlc

    rng = np.random.default_rng(seed)
    module = dlc.parse(p.text)
    fn = next(f for f in module.ops if getattr(f, "sym_name", None) and f.sym_name.data == p.entry)
    args = inputs(fn, rng)
    free = len(args) - len(p.constants)
    constants = {p.entry: dict(zip(p.constants, args[free:], strict=True))} if p.constants else None
    compiled, seconds = [], []
    for level in (2, 3):
        start = time.perf_counter()
        compiled.append(
            dlc.compile(p.text, opt_level=level, num_threads=threads, constants=constants)
        )
        seconds.append(time.perf_counter() - start)
    calls: list[Callable[[], Any]] = [lambda m=m: m[p.entry](*args[:free]) for m in compiled]
    error = max_error(calls[1](), calls[0]())
    best: tuple[float, float, float] | None = None
    attempts = 0
    while attempts < ATTEMPTS and (best is None or abs(best[0] / best[2] - 1) > 0.03):
        attempts += 1
        timing = rotating_medians([calls[0], calls[1], calls[0]], budget)
        if best is None or abs(timing[0] / timing[2] - 1) < abs(best[0] / best[2] - 1):
            best = (timing[0], timing[1], timing[2])
    o2, o3, again = best
    stats = compiled[1].pass_statistics().get("superoptimize", {})
    return Row(
        p,
        o2 * 1e6,
        o3 * 1e6,
        o2 / again,
        (products(compiled[0]), products(compiled[1])),
        guard_of(stats),
        (seconds[0], seconds[1]),
        stats.get("costs measured", 0),
        stats.get("measuring (ms)", 0),
        error,
        compiled[0].ir("llvm") == compiled[1].ir("llvm"),
        attempts,
    )


def table(rows: Sequence[Row], mr: int, nr: int) -> list[str]:
    """The report as Markdown table lines."""
    head = [
        f"| program | shape | multiple of {mr}×{nr} | products O2 → O3 | O2 µs | O3 µs | O2 / O3 "
        "| O2 / O2 | code | guard | compile O2 / O3 s (measured, ms) | check |",
        "|---|---|---|---|---:|---:|---:|---:|---|---|---|---|",
    ]
    lines = []
    for r in rows:
        m, n = r.point.mn
        fits = "yes" if m % mr == 0 and n % nr == 0 else "no"
        check = "ok" if r.error < 1e-3 else f"MISMATCH {r.error:.2g}"
        ratio = f"{r.ratio:.2f}" if r.ratio >= 0.97 else f"**{r.ratio:.2f}**"
        lines.append(
            f"| {r.point.program} | {r.point.shape} | {fits} | {r.products[0]} → {r.products[1]} "
            f"| {r.o2_us:,.0f} | {r.o3_us:,.0f} | {ratio} | {r.control:.2f} "
            f"| {'same' if r.same_code else 'differs'} | {r.guard} "
            f"| {r.compile_s[0]:.1f} / {r.compile_s[1]:.1f} ({r.measured}, {r.measuring_ms}) | {check} |"
        )
    return head + lines


def summary(rows: Sequence[Row]) -> str:
    worst = min(rows, key=lambda r: r.ratio)
    slower = [r for r in rows if r.ratio < 0.97]
    noise = max(abs(r.control - 1) for r in rows)
    same = sum(r.same_code for r in slower)
    return (
        f"{len(rows)} points; O2 / O3 from {worst.ratio:.2f} ({worst.point.program}, "
        f"{worst.point.shape}) to {max(r.ratio for r in rows):.2f}; "
        f"{len(slower)} points where O3 is more than 3 % slower ({same} of them run the "
        f"code O2 runs); {sum(r.code_differs for r in rows)} points where O3 changed the "
        f"code; the O2 / O2 control is off by up to {noise:.0%} (the noise of these "
        f"timings; {sum(r.attempts > 1 for r in rows)} points timed again because it was "
        "off by more than 3 %)"
    )
