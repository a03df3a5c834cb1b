"""The roofline's two limits on this machine, measured once per host CPU and cached.

Peak FMA throughput: a JIT-compiled loop of `CHAINS` independent chains of vector fused
multiply-adds as wide as the CPU's widest float vector (AVX-512: 16 f32 lanes, AVX2: 8,
else 4), so neither latency nor anything but the FMA units limits it; 2 FLOPs per lane
per FMA. Bandwidth: the faster of a JIT-compiled read of an f32 array (`CHAINS` vector
sums, as wide as the FMAs) and NumPy's `add` of two arrays into a third (3 arrays
moved: STREAM's "add" count), at each of `WORKING_SETS` total sizes, from one that
stays in a core's L1 cache to one far beyond the last-level cache: a kernel's memory
limit is the
bandwidth of the smallest working set its bytes fit in (a cache-aware roofline; with
main memory's alone, a kernel whose data stays in cache would beat its "limit"). Both
run on one thread and keep the best of `REPEATS` runs; the limits of a kernel with
parallel loops are these times the threads the module may use (an upper bound for
bandwidth, which does not grow linearly).

The result is stored in `<compile cache dir>/peaks-<host cpu>.json` (through the
cache's owner-only checks) and measured again on another CPU, when the file is gone,
or when a profiled kernel beat a stored limit: a loaded machine measures lower peaks,
so `raised_peaks` measures again (once per process) and keeps the higher of each.
"""

from __future__ import annotations

import ctypes
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

CHAINS = 12
REPEATS = 5
FMA_ITERATIONS = 200_000
WORKING_SETS = (24 << 10, 192 << 10, 768 << 10, 3 << 20, 12 << 20, 96 << 20)


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


def _read_ir(lanes: int) -> str:
    """`@read(src, n, out, reps)`: `reps` sums of the `n` vectors at `src` (CHAINS | n)."""
    v = f"<{lanes} x float>"
    phis = "\n".join(
        f"  %a{k} = phi {v} [ %c{k}, %outer ], [ %b{k}, %loop ]" for k in range(CHAINS)
    )
    loads = "\n".join(
        f"  %i{k} = add i64 %i, {k}\n  %p{k} = getelementptr {v}, ptr %src, i64 %i{k}\n"
        f"  %x{k} = load {v}, ptr %p{k}, align 4\n  %b{k} = fadd {v} %a{k}, %x{k}"
        for k in range(CHAINS)
    )
    total = "".join(f"  %s{k} = fadd {v} %s{k - 1}, %b{k}\n" for k in range(1, CHAINS))
    carried = "\n".join(
        f"  %c{k} = phi {v} [ zeroinitializer, %entry ], [ %b{k}, %check ]" for k in range(CHAINS)
    )
    return f"""
define void @read(ptr %src, i64 %n, ptr %out, i64 %reps) {{
entry:
  br label %outer
outer:
  %r = phi i64 [ 0, %entry ], [ %q, %check ]
{carried}
  br label %loop
loop:
  %i = phi i64 [ 0, %outer ], [ %j, %loop ]
{phis}
{loads}
  %j = add i64 %i, {CHAINS}
  %more = icmp slt i64 %j, %n
  br i1 %more, label %loop, label %check
check:
  %q = add i64 %r, 1
  %again = icmp slt i64 %q, %reps
  br i1 %again, label %outer, label %done
done:
  %s0 = fadd {v} %b0, zeroinitializer
{total}  store {v} %s{CHAINS - 1}, ptr %out, align 4
  ret void
}}"""


def _jit(ir: str, name: str, argtypes: list[Any]) -> tuple[Any, Any]:
    """(the engine, which must outlive the function; function `name` of LLVM IR `ir`)."""
    import llvmlite.binding as llvm

    from dlc.runtime.jit import target_machine

    machine = target_machine(2)
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(ir), machine)
    engine.finalize_object()
    return engine, ctypes.CFUNCTYPE(None, *argtypes)(engine.get_function_address(name))


def _best(run: Callable[[], object]) -> float:
    """The shortest of `REPEATS` timings of `run()` in seconds."""
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def measure_fma(lanes: int) -> float:
    """Peak GFLOP/s of one thread (module docstring)."""
    engine, peak = _jit(_fma_ir(lanes), "peak", [ctypes.c_int64, ctypes.c_void_p])
    out = np.zeros(lanes, np.float32)
    seconds = _best(lambda: peak(FMA_ITERATIONS, out.ctypes.data))
    del engine
    return 2 * lanes * CHAINS * FMA_ITERATIONS / seconds / 1e9


def measure_bandwidth(total: int, lanes: int) -> float:
    """Peak GB/s of one thread on a working set of `total` bytes (module docstring);
    small sets repeat so that one timing lasts long enough."""
    repeats = max(1, (64 << 20) // total)
    n = total // 12
    a, b, c = np.ones(n, np.float32), np.ones(n, np.float32), np.empty(n, np.float32)

    def add() -> None:
        for _ in range(repeats):
            np.add(a, b, out=c)

    types = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64]
    engine, read = _jit(_read_ir(lanes), "read", types)
    vectors = total // (4 * lanes) // CHAINS * CHAINS
    src, out = np.ones(vectors * lanes, np.float32), np.zeros(lanes, np.float32)

    def stream() -> None:
        read(src.ctypes.data, vectors, out.ctypes.data, repeats)

    added = 3 * 4 * n * repeats / _best(add)
    streamed = 4 * lanes * vectors * repeats / _best(stream)
    del engine
    return max(added, streamed) / 1e9


def cache_path(cpu: str) -> Path:
    from dlc.runtime.cache import cache_dir

    return cache_dir() / f"peaks-{cpu}.json"


_KNOWN: dict[str, Peaks] = {}
_RAISED: set[str] = set()  # CPUs whose peaks this process measured again


def host_peaks() -> Peaks:
    """This CPU's peaks: remembered, read from the cache file, or measured (and stored)."""
    from dlc.runtime.cache import read_owned

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
        peaks = _measure(cpu, lanes)
        _store(path, peaks)
    _KNOWN[cpu] = peaks
    return peaks


def raised_peaks(old: Peaks) -> Peaks:
    """`old` (this CPU's) with each limit the higher of it and a new measurement, and
    stored: a profiled kernel beat a limit, so the machine was busy when `old` was
    measured. Measures once per process: later calls return what the first found."""
    cpu, lanes = _host()
    if cpu in _RAISED or (old.cpu, old.lanes) != (cpu, lanes):
        return _KNOWN.get(cpu, old)
    _RAISED.add(cpu)
    new = _measure(cpu, lanes)
    bandwidth = [
        (size, max(a, b)) for (size, a), (_, b) in zip(old.bandwidth, new.bandwidth, strict=True)
    ]
    peaks = Peaks(max(old.gflops, new.gflops), bandwidth, cpu, lanes)
    _store(cache_path(cpu), peaks)
    _KNOWN[cpu] = peaks
    return peaks


def _measure(cpu: str, lanes: int) -> Peaks:
    bandwidth = [(size, measure_bandwidth(size, lanes)) for size in WORKING_SETS]
    return Peaks(measure_fma(lanes), bandwidth, cpu, lanes)


def _store(path: Path, peaks: Peaks) -> None:
    from dlc.runtime.cache import write_owned

    try:
        write_owned(path, json.dumps(asdict(peaks)).encode())
    except OSError:
        pass  # an unwritable cache: measured again by the next process
