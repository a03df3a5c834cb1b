"""A C library of BERT with a symbolic sequence length, called from C at several lengths.

    python tools/aot_dynamic.py                              # BERT-base: 12 layers
    python tools/aot_dynamic.py --layers 2 --lengths 7,64,128 --threads 1 --keep out/

The model is `onnx_workloads.bert_layer(layers=N, dynamic=True)` (hidden 768, 12 heads,
random weights; inputs `input_ids` and `position_ids` [1, seq]), saved as `bert.onnx`
and compiled once by `dlc-compile bert.onnx -o libbert.so --dynamic` (wall seconds
reported). `DRIVER` (C, written as `driver.c` and built with the system compiler
against the library) takes the length, reads the two inputs from raw files, sizes an
arena once with `bert_bert_arena_bytes(seq)`, calls `bert_bert_with_arena` (a status is
printed with `bert_status_message`), writes the output and prints the median ms of
`--calls` calls. Per length, in `--rounds` turns with onnxruntime (so both see the
same load of a shared machine): the medians of the two sides (`intra_op_num_threads`
= `--threads`, `OMP_NUM_THREADS` for the C program), their ratio, and the largest
difference of the C output from onnxruntime's relative to its largest value.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "bert.h"

static void *load(const char *path, size_t bytes) {
  FILE *f = fopen(path, "rb");
  void *data = malloc(bytes ? bytes : 1);
  if (f == NULL || fread(data, 1, bytes, f) != bytes) { perror(path); exit(2); }
  fclose(f);
  return data;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* ./driver SEQ IDS.bin POSITIONS.bin OUT.bin CALLS */
int main(int argc, char **argv) {
  if (argc != 6) return 2;
  int64_t seq = strtoll(argv[1], NULL, 10);
  int calls = atoi(argv[5]);
  int64_t *ids = load(argv[2], seq * sizeof(int64_t));
  int64_t *positions = load(argv[3], seq * sizeof(int64_t));
  size_t count = (size_t)seq * 768;
  float *out = malloc(count * sizeof(float));
  size_t arena_bytes = bert_bert_arena_bytes(seq);  /* 0: a bad size, reported below */
  void *arena = malloc(arena_bytes ? arena_bytes : 1);
  double *ms = malloc(calls * sizeof(double));
  for (int i = 0; i < calls; i++) {
    double start = now_ms();
    int32_t status = bert_bert_with_arena(arena, arena_bytes, seq, ids, positions, out);
    ms[i] = now_ms() - start;
    if (status != 0) {
      printf("status %d: %s\n", (int)status, bert_status_message(status));
      return 3;
    }
  }
  qsort(ms, calls, sizeof(double), by_value);
  printf("%.3f\n", ms[calls / 2]);
  FILE *f = fopen(argv[4], "wb");
  fwrite(out, sizeof(float), count, f);
  fclose(f);
  return 0;
}
"""
"""The driver: a C program a user would write against `bert.h`."""


def export(out: Path, layers: int) -> float:
    """`bert.onnx` and `libbert.so` + `bert.h` in `out` (dlc-compile); the wall seconds."""
    import onnx
    import onnx_workloads

    from dlc.cli import dlc_compile

    model = onnx_workloads.bert_layer(layers=layers, dynamic=True)
    model.graph.name = "bert"  # the C function: bert_bert
    onnx.save(model, str(out / "bert.onnx"))
    start = time.perf_counter()
    argv = [str(out / "bert.onnx"), "-o", str(out / "libbert.so"), "--dynamic"]
    if dlc_compile.main(argv) != 0:
        raise SystemExit("dlc-compile failed")
    return time.perf_counter() - start


def build(out: Path) -> Path:
    (out / "driver.c").write_text(DRIVER)
    command = ["cc", "-O2", "-o", str(out / "driver"), str(out / "driver.c")]
    command += [f"-L{out}", "-lbert", f"-Wl,-rpath,{out}"]
    subprocess.run(command, check=True)
    return out / "driver"


def run_length(out: Path, driver: Path, seq: int, calls: int, threads: int) -> tuple[float, Path]:
    """The C program at length `seq`: its median ms per call and its output file."""
    import onnx_workloads

    onnx_workloads.bert_inputs(length=seq).tofile(out / "ids.bin")
    np.arange(seq, dtype=np.int64).tofile(out / "positions.bin")
    result = out / f"out{seq}.bin"
    args = [str(driver), str(seq), str(out / "ids.bin"), str(out / "positions.bin")]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    done = subprocess.run(
        [*args, str(result), str(calls)], capture_output=True, text=True, env=env, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"driver at seq {seq}: {done.stdout}{done.stderr}")
    return float(done.stdout), result


def onnxruntime_session(out: Path, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(out / "bert.onnx"), options)


def onnxruntime_run(session: Any, seq: int, calls: int) -> tuple[float, np.ndarray]:
    """onnxruntime at length `seq`: its median ms per call and its output."""
    import onnx_workloads

    feed = {
        "input_ids": onnx_workloads.bert_inputs(length=seq),
        "position_ids": np.arange(seq, dtype=np.int64)[None],
    }
    expected = session.run(None, feed)[0]
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        session.run(None, feed)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), expected


def measure(out: Path, driver: Path, session: Any, seq: int, args: Any) -> str:
    """The table row of length `seq`: the two sides timed in turns, `--rounds` times."""
    c_times, ort_times = [], []
    for _ in range(args.rounds):
        c_ms, result = run_length(out, driver, seq, args.calls, args.threads)
        ort_ms, expected = onnxruntime_run(session, seq, args.calls)
        c_times.append(c_ms)
        ort_times.append(ort_ms)
    got = np.fromfile(result, np.float32).reshape(expected.shape)
    diff = float(np.abs(got - expected).max() / np.abs(expected).max())
    c_ms, ort_ms = statistics.median(c_times), statistics.median(ort_times)
    return f"| {seq} | {c_ms:.1f} | {ort_ms:.1f} | {c_ms / ort_ms:.2f} | {diff:.1e} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--lengths", default="7,64,128", help="comma-separated")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--calls", type=int, default=3, help="calls timed per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both sides per length")
    parser.add_argument("--keep", metavar="DIR", help="write the files here (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="aot-dynamic-") as scratch:
        out = Path(args.keep or scratch)
        out.mkdir(parents=True, exist_ok=True)
        seconds = export(out, args.layers)
        print(f"dlc-compile --dynamic: {seconds:.1f} s ({args.layers} layers)")
        driver = build(out)
        session = onnxruntime_session(out, args.threads)
        print("| seq | C library ms | onnxruntime ms | C / onnxruntime | max diff / max |")
        print("|---:|---:|---:|---:|---:|")
        for seq in (int(n) for n in args.lengths.split(",")):
            print(measure(out, driver, session, seq, args), flush=True)


if __name__ == "__main__":
    main()
