"""The runtime side of the superoptimizer's measured costs (`superoptimize{costs=...}`).

`install()` gives `dlc.passes.graph.superopt.measure` what a pass may not do itself
(the passes sit below the runtime): compile and time ops with dlc's own kernels
(opt_level 2, one thread; several kernels are timed in alternating rounds, one sample
of each per round, and each gets the median of its samples, so a change of load
between rounds shifts all of them alike), name the host the costs belong to, and read
and write the cost table through the compile cache's trust checks
(`dlc.runtime.cache.read_owned` / `write_owned`: owner-only, no symbolic link, 0700
directories, a 0600 file replaced atomically). `dlc.compile` and dlc-opt install it.
"""

from __future__ import annotations

import statistics
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dlc.passes.graph.superopt import measure

ROUNDS = 5  # alternating rounds at least (the median of 5 samples per kernel)
MAX_ROUNDS = 9
ROUND_SECONDS = 0.05  # keep adding rounds (up to MAX_ROUNDS) while under this per kernel
SAMPLE_SECONDS = 1e-3  # one sample repeats a short kernel's call to last this long


def host() -> dict[str, str]:
    """The CPU the costs are measured on: LLVM's name for it and its features."""
    import llvmlite.binding as llvm

    return {"cpu": llvm.get_host_cpu_name(), "features": llvm.get_host_cpu_features().flatten()}


Compile = Callable[[str], Callable[..., Any]]
COMPILER: list[Compile] = []  # `dlc.api.compile_kernel`, given to `install`


KERNELS: OrderedDict[str, Callable[[], Any]] = OrderedDict()  # the last ones compiled
KEPT_KERNELS = 32


def compiled(key: str) -> Callable[[], Any]:
    """A call of the kernel of cost-table key `key` on seeded random inputs (kept for
    the guard's second timing, `measure.CostTable.settle`)."""
    if key in KERNELS:
        KERNELS.move_to_end(key)
        return KERNELS[key]
    if not COMPILER:
        raise ValueError("superoptimize: dlc.superopt_costs.install() was not called")
    fn = COMPILER[0](measure.kernel_text(key))
    rng = np.random.default_rng(0)
    _, shapes, _ = measure.parse_key(key)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes[:2]]
    KERNELS[key] = lambda: fn(*args)
    while len(KERNELS) > KEPT_KERNELS:
        KERNELS.popitem(last=False)
    return KERNELS[key]


def measure_all(keys: Sequence[str]) -> list[float]:
    """Median nanoseconds of one call of the kernel of each of `keys`, timed in
    alternating rounds (module docstring)."""
    return time_calls([compiled(k) for k in keys])


CompileModule = Callable[[Any, str], Callable[..., Any]]
FUNCTIONS: list[CompileModule] = []  # compiles a graph module's function (`install`)
THREADS: list[int] = []  # the threads FUNCTIONS compiles for (`install`; default: dlc's)


def timing_context() -> str:
    """What a whole-function timing depends on besides the two modules: the threads
    the functions run on (the cost table is already the host CPU's)."""
    from dlc.options import check_threads

    return f"threads {THREADS[0] if THREADS else check_threads(None)}"


def time_functions(modules: Sequence[Any], name: str) -> list[float] | None:
    """Median nanoseconds of a call of function `name` of each graph module, compiled
    at opt_level 2 on the compile's threads and timed against each other in alternating
    rounds on the same seeded random inputs (the superoptimizer's timed guard,
    `superopt/timed.py`); None when no compiler was installed."""
    if not FUNCTIONS:
        return None
    calls = []
    for module in modules:
        fn = FUNCTIONS[0](module, name)
        args = random_arguments(module, name)
        calls.append(lambda fn=fn, args=args: fn(*args))
    return time_calls(calls)


def random_arguments(module: Any, name: str) -> list[np.ndarray]:
    """Seeded random values (`dlc.dtypes.random_values`, seed 0) for the parameters of
    function `name` (tensors: the guard times no other)."""
    from dlc.dialects.graph import FuncOp
    from dlc.dialects.graph_types import TensorType
    from dlc.dtypes import random_values

    (func,) = (
        f for f in module.body.block.ops if isinstance(f, FuncOp) and f.sym_name.data == name
    )
    types = [t for t in func.function_type.inputs.data if isinstance(t, TensorType)]
    assert len(types) == len(func.function_type.inputs.data), "the guard times tensors only"
    return random_values(((t.dt, t.dims) for t in types), 0)


def time_calls(calls: Sequence[Callable[[], Any]]) -> list[float]:
    """Median nanoseconds of each of `calls`, one sample of each per round."""
    repeats: list[int] = []
    for call in calls:  # warm-up, and how many calls make one sample
        start = time.perf_counter()
        call()
        once = max(time.perf_counter() - start, 1e-7)
        repeats.append(max(1, min(1000, int(SAMPLE_SECONDS / once))))
    samples: list[list[float]] = [[] for _ in calls]
    stop = time.perf_counter() + ROUND_SECONDS * len(calls)
    while len(samples[0]) < ROUNDS or (len(samples[0]) < MAX_ROUNDS and time.perf_counter() < stop):
        for call, n, out in zip(calls, repeats, samples, strict=True):
            start = time.perf_counter()
            for _ in range(n):
                call()
            out.append((time.perf_counter() - start) / n)
    return [statistics.median(s) * 1e9 for s in samples]


def measure_ns(key: str) -> float:
    """Median nanoseconds of one call of the kernel of `key` (`measure_all` of one)."""
    return measure_all([key])[0]


def default_path() -> Path:
    """`<compile cache dir>/superopt-costs-<host cpu>.json`: costs belong to one CPU."""
    from dlc.runtime.cache import cache_dir

    return cache_dir() / f"superopt-costs-{host()['cpu']}.json"


def read(path: Path) -> bytes | None:
    from dlc.runtime.cache import read_owned

    return read_owned(path)


def write(path: Path, data: bytes) -> None:
    from dlc.runtime.cache import write_owned

    write_owned(path, data)


class Runtime:
    """measure.Backend over this module's functions."""

    default_path = staticmethod(default_path)
    host = staticmethod(host)
    read = staticmethod(read)
    write = staticmethod(write)
    measure = staticmethod(measure_all)
    time_functions = staticmethod(time_functions)
    timing_context = staticmethod(timing_context)


def install(
    compile_kernel: Compile,
    compile_function: CompileModule | None = None,
    threads: int | None = None,
) -> None:
    """Let `superoptimize{costs=measured|table}` measure and use its cost table;
    `compile_kernel` compiles DLVM text at opt 2 on one thread and returns its @op
    (`dlc.api.compile_kernel`: the runtime side may not import the API);
    `compile_function(module, name)`, when given, compiles a graph module at opt 2 on
    the threads the program will run with and returns its function `name` (the timed
    guard, `time_functions`), for `threads` threads (default: dlc's default)."""
    COMPILER[:] = [compile_kernel]
    FUNCTIONS[:] = [compile_function] if compile_function is not None else []
    THREADS[:] = [] if threads is None else [threads]
    measure.provide(Runtime())
