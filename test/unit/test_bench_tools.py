"""tools/bench.py's helpers: the BLAS and CPU reports, the ceiling's environment, and
the peer columns' words, all without any peer installed."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

import bench  # noqa: E402
import bench_host  # noqa: E402
from bench_common import TOLERANCE, Arrays, Prepared, Workload, max_error  # noqa: E402

OPENBLAS = {
    "user_api": "blas",
    "internal_api": "openblas",
    "prefix": "libscipy_openblas",
    "version": "0.3.31.188.0",
    "threading_layer": "pthreads",
    "architecture": "Haswell",
    "num_threads": 2,
}
OPENMP = {"user_api": "openmp", "internal_api": "openmp", "version": None, "num_threads": 2}


def test_blas_summary_names_library_kernel_and_threads() -> None:
    summary = bench_host.blas_summary([OPENMP, OPENBLAS])
    assert summary == "openblas 0.3.31.188.0, kernel Haswell, 2 threads (pthreads)"


def test_blas_summary_without_a_blas_says_so() -> None:
    assert bench_host.blas_summary([OPENMP]) == "no BLAS library found by threadpoolctl"


def test_blas_kernel_is_openblas_architecture() -> None:
    assert bench_host.blas_kernel([OPENMP, OPENBLAS]) == "Haswell"
    mkl = {"user_api": "blas", "internal_api": "mkl", "version": "2024", "num_threads": 2}
    assert bench_host.blas_kernel([mkl]) is None


def test_has_avx512_reads_the_flags_line() -> None:
    assert bench_host.has_avx512("model name\t: X\nflags\t\t: fpu sse2 avx2 avx512f avx512bw\n")
    assert not bench_host.has_avx512("flags\t\t: fpu sse2 avx2 avx512_vnni\n")
    assert not bench_host.has_avx512("model name\t: no flags here\n")


HOST = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "512", "HOME": "/root"}


def test_matmul_env_for_the_ceiling_picks_the_kernel_and_drops_the_cache_size() -> None:
    env = bench_host.matmul_env(HOST, 2, bench_host.CEILING_CORETYPE)
    assert env["OPENBLAS_CORETYPE"] == "SkylakeX"
    assert env["OPENBLAS_NUM_THREADS"] == "2"
    assert "OPENBLAS_L2_SIZE" not in env and env["HOME"] == "/root"
    assert HOST["OPENBLAS_CORETYPE"] == "Haswell"  # the caller's mapping is left alone


def test_matmul_env_for_the_host_kernel_sets_only_the_threads() -> None:
    env = bench_host.matmul_env(HOST, 1, None)
    assert env == {**HOST, "OPENBLAS_NUM_THREADS": "1"}


W0 = next(w for w in bench.WORKLOADS if w.id == "W0")


class FakePeer:
    """A peer whose installation and twin the test chooses."""

    name = "fake"

    def __init__(self, installed: bool, twin: Any) -> None:
        self._installed, self.twin = installed, twin

    def installed(self) -> bool:
        return self._installed

    def status(self) -> str:
        return "fake"

    def prepare(self, w: Workload, inputs: Arrays) -> Prepared | None:
        return None if self.twin is None else (self.twin, inputs)


def broken(x: np.ndarray) -> np.ndarray:
    raise RuntimeError("no kernel")


@pytest.mark.parametrize(
    ("installed", "twin", "word"),
    [
        (False, None, "not installed"),
        (True, None, "-"),
        (True, lambda x: x + 2, "mismatch"),
        (True, broken, "failed"),
    ],
)
def test_peer_cells_say_why_there_is_no_number(installed: bool, twin: Any, word: str) -> None:
    inputs = W0.inputs(np.random.default_rng(0))
    result = bench.time_peer(FakePeer(installed, twin), W0, inputs, W0.numpy(*inputs))
    assert result == word
    assert bench.cell(1e-6, result).strip() == word


def test_a_matching_peer_gets_a_time_and_a_ratio() -> None:
    inputs = W0.inputs(np.random.default_rng(0))
    seconds = bench.time_peer(FakePeer(True, W0.numpy), W0, inputs, W0.numpy(*inputs))
    assert isinstance(seconds, float) and seconds > 0
    assert bench.cell(2 * seconds, seconds).split()[-1] == "2.00"


def test_unknown_peer_names_are_refused() -> None:
    with pytest.raises(SystemExit, match="unknown peers"):
        bench.make_peers("np,tensorflow", threads=1, cores=1)


def test_bench_runs_w0_with_numpy_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--only", "W0", "--peers", "np", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "threads: 1 (" in out and "num_threads=1" in out
    row = next(line for line in out.splitlines() if line.startswith("W0 "))
    assert row.endswith("ok")


@pytest.mark.parametrize("name", ["ort", "jax", "torch"])
def test_installed_peer_twins_match_numpy(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every twin of an installed peer computes what the NumPy twin computes (the peers
    come with the bench extra, not the test extra: skipped without them)."""
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    cores = len(os.sched_getaffinity(0))
    peer = bench.make_peers(name, threads=cores, cores=cores)[0]
    if not peer.installed():
        pytest.skip(f"{name} is not installed (pip install -e '.[bench]')")
    for w in bench.WORKLOADS:
        inputs = w.inputs(np.random.default_rng(0))
        prepared = peer.prepare(w, inputs)
        assert prepared is not None, f"{name} has no twin of {w.id} {w.title}"
        fn, args = prepared
        assert max_error(fn(*args), w.numpy(*inputs)) < TOLERANCE, f"{name}: {w.id} {w.title}"
