"""Whole ONNX models in tools/bench.py: W8 (ResNet-50, batch 1, 224×224, random
weights), W9 (a BERT-base encoder layer: sequence 128, hidden 768, 12 heads,
token-embedding Gather from a 30522×768 table, GELU, LayerNorm) and W13 (MobileNetV2
1.0, batch 1, 224×224: depthwise convolutions), against onnxruntime in the same run.

The models come from `benchmarks/onnx_workloads.py`, built on first use into
`benchmarks/generated/` (git-ignored: ~100 MB of random weights each). Per model:
the time `dlc.onnx.load` takes (import), the first compile (cold: an empty compile
cache), a compile of the same model from the on-disk cache in a fresh process state
(cached: the in-memory entries forgotten), dlc's median µs per call, onnxruntime's
(`intra_op_num_threads` = the bench's threads, `session.intra_op.allow_spinning` = 0),
timed in turns (`bench_common.alternating_medians`: both see the same load), and
dlc / ort, and the largest difference of the outputs relative to the largest
output of onnxruntime's; then, in parentheses, the CPU seconds of the import, the cold
and the cached compile (this process and the compile's worker processes: the measure
that holds on a loaded machine) and the peak resident memory so far (run one model per
process, `--only`, for each model's own).

    python tools/bench.py --only W8,W9
    python tools/bench_models.py [--only W8] [--threads N]   # the same rows alone
    python tools/bench_models.py --weights fill              # constant-filled weights
    python tools/bench_models.py --only W9 -O 3              # with the superoptimizer

`--weights fill` runs the same graphs with every weight a `ConstantOfShape` fill (the
form of onnx's light models): the same computation for both systems, without the
weight data (dense literals, docs/guide/onnx.md: their import and compile cost
little beside the code's).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
GENERATED = ROOT / "benchmarks" / "generated"
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tools"))

from bench_common import alternating_medians, median_seconds  # noqa: E402


@dataclass(frozen=True)
class ModelWorkload:
    id: str
    title: str
    model: str  # a builder of benchmarks/onnx_workloads.py
    inputs: Callable[[], list[np.ndarray]]


def _image() -> list[np.ndarray]:
    return [np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)]


def _tokens() -> list[np.ndarray]:
    import onnx_workloads

    return [onnx_workloads.bert_inputs()]


MODELS = [
    ModelWorkload("W8", "ResNet-50 B=1 224x224", "resnet50", _image),
    ModelWorkload("W9", "BERT-base encoder layer", "bert_layer", _tokens),
    ModelWorkload("W13", "MobileNetV2 B=1 224x224", "mobilenet_v2", _image),
]
HEADER = (
    f"{'id':3} {'model':24} {'import s':>8} {'cold s':>8} {'cached s':>8} "
    f"{'dlc µs':>10} {'ort µs':>10} {'dlc/ort':>7}  max rel err"
    "  (CPU s of import/cold/cached; max RSS)"
)


def cpu_seconds() -> float:
    """CPU time of this process and of its children waited for (the compile's
    workers): on a loaded machine the measure that wall time is not."""
    import resource

    own, children = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(f: Callable[[], Any]) -> tuple[Any, float, float]:
    """`f()`, its wall seconds and its CPU seconds."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    out = f()
    return out, time.perf_counter() - wall, cpu_seconds() - cpu


def ort_session(path: Path, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _compile(module: Any, threads: int, opt_level: int = 2) -> tuple[Any, list[float]]:
    """The compiled module, and the wall and CPU seconds of its cold compile and of its
    compile from the disk cache."""
    from dlc.api import compile_graph_module
    from dlc.runtime import cache

    def compile_once() -> Any:
        return compile_graph_module(module, num_threads=threads, opt_level=opt_level)

    compiled, *cold = timed(compile_once)
    cache.clear_memory()
    _, *cached = timed(compile_once)
    return compiled, [*cold, *cached]


def run_model(w: ModelWorkload, threads: int, weights: str = "random", opt_level: int = 2) -> str:
    """One report line for `w`, or why it has no numbers."""
    import onnx_workloads

    import dlc.onnx
    from dlc.diagnostics import DiagnosticError

    label = f"{w.id:3} {w.title:24}"
    path = onnx_workloads.ensure(w.model + ("_fill" if weights == "fill" else ""), GENERATED)
    inputs = w.inputs()
    try:
        module, imported, imported_cpu = timed(lambda: dlc.onnx.load(path))
        compiled, (cold, cold_cpu, cached, cached_cpu) = _compile(module, threads, opt_level)
    except DiagnosticError as e:
        return f"{label} skipped: dlc cannot compile it: {e.message}"
    fn = compiled[next(iter(compiled.functions))]
    got = np.asarray(fn(*inputs))
    usage = f"  ({imported_cpu:.2f}/{cold_cpu:.2f}/{cached_cpu:.2f}; {_max_rss_gb():.2f} GB)"
    try:
        session = ort_session(path, threads)
    except ImportError:
        dlc_s = median_seconds(fn, inputs)
        line = f"{label} {imported:8.2f} {cold:8.2f} {cached:8.2f} {dlc_s * 1e6:10.1f}"
        return line + f" {'not installed':>18}" + usage
    names = [i.name for i in session.get_inputs()]
    feeds = dict(zip(names, inputs, strict=True))
    want = session.run(None, feeds)[0]
    dlc_s, ort_s = alternating_medians([lambda: fn(*inputs), lambda: session.run(None, feeds)])
    line = f"{label} {imported:8.2f} {cold:8.2f} {cached:8.2f} {dlc_s * 1e6:10.1f}"
    scale = float(np.max(np.abs(want)))
    error = f"{float(np.max(np.abs(got - want))) / scale:.1e}" if scale else "- (all 0)"
    return line + f" {ort_s * 1e6:10.1f} {dlc_s / ort_s:7.2f}  {error:>11}" + usage


def _max_rss_gb() -> float:
    """Peak resident memory of this process so far in GB (Linux: ru_maxrss in KiB);
    with several models in one run, the largest so far."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def run_models(
    wanted: set[str] | None, threads: int, weights: str = "random", opt_level: int = 2
) -> None:
    """The W8/W9/W13 table (bench.py calls it after its own)."""
    chosen = [w for w in MODELS if wanted is None or w.id in wanted]
    if not chosen:
        return
    print(
        f"\nONNX models, {weights} weights, opt_level {opt_level} ({threads} threads;"
        " times in s, calls in µs)"
    )
    print(HEADER)
    for w in chosen:
        print(run_model(w, threads, weights, opt_level), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    import os
    import tempfile

    from dlc.runtime.native import default_threads

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated ids: W8, W9, W13")
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--weights", choices=("random", "fill"), default="random",
                        help="fill: constant-filled weights (same computation, no weight data)")  # fmt: skip
    parser.add_argument("--opt-level", "-O", type=int, choices=range(4), default=2,
                        help="dlc's opt_level (3: the superoptimizer too)")  # fmt: skip
    args = parser.parse_args(argv)
    os.environ.setdefault("DLC_CACHE_DIR", tempfile.mkdtemp(prefix="dlc-bench-cache-"))
    wanted = set(args.only.split(",")) if args.only else None
    run_models(wanted, args.threads, args.weights, args.opt_level)
    return 0


if __name__ == "__main__":
    sys.exit(main())
