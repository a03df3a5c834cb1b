"""Time what the graph superoptimizer (opt_level=3) does against opt_level=2.

    python tools/bench_superopt.py               # 1 thread (the stable number)
    python tools/bench_superopt.py --threads 2
    python tools/bench_superopt.py --sweep --threads 2 [--markdown FILE] [--only attention,W4]

`--sweep` (tools/superopt_sweep.py): opt_level 3 against 2 on attention, LSTM-step,
Inception and W0–W7 at 32 shape points, in alternating rounds, every ratio reported
(docs/superopt-sweep.md holds its table). The cases below without it:

Cases, each checked against opt_level=2's result:

- `attention, literal weights`: W11's block at (64, 128) with wq, wk, wv as literals
  (built in memory): the search merges the three projections and `fold-constants`
  folds the concatenated weights, so opt_level=3 runs one product instead of three;
- `LSTM step (W10)`: parameter weights; the search leaves the products alone (the
  per-call concatenation of four 1024×1024 weights costs more than it saves);
- `W10, merged by hand`: the merged product over weights concatenated per call, what
  the search would have produced; and over weights the caller passes concatenated.

Medians over ≥ 7 samples (tools/bench_common.median_seconds); compare ratios within a run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import superopt_sweep  # noqa: E402
from bench_common import median_seconds  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def literal(a: np.ndarray) -> str:
    rows = ", ".join(
        "<" + ", ".join(f"{v:.4f}: f32" for v in r) + f">: <{a.shape[1]} x f32>" for r in a
    )
    return f"<{rows}>: <{a.shape[0]} x {a.shape[1]} x f32>"


def attention_with_literals(s: int, d: int, rng: np.random.Generator) -> str:
    """W11's text at (s, d) with the three projection weights as literals."""
    text = (ROOT / "benchmarks" / "attention.dl").read_text()
    text = text.replace("128", str(s)).replace("512", str(d))
    text = text.replace("0.044194173824159216", repr(float(1 / np.sqrt(d))))
    x, w = f"<{s} x {d} x f32>", f"<{d} x {d} x f32>"
    text = text.replace(f"({x}, {w}, {w}, {w}) -> {x}", f"({x}) -> {x}")
    text = text.replace(f"%wq: {w}, %wk: {w}, %wv: {w}):", "):")
    text = text.replace(f"'entry(%x: {x}, ", f"'entry(%x: {x}")
    weights = "".join(
        f"    %{n} = literal {literal(rng.standard_normal((d, d)) * 0.05)}\n"
        for n in ("wq", "wk", "wv")
    )
    return text.replace("):\n    %q = dot", f"):\n{weights}    %q = dot", 1)


def lstm_merged(precat: bool) -> str:
    """W10 with the four products as one, over weights concatenated per call or passed
    concatenated by the caller."""
    text = (ROOT / "benchmarks" / "lstm_step.dl").read_text()
    t, w = "<64 x 1024 x f32>", "<1024 x 1024 x f32>"
    merged = [f"    %y = dot %x: {t}, %w: <1024 x 4096 x f32>"]
    merged += ["    %yt = transpose %y: <64 x 4096 x f32>"]
    for k, g in enumerate("fijo"):
        lo, hi = 1024 * k, 1024 * k + 1023
        merged += [f"    %{g}t = slice %yt: <4096 x 64 x f32> from {lo} upto {hi}"]
        merged += [f"    %{g} = transpose %{g}t: <1024 x 64 x f32>"]
    lines = [
        ln
        for ln in text.splitlines()
        if not ln.startswith(("    %f = dot", "    %i = dot", "    %j = dot", "    %o = dot"))
    ]
    at = next(i for i, ln in enumerate(lines) if ln.startswith("'entry"))
    if precat:
        lines[at - 1] = lines[at - 1].replace(f"{w}, {w}, {w}, {w}", "<1024 x 4096 x f32>")
        lines[at] = f"'entry(%x: {t}, %c: {t}, %w: <1024 x 4096 x f32>):"
    else:
        cat = f"%wf: {w}, %wi: {w}, %wj: {w}, %wo: {w}"
        merged.insert(0, f"    %w = concatenate {cat} along 1")
    return "\n".join(lines[: at + 1] + merged + lines[at + 1 :]) + "\n"


