"""Time dlc against NumPy on the BENCHMARKS.md workloads, in one process.

    python tools/bench.py              # every workload
    python tools/bench.py --only W0,W3 # a subset

Per workload: dlc's median µs per call, NumPy's, their ratio (dlc / NumPy, lower is
better for dlc), onnxruntime's median and dlc / onnxruntime when `onnx` and
`onnxruntime` are importable (optional; the ONNX twins are built with onnx.helper),
GFLOP/s where FLOPs are defined, dlc's compile time (first: a cold compile, the
compile cache lives in a fresh temporary DLC_CACHE_DIR for the run; "again": a second
compile of the same text, served by the in-memory cache; "disk": a third one after
forgetting the in-memory entries, served by the on-disk cache), the
top-level loop nests per call (`stats()["loop_nests"]`), and whether dlc's result
matches NumPy's. Workloads that dlc cannot compile yet are skipped with the reason. Medians are over at least 7 timed
samples after a warm-up; compare ratios within one run, never absolute times across
runs (the machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MIN_SAMPLES = 7
SAMPLE_SECONDS = 2e-3
BUDGET_SECONDS = 0.5

Arrays = list[np.ndarray]


@dataclass(frozen=True)
class Workload:
    """One BENCHMARKS.md row: a DLVM source, its inputs and a NumPy twin."""

    id: str
    title: str
    source: str  # relative to the repository root
    entry: str
    inputs: Callable[[np.random.Generator], Arrays]
    numpy: Callable[..., Any]
    flops: float | None = None


# -- NumPy twins ----------------------------------------------------------------------


def np_sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


def np_lstm_tail(
    c: np.ndarray, f: np.ndarray, i: np.ndarray, j: np.ndarray, o: np.ndarray
) -> tuple:
    new_c = c * np_sigmoid(f + 1) + np_sigmoid(i) * np.tanh(j)
    return new_c, np.tanh(new_c) * np_sigmoid(o)


def np_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_softmax_chain(n: int) -> Callable[[np.ndarray], np.ndarray]:
    def chain(x: np.ndarray) -> np.ndarray:
        for _ in range(n):
            x = np_softmax(x)
        return x

    return chain


def np_mlp(
    x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray
) -> np.ndarray:
    h = np.maximum(x @ w1 + b1, 0)
    return np_softmax(h @ w2 + b2, axis=1)


def np_conv2d(x: np.ndarray, k: np.ndarray) -> np.ndarray:
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, k.shape[2:], axis=(2, 3))
    out = np.tensordot(windows, k, axes=([1, 4, 5], [1, 2, 3]))  # (n, h, w, o)
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2))


def np_train_step(
    x: np.ndarray, t: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray
) -> tuple:
    z1 = x @ w1 + b1
    h = np.maximum(z1, 0)
    probs = np_softmax(h @ w2 + b2, axis=1)
    dlogits = (probs - t) / x.shape[0]
    dw2, db2 = h.T @ dlogits, dlogits.sum(axis=0, keepdims=True)
    dz1 = (dlogits @ w2.T) * (z1 > 0)
    dw1, db1 = x.T @ dz1, dz1.sum(axis=0, keepdims=True)
    rate = np.float32(0.01)
    return w1 - rate * dw1, b1 - rate * db1, w2 - rate * dw2, b2 - rate * db2


def np_layernorm_gelu(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=1, keepdims=True)
    xc = x - mean
    var = (xc * xc).mean(axis=1, keepdims=True)
    y = xc / np.sqrt(var + np.float32(1e-5)) * gamma + beta
    return (
        0.5 * y * (1 + np.tanh(np.float32(0.7978845608028654) * (y + np.float32(0.044715) * y**3)))
    )


# -- onnxruntime twins (optional: only when onnx and onnxruntime import) --------------


def _onnx_model(nodes: list, inputs: list[tuple[str, tuple]], outputs: list[tuple[str, tuple]]):
    """A float32 ONNX model (opset 17) from onnx.helper nodes."""
    from onnx import TensorProto, helper

    def info(name: str, shape: tuple) -> Any:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))

    graph = helper.make_graph(
        nodes, "dlc_bench", [info(*i) for i in inputs], [info(*o) for o in outputs]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what every onnxruntime release accepts for opset 17
    return model


def _const(name: str, value: float) -> Any:
    from onnx import TensorProto, helper

    return helper.make_node(
        "Constant",
        [],
        [name],
        value=helper.make_tensor(name + "_v", TensorProto.FLOAT, [], [value]),
    )


def onnx_graph(w: Workload, inputs: Arrays):
    """The workload as an ONNX model, or None when there is no ONNX twin (W6)."""
    from onnx import helper

    n = helper.make_node
    shapes = [(f"in{k}", a.shape) for k, a in enumerate(inputs)]
    if w.id == "W0":
        nodes = [_const("one", 1.0), n("Add", ["in0", "one"], ["out"])]
        return _onnx_model(nodes, shapes, [("out", inputs[0].shape)])
    if w.id == "W1":
        nodes = [
            _const("one", 1.0),
            n("Add", ["in1", "one"], ["f1"]),  # inputs: c, f, i, j, o
            n("Sigmoid", ["f1"], ["sf"]),
            n("Mul", ["in0", "sf"], ["cf"]),
            n("Sigmoid", ["in2"], ["si"]),
            n("Tanh", ["in3"], ["tj"]),
            n("Mul", ["si", "tj"], ["ij"]),
            n("Add", ["cf", "ij"], ["new_c"]),
            n("Tanh", ["new_c"], ["tc"]),
            n("Sigmoid", ["in4"], ["so"]),
            n("Mul", ["tc", "so"], ["new_h"]),
        ]
        shape = inputs[0].shape
        return _onnx_model(nodes, shapes, [("new_c", shape), ("new_h", shape)])
    if w.id == "W2":
        count = 200 if "200" in w.title else 20
        nodes = [
            n("Softmax", [f"x{k}" if k else "in0"], [f"x{k + 1}" if k + 1 < count else "out"])
            for k in range(count)
        ]
        return _onnx_model(nodes, shapes, [("out", inputs[0].shape)])
    if w.id == "W3":
        nodes = [
            n("MatMul", ["in0", "in1"], ["xw1"]),
            n("Add", ["xw1", "in2"], ["z1"]),
            n("Relu", ["z1"], ["h"]),
            n("MatMul", ["h", "in3"], ["hw2"]),
            n("Add", ["hw2", "in4"], ["logits"]),
            n("Softmax", ["logits"], ["out"], axis=1),
        ]
        return _onnx_model(nodes, shapes, [("out", (inputs[0].shape[0], 10))])
    if w.id == "W4":
        nodes = [n("MatMul", ["in0", "in1"], ["out"])]
        return _onnx_model(nodes, shapes, [("out", (1024, 1024))])
    if w.id == "W5":
        nodes = [n("Conv", ["in0", "in1"], ["out"], pads=[1, 1, 1, 1])]
        return _onnx_model(nodes, shapes, [("out", (1, 64, 56, 56))])
    if w.id == "W7":
        nodes = [
            n("Reshape", ["in1", "flat"], ["gamma"]),
            n("Reshape", ["in2", "flat"], ["beta"]),
            n("LayerNormalization", ["in0", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-5),
            n("Mul", ["y", "y"], ["y2"]),
            n("Mul", ["y2", "y"], ["y3"]),
            _const("c1", 0.044715),
            n("Mul", ["y3", "c1"], ["cube"]),
            n("Add", ["y", "cube"], ["inner"]),
            _const("c2", 0.7978845608028654),
            n("Mul", ["inner", "c2"], ["arg"]),
            n("Tanh", ["arg"], ["t"]),
            _const("one", 1.0),
            n("Add", ["t", "one"], ["t1"]),
            _const("half", 0.5),
            n("Mul", ["y", "half"], ["hy"]),
            n("Mul", ["hy", "t1"], ["out"]),
        ]
        from onnx import TensorProto

        flat = helper.make_node(
            "Constant",
            [],
            ["flat"],
            value=helper.make_tensor("flat_v", TensorProto.INT64, [1], [768]),
        )
        return _onnx_model([flat, *nodes], shapes, [("out", inputs[0].shape)])
    return None


def onnxruntime_runner(w: Workload, inputs: Arrays) -> Callable[..., Any] | None:
    """A callable running the workload's ONNX twin in onnxruntime (2 threads), or None."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    model = onnx_graph(w, inputs)
    if model is None:
        return None
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    names = [i.name for i in session.get_inputs()]

    def run(*args: np.ndarray) -> Any:
        out = session.run(None, dict(zip(names, args, strict=True)))
        return out[0] if len(out) == 1 else tuple(out)

    return run


