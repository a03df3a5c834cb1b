"""Single-layer ONNX models against onnxruntime: the layer classes of W8 (ResNet-50)
and W9 (BERT) one at a time, with constant weights (initializers, as exported models
have them), so a slow layer class shows apart from the rest of a model.

    python tools/bench_layers.py                         # every layer, random weights
    python tools/bench_layers.py --weights fill          # weights one repeated value each
    python tools/bench_layers.py --only conv3x3,mm_bias --threads 1
    python tools/bench_layers.py --list

Each layer is built with `onnx.helper` (Conv with constant weights + bias + Relu,
BatchNormalization, residual Add, MatMul/Gemm with constant weights + bias + an
activation), imported with `dlc.onnx.load`, compiled (`compile_graph_module`, the
bench's threads) and timed against an onnxruntime session on the same threads
(spinning off), in turns: median µs per call of each (`bench_common`), dlc /
ort, dlc's GFLOP/s and the largest output difference relative to onnxruntime's
largest output. `--cpu` also prints the process CPU time per call of each, the
fair measure when other jobs load the machine (a parallel region waits for its
slowest thread).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import alternating_medians  # noqa: E402


@dataclass(frozen=True)
class Conv:
    """Conv (+ bias) [+ BatchNormalization] [+ residual Add] [+ activation]."""

    ci: int
    co: int
    size: int
    kernel: int
    stride: int = 1
    group: int = 1
    bn: bool = False
    residual: bool = False
    act: str = "Relu"

    @property
    def pad(self) -> int:
        return self.kernel // 2

    @property
    def out(self) -> int:
        return (self.size + 2 * self.pad - self.kernel) // self.stride + 1

    def flops(self) -> float:
        return 2.0 * self.co * self.out**2 * (self.ci // self.group) * self.kernel**2


@dataclass(frozen=True)
class Dense:
    """MatMul (x [rows, k] @ w [k, n]) or Gemm (transB) + bias [+ activation]."""

    rows: int
    k: int
    n: int
    gemm: bool = False
    act: str = ""

    def flops(self) -> float:
        return 2.0 * self.rows * self.k * self.n


LAYERS: dict[str, Conv | Dense] = {
    "conv3x3": Conv(64, 64, 56, 3),  # W5 with bias + relu
    "conv3x3_bn": Conv(64, 64, 56, 3, bn=True),
    "conv1x1_up_res": Conv(64, 256, 56, 1, bn=True, residual=True),
    "conv1x1_down": Conv(256, 64, 56, 1),
    "conv3x3_s2": Conv(128, 128, 56, 3, stride=2),
    "conv7x7_s2": Conv(3, 64, 224, 7, stride=2),
    "conv3x3_28": Conv(128, 128, 28, 3),
    "conv3x3_14": Conv(256, 256, 14, 3),
    "conv3x3_7": Conv(512, 512, 7, 3),
    "conv1x1_7": Conv(2048, 512, 7, 1),
    "conv1x1_28": Conv(512, 128, 28, 1),
    "conv1x1_28_up_res": Conv(128, 512, 28, 1, bn=True, residual=True),
    "conv1x1_7_up_res": Conv(512, 2048, 7, 1, bn=True, residual=True),
    "conv1x1_14_up_res": Conv(256, 1024, 14, 1, bn=True, residual=True),
    "conv_dw": Conv(128, 128, 56, 3, group=128),
    "conv_grouped": Conv(128, 128, 28, 3, group=32),
    # MobileNetV2's inverted residual blocks: depthwise 3x3 + relu6, pointwise projection
    "dw_112": Conv(32, 32, 112, 3, group=32, bn=True, act="Relu6"),
    "dw_112_s2": Conv(96, 96, 112, 3, stride=2, group=96, bn=True, act="Relu6"),
    "dw_56": Conv(144, 144, 56, 3, group=144, bn=True, act="Relu6"),
    "dw_28": Conv(192, 192, 28, 3, group=192, bn=True, act="Relu6"),
    "dw_14": Conv(384, 384, 14, 3, group=384, bn=True, act="Relu6"),
    "dw_7": Conv(960, 960, 7, 3, group=960, bn=True, act="Relu6"),
    "pw_expand_56": Conv(24, 144, 56, 1, bn=True, act="Relu6"),
    "pw_project_56": Conv(144, 24, 56, 1, bn=True, residual=True, act=""),
    "pw_expand_14": Conv(64, 384, 14, 1, bn=True, act="Relu6"),
    "pw_project_14": Conv(384, 64, 14, 1, bn=True, residual=True, act=""),
    "mm_bias": Dense(128, 768, 768),
    "mm_gelu": Dense(128, 768, 3072, act="Gelu"),
    "gemm_fc": Dense(1, 2048, 1000, gemm=True),
    "gemm_b64_relu": Dense(64, 784, 256, gemm=True, act="Relu"),
}


def _weight(
    rng: np.random.Generator, shape: tuple[int, ...], fan_in: int, fill: bool
) -> np.ndarray:
    if fill:
        return np.full(shape, 1.0 / fan_in, np.float32)
    return (rng.standard_normal(shape) * math.sqrt(2.0 / fan_in)).astype(np.float32)


def _activation(helper: object, act: str, x: str, nodes: list, const: Callable) -> str:
    """`x` through `act` (an ONNX op name, or Relu6: Clip to [0, 6])."""
    if not act:
        return x
    bounds = [const("lo", np.float32(0)), const("hi", np.float32(6))] if act == "Relu6" else []
    op = "Clip" if act == "Relu6" else act
    nodes.append(helper.make_node(op, [x, *bounds], [f"{x}_{act.lower()}"]))  # type: ignore[attr-defined]
    return f"{x}_{act.lower()}"


def build(layer: Conv | Dense, fill: bool, seed: int = 0):  # noqa: ANN201
    """The layer as an ONNX model (opset 20: Gelu is an operator)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes: list = []
    inits: list = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    if isinstance(layer, Conv):
        fan_in = layer.ci // layer.group * layer.kernel**2
        w = const(
            "w",
            _weight(
                rng, (layer.co, layer.ci // layer.group, layer.kernel, layer.kernel), fan_in, fill
            ),
        )
        b = const("b", np.full(layer.co, 0.01) if fill else rng.uniform(-0.2, 0.2, layer.co))
        k, s, p = layer.kernel, layer.stride, layer.pad
        attrs = {"kernel_shape": [k, k], "strides": [s, s], "pads": [p] * 4, "group": layer.group}
        nodes.append(helper.make_node("Conv", ["x", w, b], ["conv"], **attrs))
        y = "conv"
        if layer.bn:
            names = ["gamma", "beta", "mean", "var"]
            values = [rng.uniform(0.5, 1.5, layer.co), rng.uniform(-0.2, 0.2, layer.co),
                      rng.uniform(-0.2, 0.2, layer.co), rng.uniform(0.5, 1.5, layer.co)]  # fmt: skip
            if fill:
                values = [np.full(layer.co, v) for v in (1.0, 0.0, 0.0, 1.0)]
            bn = [const(n, v) for n, v in zip(names, values, strict=True)]
            nodes.append(helper.make_node("BatchNormalization", [y, *bn], ["bn"], epsilon=1e-5))
            y = "bn"
        inputs = [("x", [1, layer.ci, layer.size, layer.size])]
        out_shape = [1, layer.co, layer.out, layer.out]
        if layer.residual:
            inputs.append(("r", out_shape))
            nodes.append(helper.make_node("Add", [y, "r"], ["sum"]))
            y = "sum"
    else:
        w_shape = (layer.n, layer.k) if layer.gemm else (layer.k, layer.n)
        w = const("w", _weight(rng, w_shape, layer.k, fill))
        b = const("b", np.full(layer.n, 0.01) if fill else rng.uniform(-0.2, 0.2, layer.n))
        if layer.gemm:
            nodes.append(helper.make_node("Gemm", ["x", w, b], ["dense"], transB=1))
        else:
            nodes.append(helper.make_node("MatMul", ["x", w], ["mm"]))
            nodes.append(helper.make_node("Add", ["mm", b], ["dense"]))
        inputs = [("x", [layer.rows, layer.k])]
        out_shape = [layer.rows, layer.n]
        y = "dense"
    y = _activation(helper, layer.act, y, nodes, const)
    graph = helper.make_graph(
        nodes,
        "layer",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, out_shape)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    return model


def inputs_of(model: object) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    shapes = [[d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input]  # type: ignore[attr-defined]
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def cpu_seconds(fn: Callable[..., object], args: Sequence[object], calls: int) -> float:
    """Process CPU time per call over `calls` calls (all threads)."""
    start = time.process_time()
    for _ in range(calls):
        fn(*args)
    return (time.process_time() - start) / calls


def run_layer(name: str, layer: Conv | Dense, threads: int, fill: bool, cpu: bool) -> str:
    import onnx
    from bench_models import ort_session

    import dlc.onnx
    from dlc.api import compile_graph_module

    model = build(layer, fill)
    path = Path(tempfile.mkdtemp(prefix="dlc-layer-")) / f"{name}.onnx"
    onnx.save(model, str(path))
    start = time.perf_counter()
    compiled = compile_graph_module(dlc.onnx.load(path), num_threads=threads)
    compile_s = time.perf_counter() - start
    fn = compiled[next(iter(compiled.functions))]
    args = inputs_of(model)
    session = ort_session(path, threads)
    feeds = {i.name: a for i, a in zip(session.get_inputs(), args, strict=True)}
    want = session.run(None, feeds)[0]
    got = np.asarray(fn(*args))
    error = float(np.max(np.abs(got - want))) / max(float(np.max(np.abs(want))), 1e-30)
    dlc_s, ort_s = alternating_medians([lambda: fn(*args), lambda: session.run(None, feeds)])
    line = (
        f"{name:18} {compile_s:7.2f} {dlc_s * 1e6:10.1f} {ort_s * 1e6:10.1f} {dlc_s / ort_s:7.2f}"
        f" {layer.flops() / dlc_s * 1e-9:7.1f}  {error:.1e}"
    )
    if cpu:
        calls = max(3, int(0.3 / max(dlc_s, ort_s)))
        d = cpu_seconds(fn, args, calls)
        o = cpu_seconds(lambda *_: session.run(None, feeds), args, calls)
        line += f"  cpu {d * 1e6:9.1f} {o * 1e6:9.1f} {d / o:5.2f}"
    return line


def main(argv: Sequence[str] | None = None) -> int:
    from dlc.runtime.native import default_threads

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated layer names (--list)")
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--weights", choices=("random", "fill"), default="random")
    parser.add_argument("--cpu", action="store_true", help="also CPU time per call")
    parser.add_argument("--list", action="store_true", help="print the layers and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, layer in LAYERS.items():
            print(f"{name:18} {layer}")
        return 0
    os.environ.setdefault("DLC_CACHE_DIR", tempfile.mkdtemp(prefix="dlc-bench-cache-"))
    wanted = args.only.split(",") if args.only else list(LAYERS)
    unknown = [n for n in wanted if n not in LAYERS]
    if unknown:
        parser.error(f"unknown layer(s): {', '.join(unknown)} (see --list)")
    print(f"single layers, {args.weights} weights, {args.threads} threads (µs per call)")
    print(
        f"{'layer':18} {'compile':>7} {'dlc µs':>10} {'ort µs':>10} {'dlc/ort':>7} {'GFLOP/s':>7}  max rel err"
    )
    for name in wanted:
        print(
            run_layer(name, LAYERS[name], args.threads, args.weights == "fill", args.cpu),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
