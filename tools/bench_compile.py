"""Compile time of whole models: dlc's cold and cached compile, its peak memory and the
split by level, next to onnxruntime's session creation in the same run.

    python tools/bench_compile.py                          # every model
    python tools/bench_compile.py --only resnet50,bert_base
    python tools/bench_compile.py --json results.json      # the rows as JSON too

Models: ResNet-50 (onnx's light model with random weights, W8), BERT-base (12 encoder
layers, sequence 128, `onnx_workloads.bert_base`), MobileNetV2 and ViT-B/16 (built with
onnx.helper, `benchmarks/onnx_zoo.py`), DenseNet-121 (onnx's light model, random
weights) and W2×200 (benchmarks/softmax_chain200.dl; its onnxruntime twin is 200
Softmax nodes); and, for memory (`--only alexnet,albert,albert_xxlarge,mlp_4096`),
models whose weights dominate a compile's memory (`benchmarks/onnx_big.py`): AlexNet,
ALBERT-like encoders sharing one layer's weights and a 4096-wide MLP. ONNX files are built on first
use into `benchmarks/generated/`.

Each model runs in two fresh processes, so peak memory is the model's own and nothing
is cached in memory: the first loads the model (import), compiles it cold (a new, empty
DLC_CACHE_DIR: nothing compiled before) and creates an onnxruntime session (after dlc's
peak memory is read); the second compiles it again from that cache directory (cached).
Columns: the import's seconds, the cold compile's wall seconds and CPU seconds (this
process and the compile's worker processes: the measure that holds on a loaded
machine), the CPU seconds of each level (`dlc.progress`: graph = the graph passes and
lowering, tensor, loop, llvm = LLVM IR, LLVM's optimizer and code generator in this
process), the cached compile's wall and CPU seconds, dlc's peak resident memory, and
onnxruntime's session creation (wall seconds, one thread). "other weights": a third
process compiles the model with every floating-point weight scaled by 1.01 (the
initializers of more than one element: scalars such as an attention scale, GELU's
constants or ReLU6's bounds are the architecture's and stay) from the same cache
directory: the module cache misses, and the units of its LLVM code
(`dlc.runtime.unit_cache`: outlined runs and kernels) built for the cold compile are
reused; its wall and CPU seconds and units reused / units in the module. A second table gives the
peak resident memory (MB) at the end of each stage of the cold compile: the import,
then each level (`dlc.progress`: llvm includes LLVM and loading the code), next to the
weights' size.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GENERATED = ROOT / "benchmarks" / "generated"
sys.path.insert(0, str(ROOT / "benchmarks"))

MODELS = {
    "resnet50": "ResNet-50",
    "bert_base": "BERT-base (12 layers, seq 128)",
    "mobilenet_v2": "MobileNetV2",
    "densenet121": "DenseNet-121",
    "vit_b16": "ViT-B/16",
    "w2x200": "W2 x200 (softmax chain)",
    "alexnet": "AlexNet",
    "albert": "ALBERT-like (12 shared layers)",
    "albert_xxlarge": "ALBERT-xxlarge-like (2 layers)",
    "mlp_4096": "MLP 4096 x4",
}
LEVELS = ("graph", "tensor", "loop", "llvm")
WEIGHT_ELEMENTS = 2
"""Initializers of fewer elements are constants of the architecture, not weights."""


def _model_file(name: str) -> Path:
    """The model's ONNX file, built when missing."""
    import onnx
    import onnx_big
    import onnx_workloads
    import onnx_zoo

    if name in onnx_workloads.BUILDERS:
        return onnx_workloads.ensure(name, GENERATED)
    path = GENERATED / f"{name}.onnx"
    if not path.exists():
        GENERATED.mkdir(parents=True, exist_ok=True)
        builders = {**onnx_zoo.BUILDERS, **onnx_big.BUILDERS, "w2x200": _softmax_chain}
        builder = builders[name]
        tmp = path.with_suffix(".tmp")
        onnx.save(builder(), str(tmp))
        tmp.replace(path)
    return path