# -- inputs ---------------------------------------------------------------------------


def normal(*shapes: tuple[int, ...], scale: float = 1.0) -> Callable[[np.random.Generator], Arrays]:
    def make(rng: np.random.Generator) -> Arrays:
        return [(rng.standard_normal(s) * scale).astype(np.float32) for s in shapes]

    return make


def mlp_inputs(batch: int) -> Callable[[np.random.Generator], Arrays]:
    def make(rng: np.random.Generator) -> Arrays:
        x = rng.standard_normal((batch, 784)).astype(np.float32)
        w1 = (rng.standard_normal((784, 256)) / 28).astype(np.float32)
        b1 = (rng.standard_normal((1, 256)) * 0.1).astype(np.float32)
        w2 = (rng.standard_normal((256, 10)) / 16).astype(np.float32)
        b2 = (rng.standard_normal((1, 10)) * 0.1).astype(np.float32)
        return [x, w1, b1, w2, b2]

    return make


def train_inputs(rng: np.random.Generator) -> Arrays:
    x, w1, b1, w2, b2 = mlp_inputs(64)(rng)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, size=64)]
    return [x, labels, w1, b1, w2, b2]


def layernorm_inputs(rng: np.random.Generator) -> Arrays:
    x = rng.standard_normal((128, 768)).astype(np.float32)
    gamma = (1 + 0.1 * rng.standard_normal((1, 768))).astype(np.float32)
    beta = (0.1 * rng.standard_normal((1, 768))).astype(np.float32)
    return [x, gamma, beta]


