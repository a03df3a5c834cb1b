"""The roofline's two limits on this machine, measured once per host CPU and cached.

Peak FMA throughput: a JIT-compiled loop of `CHAINS` independent chains of vector fused
multiply-adds as wide as the CPU's widest float vector (AVX-512: 16 f32 lanes, AVX2: 8,
else 4), so neither latency nor anything but the FMA units limits it; 2 FLOPs per lane
per FMA. Bandwidth: NumPy's `add` of two f32 arrays into a third (3 arrays moved:
STREAM's "add" count) at each of `WORKING_SETS` total sizes, from one that stays in a
core's L2 cache to one far beyond the last-level cache: a kernel's memory limit is the
bandwidth of the smallest working set its bytes fit in (a cache-aware roofline; with
main memory's alone, a kernel whose data stays in cache would beat its "limit"). Both
run on one thread and keep the best of `REPEATS` runs; the limits of a kernel with
parallel loops are these times the threads the module may use (an upper bound for
bandwidth, which does not grow linearly).

The result is stored in `<compile cache dir>/peaks-<host cpu>.json` (through the
cache's owner-only checks) and measured again only on another CPU or when the file is
gone: a loaded machine measures lower peaks; delete the file to measure again.
"""

from __future__ import annotations

import ctypes
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

CHAINS = 12
REPEATS = 5
FMA_ITERATIONS = 200_000
WORKING_SETS = (192 << 10, 1536 << 10, 6 << 20, 96 << 20)


@dataclass(frozen=True)
class Peaks:
    """One thread's peak FMA throughput (GFLOP/s) and memory bandwidth (GB/s) on `cpu`,
    the bandwidth as (working set bytes, GB/s) from the smallest set to main memory."""

    gflops: float
    bandwidth: list[tuple[int, float]]
    cpu: str
    lanes: int

    @property
    def gbps(self) -> float:
        """Main memory's bandwidth (the largest working set's)."""
        return self.bandwidth[-1][1]

    def gbps_for(self, nbytes: int) -> float:
        """The bandwidth of the smallest working set holding `nbytes`."""
        return next((gbps for size, gbps in self.bandwidth if nbytes <= size), self.gbps)

    def scaled(self, threads: int) -> Peaks:
        """The limits of `threads` threads (module docstring)."""
        n = max(1, threads)
        bandwidth = [(size, gbps * n) for size, gbps in self.bandwidth]
        return Peaks(self.gflops * n, bandwidth, self.cpu, self.lanes)


def _host() -> tuple[str, int]:
    """(LLVM's name of the host CPU, f32 lanes of its widest vector FMA)."""
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features()
    lanes = 16 if features.get("avx512f") else 8 if features.get("fma") else 4
    return llvm.get_host_cpu_name(), lanes


def _fma_ir(lanes: int) -> str:
    v = f"<{lanes} x float>"
    phis = "\n".join(f"  %a{k} = phi {v} [ %x, %entry ], [ %b{k}, %loop ]" for k in range(CHAINS))
    fmas = "\n".join(
        f"  %b{k} = call {v} @llvm.fma.v{lanes}f32({v} %a{k}, {v} %y, {v} %z)"
        for k in range(CHAINS)
    )
    total = " ".join(f"%s{k} = fadd {v} %s{k - 1}, %b{k}\n " for k in range(1, CHAINS))
    return f"""
declare {v} @llvm.fma.v{lanes}f32({v}, {v}, {v})
define void @peak(i64 %n, ptr %out) {{
entry:
  %x = insertelement {v} zeroinitializer, float 1.0, i32 0
  %y = insertelement {v} zeroinitializer, float 0.5, i32 0
  %z = insertelement {v} zeroinitializer, float 0.25, i32 0
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %j, %loop ]
{phis}
{fmas}
  %j = add i64 %i, 1
  %more = icmp slt i64 %j, %n
  br i1 %more, label %loop, label %done
done:
  %s0 = fadd {v} %b0, zeroinitializer
 {total} store {v} %s{CHAINS - 1}, ptr %out, align 4
  ret void
}}
"""


def _best(run: object) -> float:
    """The shortest of `REPEATS` timings of `run()` in seconds."""
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        run()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def measure_fma(lanes: int) -> float:
    """Peak GFLOP/s of one thread (module docstring)."""
    import llvmlite.binding as llvm

    from dlc.runtime.jit import target_machine

    machine = target_machine(2)
    module = llvm.parse_assembly(_fma_ir(lanes))
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    peak = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)(
        engine.get_function_address("peak")
    )
    out = np.zeros(lanes, np.float32)
    seconds = _best(lambda: peak(FMA_ITERATIONS, out.ctypes.data))
    return 2 * lanes * CHAINS * FMA_ITERATIONS / seconds / 1e9


def measure_bandwidth(total: int) -> float:
    """Peak GB/s of one thread on a working set of `total` bytes (module docstring);
    small sets repeat the add so that one timing lasts long enough."""
    n = total // 12
    a, b, c = np.ones(n, np.float32), np.ones(n, np.float32), np.empty(n, np.float32)
    repeats = max(1, (64 << 20) // total)

    def run() -> None:
        for _ in range(repeats):
            np.add(a, b, out=c)

    return 3 * 4 * n * repeats / _best(run) / 1e9


def cache_path(cpu: str) -> Path:
    from dlc.runtime.cache import cache_dir

    return cache_dir() / f"peaks-{cpu}.json"


_KNOWN: dict[str, Peaks] = {}


def host_peaks() -> Peaks:
    """This CPU's peaks: remembered, read from the cache file, or measured (and stored)."""
    from dlc.runtime.cache import read_owned, write_owned

    cpu, lanes = _host()
    if cpu in _KNOWN:
        return _KNOWN[cpu]
    path = cache_path(cpu)
    try:
        data = read_owned(path)
        stored = json.loads(data) if data else None
        peaks = Peaks(**stored) if isinstance(stored, dict) else None
        if peaks is not None:
            peaks = Peaks(
                peaks.gflops, [(int(s), float(g)) for s, g in peaks.bandwidth], cpu, lanes
            )
    except (OSError, ValueError, TypeError):
        peaks = None  # unreadable or untrusted: measure again
    if peaks is None or peaks.cpu != cpu or peaks.lanes != lanes:
        bandwidth = [(size, measure_bandwidth(size)) for size in WORKING_SETS]
        peaks = Peaks(measure_fma(lanes), bandwidth, cpu, lanes)
        try:
            write_owned(path, json.dumps(asdict(peaks)).encode())
        except OSError:
            pass  # an unwritable cache: measured again by the next process
    _KNOWN[cpu] = peaks
    return peaks
