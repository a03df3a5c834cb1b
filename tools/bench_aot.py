"""Time ahead-of-time libraries: the export, and one call from C next to one from Python.

    python tools/bench_aot.py
    python tools/bench_aot.py --threads 1

For W0 (x + 1 on one float), the MLP (W3, B = 1) and the LSTM cell of `examples/`:
how long `CompiledModule.export` takes to write the `.so` (lowering, LLVM, linking:
the compile cache is not used), then the median time per call of the exported C
function from a C loop (a generated driver linked against the `.so`, `clock_gettime`
around batches of calls) and of the JIT-compiled function from Python (`dlc.compile`).
The calls run on the same inputs (small values, the same in both). Medians are over 7
batches after a warm-up; compare within one run (the machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dlc  # noqa: E402
from dlc.aot.signature import C_TYPES, CFunction, c_function  # noqa: E402
from dlc.program_levels import defined_functions  # noqa: E402

WORKLOADS = [
    ("W0", "benchmarks/call_overhead.dl", "add_one", 1_000_000),
    ("W3", "examples/mlp.dl", "mlp", 2_000),
    ("LSTM", "examples/lstm_cell.dl", "lstm_cell", 2_000),
]
"""(id, program, function, calls per batch)."""


def value(i: int) -> float:
    """The inputs of both sides: element i is ((i % 7) - 3) / 100."""
    return ((i % 7) - 3) / 100


def timing_driver(f: CFunction, header: str, calls: int) -> str:
    """C that fills the inputs, calls `f` in batches and prints the median ns per call."""
    lines = [
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "#include <time.h>",
        f'#include "{header}"',
    ]
    lines += ["static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);"]
    lines += ["  return t.tv_sec * 1e9 + t.tv_nsec; }"]
    lines += ["static int cmp(const void *a, const void *b) {"]
    lines += [
        "  double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }"
    ]
    lines += ["int main(void) {"]
    names = []
    for i, arg in enumerate(f.args):
        ctype, n = C_TYPES[arg.ttype.dt], arg.ttype.num_elements
        lines.append(f"  {ctype} *a{i} = malloc({n} * sizeof({ctype}));")
        lines.append(f"  for (int k = 0; k < {n}; k++) a{i}[k] = ((k % 7) - 3) / 100.0;")
        names.append(f"*a{i}" if arg.by_value else f"a{i}")
    call = f"{f.c_name}({', '.join(names)})"
    lines += [
        f"  for (int k = 0; k < {calls // 10 + 1}; k++) if ({call}) return 1;",
        "  double times[7];",
        "  for (int b = 0; b < 7; b++) {",
        "    double start = now();",
        f"    for (int k = 0; k < {calls}; k++) if ({call}) return 1;",
        f"    times[b] = (now() - start) / {calls};",
        "  }",
        "  qsort(times, 7, sizeof times[0], cmp);",
        '  printf("%.1f\\n", times[3]);',
        "  return 0;",
        "}",
    ]
    return "\n".join(lines) + "\n"


def python_ns(fn: object, args: list[np.ndarray], calls: int) -> float:
    """Median ns per call of a compiled function from Python."""
    for _ in range(calls // 10 + 1):
        fn(*args)  # type: ignore[operator]
    times = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)  # type: ignore[operator]
        times.append((time.perf_counter() - start) / calls * 1e9)
    return statistics.median(times)


def bench(wid: str, program: str, name: str, calls: int, out: Path) -> str:
    text = (ROOT / program).read_text()
    mod = dlc.compile(text, filename=program)
    lib = out / f"lib{wid.lower()}.so"
    start = time.perf_counter()
    mod.export(lib, entries=[name], prefix=wid.lower())
    export_s = time.perf_counter() - start
    f = c_function(defined_functions(dlc.parse(text, program))[name], wid.lower())
    source = out / f"{wid}.c"
    source.write_text(timing_driver(f, f"{wid.lower()}.h", calls))
    driver = out / wid
    subprocess.run(
        [
            "cc",
            "-O2",
            "-o",
            str(driver),
            str(source),
            f"-L{out}",
            f"-l{wid.lower()}",
            f"-Wl,-rpath,{out}",
        ],
        check=True,
    )
    c_ns = float(subprocess.run([str(driver)], check=True, capture_output=True, text=True).stdout)
    args = []
    for arg in f.params:
        flat = np.array([value(i) for i in range(arg.ttype.num_elements)])
        args.append(
            flat.astype(np.dtype(dlc.runtime.convention.NUMPY_DTYPES[arg.ttype.dt])).reshape(
                arg.ttype.dims
            )
        )
    py_ns = python_ns(mod[name], args, calls)
    return (
        f"| {wid} | {name} | {export_s * 1e3:.0f} ms | {c_ns / 1e3:.3f} µs | {py_ns / 1e3:.3f} µs |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, help="OMP_NUM_THREADS and DLC_NUM_THREADS")
    args = parser.parse_args(argv)
    if shutil.which("cc") is None:
        print("bench_aot: no C compiler 'cc'", file=sys.stderr)
        return 1
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = os.environ["DLC_NUM_THREADS"] = str(args.threads)
    print("| workload | function | export (.so) | call from C | call from Python (JIT) |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="dlc-bench-aot-") as out:
        for workload in WORKLOADS:
            print(bench(*workload, Path(out)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