def mlp_flops(batch: int) -> float:
    return 2.0 * batch * (784 * 256 + 256 * 10)


WORKLOADS = [
    Workload("W0", "call overhead x+1", "benchmarks/call_overhead.dl", "add_one", normal((1,)), lambda x: x + 1),
    Workload("W1", "LSTM cell tail", "benchmarks/lstm_tail.dl", "lstm_tail", normal(*[(64, 1024)] * 5), np_lstm_tail),
    Workload("W2", "softmax chain x20", "benchmarks/softmax_chain20.dl", "softmax_chain", normal((1000,)), np_softmax_chain(20)),
    Workload("W2", "softmax chain x200", "benchmarks/softmax_chain200.dl", "softmax_chain", normal((1000,)), np_softmax_chain(200)),
    Workload("W3", "MLP B=1", "examples/mlp.dl", "mlp", mlp_inputs(1), np_mlp, mlp_flops(1)),
    Workload("W3", "MLP B=64", "benchmarks/mlp_b64.dl", "mlp", mlp_inputs(64), np_mlp, mlp_flops(64)),
    Workload("W4", "matmul 1024^3", "benchmarks/matmul.dl", "matmul", normal((1024, 1024), (1024, 1024)), np.matmul, 2.0 * 1024**3),
    Workload("W5", "conv2d 64x56x56 k3", "benchmarks/conv2d.dl", "conv2d", normal((1, 64, 56, 56), (64, 64, 3, 3), scale=0.1), np_conv2d, 2.0 * 64 * 64 * 9 * 56 * 56),
    Workload("W6", "MLP training step B=64", "benchmarks/mlp_train.dl", "train_step", train_inputs, np_train_step, 3 * mlp_flops(64)),
    Workload("W7", "LayerNorm + GELU", "benchmarks/layernorm_gelu.dl", "layernorm_gelu", layernorm_inputs, np_layernorm_gelu),
]  # fmt: skip


# -- timing ---------------------------------------------------------------------------


def median_seconds(fn: Callable[..., Any], args: Sequence[Any]) -> float:
    """Median seconds per call: ≥ 7 samples of enough calls to last ≥ 2 ms, after a warm-up."""
    start = time.perf_counter()
    fn(*args)
    once = max(time.perf_counter() - start, 1e-7)
    inner = max(1, int(SAMPLE_SECONDS / once))
    samples: list[float] = []
    deadline = time.perf_counter() + BUDGET_SECONDS
    while len(samples) < MIN_SAMPLES or time.perf_counter() < deadline:
        start = time.perf_counter()
        for _ in range(inner):
            fn(*args)
        samples.append((time.perf_counter() - start) / inner)
        if len(samples) >= 200:
            break
    return statistics.median(samples)


def leaves(result: Any) -> Arrays:
    if isinstance(result, tuple | list):
        return [np.asarray(r) for r in result]
    return [np.asarray(result)]


def max_error(got: Any, want: Any) -> float:
    """Largest |got - want| / (1 + |want|) over all outputs (inf on a shape mismatch)."""
    worst = 0.0
    got_leaves, want_leaves = leaves(got), leaves(want)
    if len(got_leaves) != len(want_leaves):
        return float("inf")
    for g, w in zip(got_leaves, want_leaves, strict=True):
        if g.shape != w.shape:
            return float("inf")
        diff = np.abs(g.astype(np.float64) - w.astype(np.float64)) / (
            1 + np.abs(w.astype(np.float64))
        )
        worst = max(worst, float(np.nanmax(diff)) if diff.size else 0.0)
    return worst


