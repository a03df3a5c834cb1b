"""Time the gradient through DLVM's recursive `$Tree` classifier against the depth.

`python tools/bench_tree_grad.py [DEPTH ...]` (default 100 1000 10000) compiles
test/unit/recursive_tree.dl at opt_level 0 and times `@deep_grad` (a left-deep chain
built natively, then `@score_grad` through the recursion) and `@deep_score` (the
primal), best of 3, on a thread with a 256 MiB stack (the recursion is native). With
tapes (dlc/passes/graph/autodiff/differentiate_tape.py) the gradient is linear in the depth.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import dlc

TREE = Path(__file__).resolve().parent.parent / "test" / "unit" / "recursive_tree.dl"


def best_ms(call: Callable[[], Any], reps: int = 3) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(reps):
        start = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3, out


def run(depths: list[int]) -> None:
    mod = dlc.compile(TREE.read_text(), filename="recursive_tree.dl", opt_level=0)
    rng = np.random.default_rng(7)
    w, b, x = rng.normal(size=(4, 2)) * 0.5, rng.normal(size=(1, 2)) * 0.1, np.array([0.3, -0.2])
    mod.deep_grad(w, b, np.int64(2), x)  # warm
    for n in depths:
        grad_ms, (_, db) = best_ms(lambda n=n: mod.deep_grad(w, b, np.int64(n), x))
        score_ms, _ = best_ms(lambda n=n: mod.deep_score(w, b, np.int64(n), x))
        print(
            f"depth {n}: gradient {grad_ms:.1f} ms, score {score_ms:.1f} ms, "
            f"live boxes {mod.live_boxes()}, d/db {db.ravel()}",
            flush=True,
        )


def main(argv: list[str]) -> int:
    depths = [int(a) for a in argv] or [100, 1000, 10_000]
    old = threading.stack_size(256 << 20)
    try:
        thread = threading.Thread(target=run, args=(depths,))
        thread.start()
        thread.join()
    finally:
        threading.stack_size(old)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