def _softmax_chain(n: int = 200):  # noqa: ANN202
    """W2 ×200's onnxruntime twin: softmax applied `n` times to x of shape (1000,)."""
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Softmax", ["x" if i == 0 else f"s{i}"], [f"s{i + 1}"], axis=0)
        for i in range(n)
    ]
    graph = helper.make_graph(
        nodes,
        "softmax_chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1000])],
        [helper.make_tensor_value_info(f"s{n}", TensorProto.FLOAT, [1000])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _memory_progress():  # noqa: ANN202 - a dlc.progress.Progress (dlc imported late)
    """A `dlc.progress.Progress` that also notes the peak RSS as each level ends."""
    from dlc import progress

    class MemoryProgress(progress.Progress):
        def __init__(self) -> None:
            super().__init__()
            self.peaks: dict[str, float] = {}

        def _close_phase(self) -> None:
            if self.level:
                self.peaks[self.level] = _peak_mb()
            super()._close_phase()

    return MemoryProgress()


def _weights_mb(module: object) -> float:
    """The dense literals' bytes of a graph module (its weights), in MB."""
    from dlc.dialects.graph import LiteralOp

    dense = (op.value.data for op in module.walk() if isinstance(op, LiteralOp))  # type: ignore[attr-defined]
    return sum(len(tree[1]) for tree in dense if tree[0] == "dense") / 2**20


def _cpu() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _reweighted(path: Path) -> object:
    """The ONNX model at `path` with its weights (floating-point initializers of more
    than one element, `WEIGHT_ELEMENTS`) scaled by 1.01: what fine-tuning changes."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    for tensor in model.graph.initializer:
        array = numpy_helper.to_array(tensor)
        if array.dtype.kind == "f" and array.size >= WEIGHT_ELEMENTS:
            scaled = (array * np.asarray(1.01, array.dtype)).astype(array.dtype)
            tensor.CopyFrom(numpy_helper.from_array(scaled, tensor.name))
    return model


def _compile(name: str, reweighted: bool = False) -> tuple[dict[str, float], object]:
    """Import (timed) and compile model `name` (`reweighted`: other weights, `_reweighted`):
    timings and the compiled module."""
    import dlc
    from dlc import progress
    from dlc.api import compile_graph_module

    row: dict[str, float] = {}
    wall, cpu = time.perf_counter(), _cpu()
    if name == "w2x200":
        source = (ROOT / "benchmarks" / "softmax_chain200.dl").read_text()
        row["import_s"] = 0.0
        wall, cpu = time.perf_counter(), _cpu()
        row["rss_import_mb"], row["weights_mb"] = _peak_mb(), 0.0
        with progress.tracking(_memory_progress()) as tracked:
            compiled = dlc.compile(source, filename="softmax_chain200.dl")
    else:
        path = _model_file(name)
        module = dlc.onnx.load(_reweighted(path) if reweighted else str(path))
        row["import_s"] = time.perf_counter() - wall
        row["rss_import_mb"], row["weights_mb"] = _peak_mb(), _weights_mb(module)
        wall, cpu = time.perf_counter(), _cpu()
        with progress.tracking(_memory_progress()) as tracked:
            compiled = compile_graph_module(module)
    row["compile_s"] = time.perf_counter() - wall
    row["compile_cpu_s"] = _cpu() - cpu
    for level in LEVELS:
        row[f"{level}_cpu_s"] = tracked.phases.get(level, [0.0, 0.0])[1]
        row[f"rss_{level}_mb"] = tracked.peaks.get(level, 0.0)
    return row, compiled


def child(name: str, cold: bool, reweighted: bool = False) -> dict[str, float]:
    """One process's measurements (module docstring)."""
    from dlc.runtime import unit_cache

    row, _ = _compile(name, reweighted)
    row["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    row["units_reused"] = unit_cache.COUNTS["reused"]
    row["units"] = unit_cache.COUNTS["reused"] + unit_cache.COUNTS["built"]
    if cold:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        path = _model_file(name)
        start = time.perf_counter()
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        row["ort_session_s"] = time.perf_counter() - start
    return row


def _run_child(name: str, mode: str, cache_dir: str) -> dict[str, float]:
    """A child process measuring `mode` (--cold, --cached, --reweighted)."""
    env = {**os.environ, "DLC_CACHE": "1", "DLC_CACHE_DIR": cache_dir, "DLC_PROGRESS": "0"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    out = subprocess.run(
        [sys.executable, __file__, "--child", name, mode],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["failed"])[-1]
        return {"error": tail}  # type: ignore[dict-item]
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(name: str) -> dict[str, object]:
    if name != "w2x200":  # built in a process of its own: Linux's peak RSS of a
        # process includes its parent's before the fork, and that of its image before exec
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        subprocess.run([sys.executable, __file__, "--build", name], env=env, check=True)
    with tempfile.TemporaryDirectory(prefix="dlc-bench-compile-") as cache_dir:
        cold = _run_child(name, "--cold", cache_dir)
        cached = _run_child(name, "--cached", cache_dir) if "error" not in cold else {}
        other = {}
        if "error" not in cold and name != "w2x200":  # W2 x200 has no weights
            other = _run_child(name, "--reweighted", cache_dir)
    return {"model": name, "cold": cold, "cached": cached, "other": other}


HEADER = (
    f"{'model':32} {'import':>6} {'cold':>6} {'CPU':>6} "
    + " ".join(f"{lv:>6}" for lv in LEVELS)
    + f" {'cached':>6} {'CPU':>6} {'other':>6} {'CPU':>6} {'units':>7} {'RSS MB':>7} {'ort':>6}"
)


def table_row(result: dict[str, object]) -> str:
    cold: dict = result["cold"]  # type: ignore[assignment]
    cached: dict = result["cached"]  # type: ignore[assignment]
    title = MODELS[str(result["model"])]
    if "error" in cold:
        return f"{title:32} failed: {cold['error']}"
    levels = " ".join(f"{cold[f'{lv}_cpu_s']:6.2f}" for lv in LEVELS)
    again = f"{'-':>6} {'-':>6}"
    if "compile_s" in cached:
        again = f"{cached['compile_s']:6.2f} {cached['compile_cpu_s']:6.2f}"
    other: dict = result.get("other") or {}  # type: ignore[assignment]
    reused = f"{'-':>6} {'-':>6} {'-':>7}"
    if "compile_s" in other:
        units = f"{other['units_reused']}/{other['units']}"
        reused = f"{other['compile_s']:6.2f} {other['compile_cpu_s']:6.2f} {units:>7}"
    return (
        f"{title:32} {cold['import_s']:6.2f} {cold['compile_s']:6.2f} "
        f"{cold['compile_cpu_s']:6.2f} {levels} {again} {reused} {cold['rss_mb']:7.0f} "
        f"{cold['ort_session_s']:6.2f}"
    )


MEMORY_HEADER = f"{'model':32} {'weights':>7} {'import':>7} " + " ".join(
    f"{lv:>7}" for lv in LEVELS
)


def memory_row(result: dict[str, object]) -> str:
    cold: dict = result["cold"]  # type: ignore[assignment]
    title = MODELS[str(result["model"])]
    if "error" in cold:
        return f"{title:32} failed"
    levels = " ".join(f"{cold[f'rss_{lv}_mb']:7.0f}" for lv in LEVELS)
    return f"{title:32} {cold['weights_mb']:7.0f} {cold['rss_import_mb']:7.0f} {levels}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated models: " + ",".join(MODELS))
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--build", help=argparse.SUPPRESS)
    parser.add_argument("--cold", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cached", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--reweighted", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.build:
        _model_file(args.build)
        return 0
    if args.child:
        print(json.dumps(child(args.child, args.cold, args.reweighted)))
        return 0
    names = args.only.split(",") if args.only else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    print("seconds (levels: CPU seconds of the cold compile); RSS: dlc's peak")
    print(HEADER)
    results = []
    for name in names:
        result = measure(name)
        results.append(result)
        print(table_row(result), flush=True)
    print("\npeak RSS (MB) at the end of each stage of the cold compile; weights: MB of data")
    print(MEMORY_HEADER)
    for result in results:
        print(memory_row(result))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