def count_loop_nests(compiled: Any, entry: str) -> int:
    """Top-level loop nests executed per call of `entry` (the compile report)."""
    return compiled.stats(entry)["loop_nests"]


# -- driver ---------------------------------------------------------------------------


def compile_source(text: str, filename: str) -> tuple[Any, float, float, float]:
    """Compile three times; return the module and the cold, memory-cached and
    disk-cached compile times."""
    import dlc
    from dlc.runtime import cache

    times = []
    compiled = None
    for _ in range(3):
        start = time.perf_counter()
        module = dlc.compile(text, filename=filename)
        times.append(time.perf_counter() - start)
        compiled = compiled or module
        if len(times) == 2:
            cache.clear_memory()  # the third compile reads the disk entry
    return compiled, times[0], times[1], times[2]


def run_workload(w: Workload) -> str:
    """One report line: timings, or the reason the workload was skipped."""
    from dlc.diagnostics import DiagnosticError

    label = f"{w.id:3} {w.title:24}"
    text = (ROOT / w.source).read_text()
    try:
        compiled, first, second, disk = compile_source(text, w.source)
        fn = compiled[w.entry]
        inputs = w.inputs(np.random.default_rng(0))
        error = max_error(fn(*inputs), w.numpy(*inputs))
    except DiagnosticError as e:
        return f"{label} skipped: dlc cannot compile it yet: {e.message}"
    except (NotImplementedError, TypeError, ValueError) as e:
        return f"{label} skipped: {type(e).__name__}: {e}"
    dlc_s = median_seconds(fn, inputs)
    numpy_s = median_seconds(w.numpy, inputs)
    ort = ort_column(w, inputs, dlc_s)
    gflops = f"{w.flops / dlc_s / 1e9:7.1f}" if w.flops else "      -"
    nests = count_loop_nests(compiled, w.entry)
    check = "ok" if error < 1e-3 else f"MISMATCH max rel err {error:.2g}"
    return (
        f"{label} {dlc_s * 1e6:10.1f} {numpy_s * 1e6:10.1f} {dlc_s / numpy_s:7.2f}{ort} {gflops}"
        f" {first * 1e3:8.0f} {second * 1e3:8.0f} {disk * 1e3:8.0f} {nests:>5}  {check}"
    )


def ort_column(w: Workload, inputs: Arrays, dlc_s: float) -> str:
    """onnxruntime's median and dlc / onnxruntime, when onnxruntime is installed."""
    if not ORT_AVAILABLE:
        return ""
    try:
        run = onnxruntime_runner(w, inputs)
    except Exception as e:  # an ONNX graph onnxruntime rejects: report, keep going
        print(f"    (onnxruntime failed on {w.id}: {type(e).__name__}: {e})", file=sys.stderr)
        run = None
    if run is None:
        return f" {'-':>10} {'-':>7}"
    if max_error(run(*inputs), w.numpy(*inputs)) >= 1e-3:
        return f" {'mismatch':>10} {'-':>7}"
    ort_s = median_seconds(run, inputs)
    return f" {ort_s * 1e6:10.1f} {dlc_s / ort_s:7.2f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated workload ids, e.g. W0,W3")
    args = parser.parse_args(argv)
    wanted = set(args.only.split(",")) if args.only else None
    if "DLC_CACHE_DIR" not in os.environ:  # cold first compiles, nothing left behind
        os.environ["DLC_CACHE_DIR"] = tempfile.mkdtemp(prefix="dlc-bench-cache-")
        atexit.register(shutil.rmtree, os.environ["DLC_CACHE_DIR"], ignore_errors=True)
    print(f"numpy {np.__version__}; onnxruntime: {onnxruntime_status()}")
    ort = f" {'ort µs':>10} {'dlc/ort':>7}" if ORT_AVAILABLE else ""
    print(
        f"{'id':3} {'workload':24} {'dlc µs':>10} {'numpy µs':>10} {'dlc/np':>7}{ort} {'GFLOP/s':>7}"
        f" {'compile ms':>8} {'again ms':>8} {'disk ms':>8} {'nests':>5}  check"
    )
    for w in WORKLOADS:
        if wanted is None or w.id in wanted:
            print(run_workload(w), flush=True)
    return 0


def _ort_available() -> bool:
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


ORT_AVAILABLE = _ort_available()


def onnxruntime_status() -> str:
    if not ORT_AVAILABLE:
        return "not installed (needs onnx and onnxruntime), not compared"
    import onnxruntime

    return f"{onnxruntime.__version__}, 2 intra-op threads, compared (W6 has no ONNX twin)"


if __name__ == "__main__":
    sys.exit(main())
