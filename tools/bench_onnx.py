"""onnxruntime twins of the bench workloads, built with onnx.helper (optional peer).

The session runs on the bench's thread count (intra-op; inter-op 1, sequential
execution) with spinning off (`session.intra_op.allow_spinning` and
`session.inter_op.allow_spinning` = "0"), so its idle threads do not burn the cores
the other columns are timed on.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_common import Arrays, Prepared, Workload

Nodes = list[Any]
Outputs = list[tuple[str, tuple[int, ...]]]


def onnx_model(nodes: Nodes, inputs: Arrays, outputs: Outputs) -> Any:
    """A float32 ONNX model (opset 17) from onnx.helper nodes; inputs are in0, in1, ..."""
    from onnx import TensorProto, helper

    def info(name: str, shape: tuple[int, ...]) -> Any:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))

    graph = helper.make_graph(
        nodes,
        "dlc_bench",
        [info(f"in{k}", a.shape) for k, a in enumerate(inputs)],
        [info(*o) for o in outputs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what every onnxruntime release accepts for opset 17
    return model


def const(name: str, value: float) -> Any:
    from onnx import TensorProto, helper

    tensor = helper.make_tensor(name + "_v", TensorProto.FLOAT, [], [value])
    return helper.make_node("Constant", [], [name], value=tensor)


def int64_const(name: str, values: list[int]) -> Any:
    from onnx import TensorProto, helper

    tensor = helper.make_tensor(name + "_v", TensorProto.INT64, [len(values)], values)
    return helper.make_node("Constant", [], [name], value=tensor)


def node(op: str, inputs: list[str], output: str, **attributes: Any) -> Any:
    from onnx import helper

    return helper.make_node(op, inputs, [output], **attributes)


def add_one(w: Workload, inputs: Arrays) -> tuple[Nodes, Outputs]:
    return [const("one", 1.0), node("Add", ["in0", "one"], "out")], [("out", inputs[0].shape)]


def lstm_tail(w: Workload, inputs: Arrays) -> tuple[Nodes, Outputs]:
    nodes = [
        const("one", 1.0),
        node("Add", ["in1", "one"], "f1"),  # inputs: c, f, i, j, o
        node("Sigmoid", ["f1"], "sf"),
        node("Mul", ["in0", "sf"], "cf"),
        node("Sigmoid", ["in2"], "si"),
        node("Tanh", ["in3"], "tj"),
        node("Mul", ["si", "tj"], "ij"),
        node("Add", ["cf", "ij"], "new_c"),
        node("Tanh", ["new_c"], "tc"),
        node("Sigmoid", ["in4"], "so"),
        node("Mul", ["tc", "so"], "new_h"),
    ]
    shape = inputs[0].shape
    return nodes, [("new_c", shape), ("new_h", shape)]


def softmax_chain(w: Workload, inputs: Arrays) -> tuple[Nodes, Outputs]:
    names = ["in0", *(f"x{k}" for k in range(1, w.chain)), "out"]
    nodes = [node("Softmax", [a], b) for a, b in zip(names, names[1:])]
    return nodes, [("out", inputs[0].shape)]


def mlp_forward(w1: str, b1: str, w2: str, b2: str) -> Nodes:
    """x = in0 and the named weights -> probs (and z1, h for the backward pass)."""
    return [
        node("MatMul", ["in0", w1], "xw1"),
        node("Add", ["xw1", b1], "z1"),
        node("Relu", ["z1"], "h"),
        node("MatMul", ["h", w2], "hw2"),
        node("Add", ["hw2", b2], "logits"),
        node("Softmax", ["logits"], "probs", axis=1),
    ]


def mlp(w: Workload, inputs: Arrays) -> tuple[Nodes, Outputs]:
    return mlp_forward("in1", "in2", "in3", "in4"), [("probs", (inputs[0].shape[0], 10))]


def train_step(w: Workload, inputs: Arrays) -> tuple[Nodes, Outputs]:
    """Forward, the same manual backward as the NumPy twin, SGD (rate 0.01)."""
    backward = [
        node("Sub", ["probs", "in1"], "diff"),
        const("inv_batch", 1.0 / inputs[0].shape[0]),
        node("Mul", ["diff", "inv_batch"], "dlogits"),
        node("Transpose", ["h"], "hT"),
        node("MatMul", ["hT", "dlogits"], "dw2"),
        int64_const("axis0", [0]),
        node("ReduceSum", ["dlogits", "axis0"], "db2", keepdims=1),
        node("Transpose", ["in4"], "w2T"),
        node("MatMul", ["dlogits", "w2T"], "dh"),
        const("zero", 0.0),
        node("Greater", ["z1", "zero"], "active"),
        node("Where", ["active", "dh", "zero"], "dz1"),
        node("Transpose", ["in0"], "xT"),
        node("MatMul", ["xT", "dz1"], "dw1"),
        node("ReduceSum", ["dz1", "axis0"], "db1", keepdims=1),
        const("rate", 0.01),
    ]
    update = []
    for k, (param, grad) in enumerate(
        [("in2", "dw1"), ("in3", "db1"), ("in4", "dw2"), ("in5", "db2")]
    ):
        update += [
            node("Mul", [grad, "rate"], f"step{k}"),
            node("Sub", [param, f"step{k}"], f"out{k}"),
        ]
    outputs = [(f"out{k}", inputs[k + 2].shape) for k in range(4)]
    return [*mlp_forward("in2", "in3", "in4", "in5"), *backward, *update], outputs


def matmul(w: Workload, inputs: Arrays) -> tuple[Nodes, Outputs]:
    return [node("MatMul", ["in0", "in1"], "out")], [("out", (1024, 1024))]


def conv2d(w: Workload, inputs: Arrays) -> tuple[Nodes, Outputs]:
    return [node("Conv", ["in0", "in1"], "out", pads=[1, 1, 1, 1])], [("out", (1, 64, 56, 56))]


def layernorm_gelu(w: Workload, inputs: Arrays) -> tuple[Nodes, Outputs]:
    nodes = [
        int64_const("flat", [inputs[0].shape[1]]),
        node("Reshape", ["in1", "flat"], "gamma"),
        node("Reshape", ["in2", "flat"], "beta"),
        node("LayerNormalization", ["in0", "gamma", "beta"], "y", axis=-1, epsilon=1e-5),
        node("Mul", ["y", "y"], "y2"),
        node("Mul", ["y2", "y"], "y3"),
        const("c1", 0.044715),
        node("Mul", ["y3", "c1"], "cube"),
        node("Add", ["y", "cube"], "inner"),
        const("c2", 0.7978845608028654),
        node("Mul", ["inner", "c2"], "arg"),
        node("Tanh", ["arg"], "t"),
        const("one", 1.0),
        node("Add", ["t", "one"], "t1"),
        const("half", 0.5),
        node("Mul", ["y", "half"], "hy"),
        node("Mul", ["hy", "t1"], "out"),
    ]
    return nodes, [("out", inputs[0].shape)]


def lstm_step(w: Workload, inputs: Arrays) -> tuple[Nodes, Outputs]:
    """x @ (Wf, Wi, Wj, Wo), then W1's tail (inputs: x, c, wf, wi, wj, wo)."""
    gates = [node("MatMul", ["in0", f"in{k}"], f"g{k}") for k in range(2, 6)]
    tail, outputs = lstm_tail(w, inputs[1:])
    renamed = {"in0": "in1", "in1": "g2", "in2": "g3", "in3": "g4", "in4": "g5"}
    for n in tail:
        for k, name in enumerate(n.input):
            n.input[k] = renamed.get(name, name)
    return gates + tail, outputs


