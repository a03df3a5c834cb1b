"""A BERT encoder with a symbolic sequence length: one compile for every length, next to
a static compile per length and onnxruntime.

    python tools/bench_dynamic.py                         # BERT-base: 12 layers
    python tools/bench_dynamic.py --layers 2 --lengths 1,64 --threads 2

The model is `onnx_workloads.bert_layer(layers=N, dynamic=True)` (hidden 768, 12
heads, FFN 3072, random weights; inputs `input_ids` and `position_ids` [1, seq]). It
is compiled once with `dlc.compile_onnx(model, dynamic=True)` (a fresh, empty compile
cache: a cold compile; wall and CPU seconds, this process and the compile's worker
processes), then once per length with the length fixed (`input_shapes`: a static
compile of the same graph). Each compile's cache entry (its weights, written by a
thread: `dlc.runtime.cache_writes`) is on disk before anything else runs: a write
during the timings competed with the calls (seq 1 measured 1.5x "slower"). Per
length: the median ms per call of the symbolic module, the static one and onnxruntime
(`intra_op_num_threads` = `--threads`), timed in turns
(`bench_common.alternating_medians`: all see the same load), the ratios
symbolic / static and symbolic / onnxruntime, and the largest difference of the
symbolic module's output from onnxruntime's (relative to its largest value).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tools"))

from bench_common import alternating_medians  # noqa: E402
from bench_models import ort_session as session  # noqa: E402
from bench_models import timed as timed_compile  # noqa: E402

LENGTHS = (1, 7, 64, 128, 384)


def inputs(length: int) -> dict[str, np.ndarray]:
    import onnx_workloads

    ids = onnx_workloads.bert_inputs(length=length)
    return {"input_ids": ids, "position_ids": np.arange(length, dtype=np.int64)[None]}


def row(model: Any, symbolic: Any, ort: Any, length: int, threads: int) -> dict[str, float]:
    """One length's times (ms), ratios and output difference (module docstring)."""
    import dlc
    from dlc.runtime import cache_writes

    feed = inputs(length)
    shapes = {name: value.shape for name, value in feed.items()}
    static, wall, cpu = timed_compile(
        lambda: dlc.compile_onnx(model, input_shapes=shapes, num_threads=threads)
    )
    cache_writes.wait()  # the static compile's entry (its weights), written by a thread
    args = (feed["input_ids"], feed["position_ids"])
    name = model.graph.name  # the compiled function's
    dynamic, fixed = getattr(symbolic, name), getattr(static, name)
    expected = ort.run(None, feed)[0]
    error = float(np.max(np.abs(dynamic(*args) - expected)) / np.max(np.abs(expected)))
    calls = [lambda: dynamic(*args), lambda: fixed(*args), lambda: ort.run(None, feed)]
    sym, sta, onnx_rt = (1e3 * s for s in alternating_medians(calls))
    return {
        "length": length,
        "symbolic_ms": sym,
        "static_ms": sta,
        "ort_ms": onnx_rt,
        "vs_static": sym / sta,
        "vs_ort": sym / onnx_rt,
        "error": error,
        "static_compile_s": wall,
        "static_compile_cpu_s": cpu,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    options = parser.parse_args(argv)
    os.environ["DLC_CACHE_DIR"] = tempfile.mkdtemp(prefix="dlc-bench-dynamic-")
    import onnx
    import onnx_workloads

    import dlc
    from dlc.runtime import cache_writes

    model = onnx_workloads.bert_layer(layers=options.layers, dynamic=True)
    path = Path(os.environ["DLC_CACHE_DIR"]) / "bert_dynamic.onnx"
    onnx.save(model, str(path))
    symbolic, wall, cpu = timed_compile(
        lambda: dlc.compile_onnx(model, dynamic=True, num_threads=options.threads)
    )
    cache_writes.wait()  # its entry's write, before the static compiles and the timings
    print(
        f"BERT, {options.layers} layers, symbolic length: compiled in {wall:.1f} s ({cpu:.1f} s CPU)"
    )
    ort = session(path, options.threads)
    print(
        "  seq | symbolic ms | static ms |  ort ms | sym/static | sym/ort | rel. error | static compile s"
    )
    for length in map(int, options.lengths.split(",")):
        r = row(model, symbolic, ort, length, options.threads)
        print(
            f"{length:5d} | {r['symbolic_ms']:11.2f} | {r['static_ms']:9.2f} | {r['ort_ms']:7.2f} |"
            f" {r['vs_static']:10.2f} | {r['vs_ort']:7.2f} | {r['error']:10.1e} |"
            f" {r['static_compile_s']:.1f} ({r['static_compile_cpu_s']:.1f} CPU)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
