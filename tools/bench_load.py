"""dlc's workloads on busy cores: the default thread count against one thread, with one
busy process per core running beside the benchmark (a shared machine's conditions).

    python tools/bench_load.py                 # every tools/bench.py workload
    python tools/bench_load.py --only W1,W3    # a subset
    python tools/bench_load.py --busy 0        # the same table on idle cores

Per workload: dlc's median µs per call at one thread and at the default thread count
(DLC_NUM_THREADS, else the cores), both compiled before the busy processes start and
called in turn while they run, and default / one thread. A ratio above
`LIMIT` (1.5) is flagged: more threads than free cores must not make a program slower
than one thread would. Timings are medians of single calls; compare the ratios,
not absolute times, across runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import WORKLOADS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 1.5
SAMPLES = 300
BUDGET_SECONDS = 5.0


def busy_processes(count: int) -> list[subprocess.Popen[bytes]]:
    """`count` processes that keep one core each busy until killed."""
    spin = "while True:\n    pass\n"
    return [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(count)]


def alternating_medians(fns: Sequence[Callable[[], Any]]) -> list[float]:
    """Median seconds per call of each of `fns`, called in turn (one call each, then
    again) for `SAMPLES` rounds or `BUDGET_SECONDS`, so a change of load hits all
    alike."""
    samples: list[list[float]] = [[] for _ in fns]
    deadline = time.perf_counter() + BUDGET_SECONDS
    for fn in fns:  # warm-up
        fn()
    while len(samples[0]) < SAMPLES and time.perf_counter() < deadline:
        for fn, out in zip(fns, samples, strict=True):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return [statistics.median(s) for s in samples]


def main(argv: Sequence[str] | None = None) -> int:
    import dlc
    from dlc.runtime.native import default_threads

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated workload ids, e.g. W1,W3")
    parser.add_argument("--busy", type=int, default=None,
                        help="busy processes beside the benchmark (default: one per core)")  # fmt: skip
    args = parser.parse_args(argv)
    wanted = set(args.only.split(",")) if args.only else None
    threads = default_threads()
    busy = len(os.sched_getaffinity(0)) if args.busy is None else args.busy
    print(f"default threads: {threads}; busy processes beside the benchmark: {busy}")
    print(f"{'id':3} {'workload':24} {'1 thread µs':>12} {f'{threads} threads µs':>13} ratio")
    worst = 0.0
    for w in WORKLOADS:
        if wanted is not None and w.id not in wanted:
            continue
        text = (ROOT / w.source).read_text()
        inputs = w.inputs(np.random.default_rng(0))
        constants, own = w.bound(inputs)
        fns = []
        for n in (1, threads):
            compiled = dlc.compile(text, filename=w.source, num_threads=n, constants=constants)
            fn = compiled[w.entry]
            fns.append(lambda fn=fn, own=own: fn(*own))
        hogs = busy_processes(busy)
        try:
            one, many = alternating_medians(fns)
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
        ratio = many / one
        worst = max(worst, ratio)
        flag = "  SLOWER THAN ONE THREAD" if ratio > LIMIT else ""
        print(f"{w.id:3} {w.title:24} {one * 1e6:12.1f} {many * 1e6:13.1f} {ratio:5.2f}{flag}")
    print(f"worst default / one thread: {worst:.2f} (limit {LIMIT})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