def leaves(value: object) -> list[np.ndarray]:
    return [np.asarray(v) for v in value] if isinstance(value, tuple) else [np.asarray(value)]


def run(
    name: str, text: str, entry: str, levels: Sequence[int], args: list[np.ndarray], threads: int
) -> list[float]:
    """Median seconds at each level; the results must match the first level's."""
    import dlc

    times: list[float] = []
    want: list[np.ndarray] | None = None
    for level in levels:
        module = dlc.compile(text, opt_level=level, num_threads=threads)
        fn = module[entry]
        got = leaves(fn(*args))
        want = want or got
        error = max(
            float(np.abs(g - w).max() / (np.abs(w).max() + 1e-30)) for g, w in zip(got, want)
        )
        times.append(median_seconds(fn, args))
        fired = module.pass_statistics().get("superoptimize", {}).get("substitutions applied", 0)
        check = "ok" if error < 1e-4 else f"MISMATCH {error:.2g}"
        print(f"{name:34} O{level} {times[-1] * 1e6:10.1f} µs  substitutions {fired}  {check}")
    return times


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sweep", action="store_true", help="O3 against O2 over 32 shape points")
    ap.add_argument("--only", help="with --sweep: programs whose name contains one of these")
    ap.add_argument("--budget", type=float, default=2.0, help="seconds of timing per point")
    ap.add_argument("--markdown", help="with --sweep: also write the table to this file")
    opts = ap.parse_args(argv)
    threads = opts.threads
    if opts.sweep:
        return sweep(threads, opts.budget, opts.only, opts.markdown)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 128)).astype(np.float32)
    o2, o3 = run(
        "attention, literal weights",
        attention_with_literals(64, 128, rng),
        "attention",
        (2, 3),
        [x],
        threads,
    )
    print(f"{'':34} opt_level 2 / 3: {o2 / o3:.2f}x")
    xs = [rng.standard_normal((64, 1024)).astype(np.float32) for _ in range(2)]
    ws = [(rng.standard_normal((1024, 1024)) * 0.03).astype(np.float32) for _ in range(4)]
    lstm = (ROOT / "benchmarks" / "lstm_step.dl").read_text()
    o2, o3 = run("LSTM step (W10)", lstm, "lstm_step", (2, 3), [*xs, *ws], threads)
    print(f"{'':34} opt_level 2 / 3: {o2 / o3:.2f}x")
    (cat,) = run(
        "W10 merged, concatenated per call",
        lstm_merged(False),
        "lstm_step",
        (2,),
        [*xs, *ws],
        threads,
    )
    wide = np.concatenate(ws, axis=1)
    (pre,) = run(
        "W10 merged, weights passed merged",
        lstm_merged(True),
        "lstm_step",
        (2,),
        [*xs, wide],
        threads,
    )
    print(f"{'':34} separate / merged per call {o2 / cat:.2f}x, / passed merged {o2 / pre:.2f}x")
    return 0


def sweep(threads: int, budget: float, only: str | None, markdown: str | None) -> int:
    """Run the sweep, printing each row as it is measured, then the table. Programs are
    compiled without the compile cache (DLC_CACHE=0: every compile time and statistic is
    a real compile's); the superoptimizer's cost table stays, so a second run measures
    no kernel."""
    import os
    import platform

    os.environ["DLC_CACHE"] = "0"

    from bench_host import cpu_model

    points = superopt_sweep.points()
    if only:
        points = [p for p in points if any(w in p.program for w in only.split(","))]
    mr, nr = superopt_sweep.tile()
    rows = []
    for p in points:
        rows.append(superopt_sweep.measure_point(p, threads, budget))
        print(superopt_sweep.table(rows[-1:], mr, nr)[-1], flush=True)
    host = f"{cpu_model()} ({platform.machine()}), {threads} thread(s), {budget:g} s per point"
    lines = [f"Host: {host}", "", *superopt_sweep.table(rows, mr, nr), ""]
    lines.append(superopt_sweep.summary(rows))
    print("\n".join(lines))
    if markdown:
        Path(markdown).write_text("\n".join(lines) + "\n")
    return 0 if all(r.error < 1e-3 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
