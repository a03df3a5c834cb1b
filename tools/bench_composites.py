"""Einsum and top-k (the graph dialect's composites) against the kernels they lower to
and NumPy, on one thread, best of 10 calls:

    python tools/bench_composites.py

- einsum `bik,bjk->bij` on 16 × 256 × 256 f32 next to the `dot` of a pre-transposed
  operand (the kernel the einsum becomes) and NumPy's matmul;
- topK (k = 5) of 64 rows of 100 f32 next to NumPy's partition + sort.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import dlc  # noqa: E402


def best(f: Callable[..., Any], *args: np.ndarray, n: int = 10) -> float:
    """The fastest of n calls, in ms (after one warm-up call)."""
    f(*args)
    times = []
    for _ in range(n):
        start = time.perf_counter()
        f(*args)
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def ty(*dims: int) -> str:
    return "<" + " x ".join(map(str, dims)) + " x f32>"


def einsum_row(b: int = 16, m: int = 256, k: int = 256, n: int = 256) -> str:
    a, w, c, wt = ty(b, m, k), ty(b, n, k), ty(b, m, n), ty(b, k, n)
    src = f"""module "bench"
stage raw

func @e: ({a}, {w}) -> {c} {{
'entry(%a: {a}, %b: {w}):
    %c = einsum "bik,bjk->bij" %a: {a}, %b: {w}
    return %c: {c}
}}

func @d: ({a}, {wt}) -> {c} {{
'entry(%a: {a}, %b: {wt}):
    %c = dot %a: {a}, %b: {wt}
    return %c: {c}
}}
"""
    rng = np.random.default_rng(0)
    x, y = rng.random((b, m, k), np.float32), rng.random((b, n, k), np.float32)
    mod = dlc.compile(src, num_threads=1)
    yt = np.ascontiguousarray(y.transpose(0, 2, 1))
    numpy = best(lambda p, q: p @ q.transpose(0, 2, 1), x, y)
    return (f"einsum bik,bjk->bij {b}x{m}x{k}x{n}: {best(mod.e, x, y):.2f} ms, "
            f"dot {best(mod.d, x, yt):.2f} ms, numpy matmul {numpy:.2f} ms")  # fmt: skip


def top_k_row(rows: int = 64, n: int = 100, k: int = 5) -> str:
    src = f"""module "bench"
stage raw

func @t: ({ty(rows, n)}) -> {ty(rows, k)} {{
'entry(%x: {ty(rows, n)}):
    %v = topK %x: {ty(rows, n)} count {k} along 1
    return %v: {ty(rows, k)}
}}
"""
    x = np.random.default_rng(1).random((rows, n), np.float32)
    mod = dlc.compile(src, num_threads=1)
    numpy = best(lambda v: np.sort(np.partition(v, n - k, axis=1)[:, n - k :], axis=1), x)
    return f"topK {rows}x{n} k={k}: {best(mod.t, x):.3f} ms, numpy partition+sort {numpy:.3f} ms"


if __name__ == "__main__":
    print(einsum_row())
    print(top_k_row())
