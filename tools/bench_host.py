"""The machine side of tools/bench.py: which BLAS kernel NumPy runs and on how many
threads (threadpoolctl, optional), whether the CPU has AVX-512, and the W4 ceiling:
NumPy's matmul 1024³ on OpenBLAS's AVX-512 kernel (`OPENBLAS_CORETYPE=SkylakeX`),
measured in a subprocess of the same run because OpenBLAS picks its kernel once, when
it loads.

    python tools/bench_host.py --matmul-gflops 2   # what the subprocess runs: one JSON line
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from bench_common import median_seconds

MATMUL_FLOPS = 2.0 * 1024**3
CEILING_CORETYPE = "SkylakeX"


def has_avx512(cpuinfo: str) -> bool:
    """Whether the `flags` line of /proc/cpuinfo text lists avx512f."""
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return "avx512f" in line.split()
    return False


def cpu_model() -> str:
    """The `model name` of /proc/cpuinfo (the platform's processor name elsewhere)."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def host_has_avx512() -> bool:
    try:
        return has_avx512(Path("/proc/cpuinfo").read_text())
    except OSError:
        return False


def blas_summary(info: list[dict[str, Any]]) -> str:
    """The BLAS libraries of a `threadpoolctl.threadpool_info()` list, one phrase each:
    library, version, kernel (OpenBLAS's `architecture`), threads, threading layer."""
    phrases = []
    for lib in info:
        if lib.get("user_api") != "blas":
            continue
        kernel = f", kernel {lib['architecture']}" if lib.get("architecture") else ""
        layer = f" ({lib['threading_layer']})" if lib.get("threading_layer") else ""
        phrases.append(
            f"{lib.get('internal_api', '?')} {lib.get('version') or '?'}{kernel},"
            f" {lib.get('num_threads', '?')} threads{layer}"
        )
    return "; ".join(phrases) or "no BLAS library found by threadpoolctl"


def blas_kernel(info: list[dict[str, Any]]) -> str | None:
    """The kernel (`architecture`) of the first OpenBLAS in a threadpool_info() list."""
    for lib in info:
        if lib.get("internal_api") == "openblas" and lib.get("architecture"):
            return str(lib["architecture"])
    return None


def blas_info() -> list[dict[str, Any]] | None:
    """threadpoolctl's view of the loaded BLAS, or None when threadpoolctl is missing."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    return threadpool_info()


def numpy_blas() -> str:
    info = blas_info()
    if info is None:
        return "OpenBLAS kernel and threads unknown (threadpoolctl is not installed)"
    return blas_summary(info)


def blas_threads(threads: int) -> contextlib.AbstractContextManager[Any]:
    """Run NumPy's BLAS on `threads` threads inside the block (needs threadpoolctl;
    without it, OpenBLAS keeps its default: every core, or OPENBLAS_NUM_THREADS)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=threads, user_api="blas")


def matmul_env(environ: Mapping[str, str], threads: int, coretype: str | None) -> dict[str, str]:
    """A subprocess's environment: OpenBLAS on `threads` threads, with kernel
    `coretype` (None: the kernel `environ` gets, e.g. the host's OPENBLAS_CORETYPE)."""
    env = dict(environ)
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    if coretype is not None:
        env.pop("OPENBLAS_L2_SIZE", None)  # a cache size set for another kernel mistunes it
        env["OPENBLAS_CORETYPE"] = coretype
    return env


def matmul_gflops() -> float:
    """GFLOP/s of NumPy's matmul 1024³ in this process, as BLAS is configured now."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((1024, 1024)).astype(np.float32) for _ in range(2))
    return MATMUL_FLOPS / median_seconds(np.matmul, [a, b]) / 1e9


def matmul_subprocess(threads: int, coretype: str | None) -> tuple[float, str | None]:
    """GFLOP/s of NumPy's matmul 1024³ in a subprocess on `threads` threads with
    OpenBLAS kernel `coretype` (see matmul_env), and the kernel OpenBLAS reports there
    (None without threadpoolctl); RuntimeError when it fails."""
    try:
        result = subprocess.run(
            [sys.executable, __file__, "--matmul-gflops", str(threads)],
            env=matmul_env(os.environ, threads, coretype),
            capture_output=True,
            text=True,
            timeout=300,
        )
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"no result after {e.timeout} s") from e
    if result.returncode != 0 or not result.stdout.strip():
        errors = result.stderr.strip().splitlines()
        raise RuntimeError(errors[-1] if errors else f"exit status {result.returncode}")
    data = json.loads(result.stdout.strip().splitlines()[-1])
    return float(data["gflops"]), data["kernel"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matmul-gflops", type=int, metavar="THREADS", required=True)
    args = parser.parse_args(argv)
    with blas_threads(args.matmul_gflops):
        info = blas_info()
        kernel = None if info is None else blas_kernel(info)
        print(json.dumps({"gflops": matmul_gflops(), "kernel": kernel}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