def attention(w: Workload, inputs: Arrays) -> tuple[Nodes, Outputs]:
    """softmax(q kᵀ / √d) v with q, k, v = x Wq, x Wk, x Wv."""
    nodes = [
        node("MatMul", ["in0", "in1"], "q"),
        node("MatMul", ["in0", "in2"], "k"),
        node("MatMul", ["in0", "in3"], "v"),
        node("Transpose", ["k"], "kt", perm=[1, 0]),
        node("MatMul", ["q", "kt"], "s"),
        const("scale", 1.0 / float(np.sqrt(inputs[0].shape[1]))),
        node("Mul", ["s", "scale"], "ss"),
        node("Softmax", ["ss"], "p", axis=-1),
        node("MatMul", ["p", "v"], "out"),
    ]
    return nodes, [("out", (inputs[0].shape[0], inputs[3].shape[1]))]


def inception(w: Workload, inputs: Arrays) -> tuple[Nodes, Outputs]:
    from bench_inception import onnx_nodes

    return onnx_nodes(), [("out", (1, 256, 28, 28))]


GRAPHS: dict[str, Callable[[Workload, Arrays], tuple[Nodes, Outputs]]] = {
    "W0": add_one,
    "W1": lstm_tail,
    "W2": softmax_chain,
    "W3": mlp,
    "W4": matmul,
    "W5": conv2d,
    "W6": train_step,
    "W7": layernorm_gelu,
    "W10": lstm_step,
    "W11": attention,
    "W12": inception,
}


class OnnxRuntimePeer:
    """onnxruntime's CPU execution provider on an ONNX twin of each workload."""

    name = "ort"

    def __init__(self, threads: int) -> None:
        self.threads = threads

    def installed(self) -> bool:
        return all(importlib.util.find_spec(m) is not None for m in ("onnx", "onnxruntime"))

    def status(self) -> str:
        if not self.installed():
            return "onnxruntime: not installed (pip install -e '.[bench]')"
        import onnxruntime

        return (
            f"onnxruntime {onnxruntime.__version__}: CPU provider, intra-op threads "
            f"{self.threads}, inter-op 1, spinning off"
        )

    def prepare(self, w: Workload, inputs: Arrays) -> Prepared | None:
        import onnxruntime as ort

        nodes, outputs = GRAPHS[w.twin](w, inputs)
        model = onnx_model(nodes, inputs, outputs)
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        names = [i.name for i in session.get_inputs()]
        run = session.run

        def call(*args: np.ndarray) -> Any:
            out = run(None, dict(zip(names, args, strict=True)))
            return out[0] if len(out) == 1 else tuple(out)

        return call, inputs
