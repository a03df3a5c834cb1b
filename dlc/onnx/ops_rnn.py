"""ONNX RNN, GRU and LSTM as a Scan over time per direction, and ReverseSequence.

A recurrent node expands into ONNX nodes that the importer imports in its place (as
a function body is): the input projection of every time step at once
(`X · Wᵀ + Wb [+ Rb]`, one MatMul outside the loop), then per direction one `Scan`
(`ops_control.py`: a CFG loop, so compile time does not grow with the sequence
length) whose body is the cell: the recurrent MatMul, the gates with their
activations (`activations`, `activation_alpha`/`activation_beta`), `clip` on every
gate's pre-activation, GRU's `linear_before_reset`, LSTM's peepholes and
`input_forget`. Outputs are stacked per direction and transposed for `layout` 1.

`sequence_lens` must be a constant (the backend compiles a model that feeds it from a
graph input for its value). Lengths equal to the sequence length are the plain
recurrence; shorter ones run the recurrence with a mask, as onnxruntime does: past a
batch row's length its state stays and its Y rows are 0, and a reversed direction
reverses each row within its length (ReverseSequence) before and after.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import GraphProto, NodeProto, helper, numpy_helper
from xdsl.dialects.builtin import IntAttr, StringAttr

from dlc.dialects.graph_elementwise import DataTypeCastOp, SelectOp
from dlc.dialects.graph_gather import GatherElementsOp
from dlc.dialects.graph_types import numpy_dtype
from dlc.onnx.emitter import ImportProblem, shape_of, tensor_type
from dlc.onnx.node import Converter, Node, Result
from dlc.onnx.subgraph import expand, lookup

EXPANSION_OPSET = 17
"""The opset the generated nodes are written in, whatever the model's."""

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
ACTIVATIONS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
PARAMETERS = {
    "affine": (1.0, 0.0), "leakyrelu": (0.01,), "thresholdedrelu": (1.0,),
    "scaledtanh": (1.0, 1.0), "hardsigmoid": (0.2, 0.5), "elu": (1.0,),
    "relu": (), "tanh": (), "sigmoid": (), "softsign": (), "softplus": (),
}  # fmt: skip
"""Activation names (case-insensitive) with the defaults of their alpha (and beta)."""


class Builder:
    """ONNX nodes with fresh names under one prefix."""

    def __init__(self, prefix: str):
        self.prefix, self.nodes, self.count = prefix, list[NodeProto](), 0

    def fresh(self) -> str:
        self.count += 1
        return f"{self.prefix}{self.count}"

    def __call__(self, op: str, inputs: Sequence[str], *, outputs: int = 1, **attrs: Any) -> str:
        names = [self.fresh() for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, list(inputs), names, **attrs))
        return names[0] if outputs == 1 else ",".join(names)

    def many(self, op: str, inputs: Sequence[str], outputs: int, **attrs: Any) -> list[str]:
        return self(op, inputs, outputs=outputs, **attrs).split(",")

    def const(self, value: np.ndarray) -> str:
        return self("Constant", [], value=numpy_helper.from_array(np.asarray(value)))


class Cell:
    """One direction's settings: activations (name, alpha, beta), clip, options."""

    def __init__(self, node: Node, dt: np.dtype, hidden: int):
        self.node, self.dt, self.hidden = node, dt, hidden
        self.clip = node.attr("clip")
        gru, lstm = node.op_type == "GRU", node.op_type == "LSTM"
        self.linear_before_reset = gru and bool(node.attr("linear_before_reset", 0))
        self.input_forget = lstm and bool(node.attr("input_forget", 0))

    def act(self, b: Builder, spec: tuple[str, float, float], x: str, clip: bool = True) -> str:
        """The activation `spec` of `x`, after `clip` (of a gate's pre-activation)."""
        if clip and self.clip is not None:
            x = b("Clip", [x, b.const(self._c(-self.clip)), b.const(self._c(self.clip))])
        name, alpha, beta = spec
        if name == "affine":
            return b("Add", [b("Mul", [x, b.const(self._c(alpha))]), b.const(self._c(beta))])
        if name == "scaledtanh":
            inner = b("Tanh", [b("Mul", [x, b.const(self._c(beta))])])
            return b("Mul", [inner, b.const(self._c(alpha))])
        op = {"leakyrelu": "LeakyRelu", "thresholdedrelu": "ThresholdedRelu"}.get(name)
        op = op or {"hardsigmoid": "HardSigmoid", "softsign": "Softsign"}.get(name)
        op = op or {"softplus": "Softplus", "elu": "Elu"}.get(name) or name.capitalize()
        params: dict[str, Any] = {"alpha": alpha, "beta": beta} if name == "hardsigmoid" else {}
        if name in ("leakyrelu", "thresholdedrelu", "elu"):
            params = {"alpha": alpha}
        return b(op, [x], **params)

    def _c(self, value: float) -> np.ndarray:
        return np.asarray(value, self.dt)


def activations(node: Node, directions: int) -> list[list[tuple[str, float, float]]]:
    """Per direction, the cell's activations with their alpha and beta."""
    per = len(ACTIVATIONS[node.op_type])
    names = node.attr("activations") or ACTIVATIONS[node.op_type] * directions
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in names]
    alphas = list(node.attr("activation_alpha") or [])
    betas = list(node.attr("activation_beta") or [])
    if len(names) != per * directions:
        raise ImportProblem(
            f"activations lists {len(names)} functions, expected {per * directions}"
        )
    specs = []
    for name in names:
        key = name.lower()
        if key not in PARAMETERS:
            raise ImportProblem(f"activation '{name}' is not supported")
        defaults = PARAMETERS[key]
        alpha = alphas.pop(0) if defaults and alphas else (defaults[0] if defaults else 0.0)
        beta = (
            betas.pop(0)
            if len(defaults) > 1 and betas
            else (defaults[1] if len(defaults) > 1 else 0.0)
        )
        specs.append((key, float(alpha), float(beta)))
    return [specs[d * per : (d + 1) * per] for d in range(directions)]


# ---- the expansion ----------------------------------------------------------------


class Recurrence:
    """The nodes of one RNN, GRU or LSTM node's expansion."""

    def __init__(self, node: Node):
        self.node, self.op = node, node.op_type
        x = node.input(0)
        self.dt = tensor_type(x).dt
        if self.dt not in ("f16", "f32", "f64"):
            raise ImportProblem(f"{self.op} of {self.dt} tensors is not supported")
        self.direction = node.require(
            "direction", ("forward", "reverse", "bidirectional"), "forward"
        )
        self.layout = node.require("layout", (0, 1), 0)
        self.directions = 2 if self.direction == "bidirectional" else 1
        dims = shape_of(x)
        if len(dims) != 3:
            raise ImportProblem(f"X must have rank 3, got {len(dims)}")
        self.steps, self.batch = (dims[1], dims[0]) if self.layout else dims[:2]
        self.hidden = shape_of(node.input(2))[-1]
        self._check_weights(dims[2])
        self.lens = self._lengths()
        self.cell = Cell(node, numpy_dtype(self.dt), self.hidden)
        self.specs = activations(node, self.directions)
        first = next((n for n in node.proto.output if n), self.op)
        self.b = Builder(f"{first}.{self.op.lower()}.")

    def _check_weights(self, inputs: int) -> None:
        gates, hidden, d = GATES[self.op], self.hidden, self.directions
        w, r = shape_of(self.node.input(1)), shape_of(self.node.input(2))
        if int(self.node.attr("hidden_size", hidden)) != hidden:
            raise ImportProblem(f"hidden_size differs from R's last dimension {hidden}")
        if w != (d, gates * hidden, inputs) or r != (d, gates * hidden, hidden):
            raise ImportProblem(
                f"W {w} and R {r} do not fit {d} direction(s), {gates} gate(s), "
                f"hidden size {hidden} and input size {inputs}"
            )

    def _lengths(self) -> np.ndarray | None:
        """The constant sequence lengths when some row is shorter than X."""
        lens = self.node.constant(4, "sequence_lens")
        if lens is None:
            return None
        lens = lens.astype(np.int64).reshape(-1)
        if lens.shape != (self.batch,) or np.any(lens < 0) or np.any(lens > self.steps):
            raise ImportProblem(f"sequence_lens {lens.tolist()} do not fit X")
        return lens if np.any(lens != self.steps) else None

    def expand(self) -> list[Result]:
        b, names = self.b, self.node.names
        x = b("Transpose", [names[0]], perm=[1, 0, 2]) if self.layout else names[0]
        outs = [self._direction(x, d) for d in range(self.directions)]
        axes1, axes0 = b.const(np.array([1])), b.const(np.array([0]))
        y = b("Concat", [b("Unsqueeze", [o[0], axes1]) for o in outs], axis=1)
        states = [
            b("Concat", [b("Unsqueeze", [o[k], axes0]) for o in outs], axis=0)
            for k in range(1, len(outs[0]))
        ]
        if self.layout:
            y = b("Transpose", [y], perm=[2, 0, 1, 3])
            states = [b("Transpose", [s], perm=[1, 0, 2]) for s in states]
        scope = self.node.scope
        expand(scope, b.nodes, EXPANSION_OPSET, f"{self.op}'s expansion")
        return [lookup(scope, n, self.op) for n in (y, *states)]

    def _input(self, i: int, d: int, transpose: bool = False) -> str | None:
        """Direction d's slice of input i (None when omitted)."""
        names = self.node.names
        if i >= len(names) or not names[i]:
            return None
        name = names[i]
        if transpose and self.layout:
            name = self.b("Transpose", [name], perm=[1, 0, 2])
        return self.b("Gather", [name, self.b.const(np.array(d, np.int64))], axis=0)

    def _zeros(self, *shape: int) -> str:
        return self.b.const(np.zeros(shape, numpy_dtype(self.dt)))

    def _direction(self, x: str, d: int) -> list[str]:
        """Direction d's Y ([T, B, H]) and final states, from one Scan. The gates'
        input projections and recurrent weights are split outside the loop."""
        b, gates = self.b, GATES[self.op]
        reverse = self.direction == "reverse" or d == 1
        w, r = self._input(1, d), self._input(2, d)
        assert w is not None and r is not None
        xw = b("MatMul", [x, b("Transpose", [w], perm=[1, 0])])
        bias, rb = self._input(3, d), None
        if bias is not None:
            wb, rb = b.many("Split", [bias], 2, axis=0)
            xw = b("Add", [xw, wb if self.op == "GRU" else b("Add", [wb, rb])])
        zeros = self._zeros(self.batch, self.hidden)
        states = [self._input(5, d, transpose=True) or zeros]
        if self.op == "LSTM":
            states.append(self._input(6, d, transpose=True) or zeros)
        scanned = b.many("Split", [xw], gates, axis=-1) if gates > 1 else [xw]
        lens = None
        if self.lens is not None:
            lens = b.const(self.lens)
            if reverse:
                scanned = [b("ReverseSequence", [v, lens], time_axis=0, batch_axis=1) for v in scanned]  # fmt: skip
            mask = np.arange(self.steps)[:, None] < self.lens[None, :]
            scanned.append(b.const(mask[:, :, None]))
        parts = b.many("Split", [r], gates, axis=0) if gates > 1 else [r]
        rts = [b("Transpose", [p], perm=[1, 0]) for p in parts]
        biases: list[str | None] = (
            [*b.many("Split", [rb], 3)] if rb is not None and self.op == "GRU" else [None] * 3
        )
        body = self._body(d, rts, biases)
        flip = int(reverse and lens is None)
        outs = b.many(
            "Scan", [*states, *scanned], len(states) + 1, body=body,
            num_scan_inputs=len(scanned), scan_input_directions=[flip] * len(scanned),
            scan_output_directions=[flip],
        )  # fmt: skip
        y = outs[-1]
        if lens is not None and reverse:
            y = b("ReverseSequence", [y, lens], time_axis=0, batch_axis=1)
        return [y, *outs[:-1]]

    def _body(self, d: int, rts: list[str], biases: list[str | None]) -> GraphProto:
        """The cell: (states..., each gate's X·Wᵀ row[, mask row]) -> (states..., Y row)."""
        inner = Builder(f"{self.b.prefix}d{d}.")
        states = [inner.fresh() for _ in range(2 if self.op == "LSTM" else 1)]
        xw = [inner.fresh() for _ in rts]
        mask = inner.fresh() if self.lens is not None else None
        if self.op == "RNN":
            pre = inner("Add", [xw[0], inner("MatMul", [states[0], rts[0]])])
            new = [self.cell.act(inner, self.specs[d][0], pre)]
        elif self.op == "GRU":
            new = [self._gru(inner, d, rts, biases, states[0], xw)]
        else:
            new = self._lstm(inner, d, rts, states, xw)
        if mask is None:
            outs, y = new, inner("Identity", [new[0]])
        else:
            outs = [inner("Where", [mask, n, s]) for n, s in zip(new, states, strict=True)]
            y = inner("Where", [mask, new[0], self._zeros(self.batch, self.hidden)])
        ins = [*states, *xw, *([mask] if mask else [])]
        return helper.make_graph(
            inner.nodes, f"{self.op.lower()}_cell",
            [helper.make_empty_tensor_value_info(n) for n in ins],
            [helper.make_empty_tensor_value_info(n) for n in [*outs, y]],
        )  # fmt: skip

    def _gru(
        self, b: Builder, d: int, rts: list[str], biases: list[str | None], h: str, xw: list[str]
    ) -> str:
        """Ht = (1 - z) h~ + z Ht-1 (linear_before_reset: r applied after Rh)."""
        f, g = self.specs[d]

        def plus(x: str, bias: str | None) -> str:
            return x if bias is None else b("Add", [x, bias])

        def gate(k: int) -> str:
            return self.cell.act(b, f, plus(b("Add", [xw[k], b("MatMul", [h, rts[k]])]), biases[k]))  # fmt: skip

        z, reset = gate(0), gate(1)
        if self.cell.linear_before_reset:
            recurrent = plus(b("MatMul", [h, rts[2]]), biases[2])
            pre = b("Add", [xw[2], b("Mul", [reset, recurrent])])
        else:
            pre = plus(b("Add", [xw[2], b("MatMul", [b("Mul", [reset, h]), rts[2]])]), biases[2])
        candidate = self.cell.act(b, g, pre)
        keep = b("Sub", [self.b.const(np.asarray(1, numpy_dtype(self.dt))), z])
        return b("Add", [b("Mul", [keep, candidate]), b("Mul", [z, h])])

    def _lstm(self, b: Builder, d: int, rts: list[str], states: list[str], xw: list[str]) -> list[str]:  # fmt: skip
        """Gates i, o, f, c (peepholes on i, f from Ct-1 and on o from Ct)."""
        f, g, h = self.specs[d]
        h_prev, c_prev = states
        i, o, forget, c = (b("Add", [x, b("MatMul", [h_prev, rt])]) for x, rt in zip(xw, rts, strict=True))  # fmt: skip
        peep = self._input(7, d)
        pi, po, pf = self.b.many("Split", [peep], 3) if peep is not None else (None,) * 3
        if pi is not None and pf is not None:
            i = b("Add", [i, b("Mul", [pi, c_prev])])
            forget = b("Add", [forget, b("Mul", [pf, c_prev])])
        i = self.cell.act(b, f, i)
        if self.cell.input_forget:
            forget = b("Sub", [self.b.const(np.asarray(1, numpy_dtype(self.dt))), i])
        else:
            forget = self.cell.act(b, f, forget)
        c_new = b("Add", [b("Mul", [forget, c_prev]), b("Mul", [i, self.cell.act(b, g, c)])])
        if po is not None:
            o = b("Add", [o, b("Mul", [po, c_new])])
        o = self.cell.act(b, f, o)
        return [b("Mul", [o, self.cell.act(b, h, c_new, clip=False)]), c_new]


def recurrent(node: Node) -> list[Result]:
    return Recurrence(node).expand()


# ---- ReverseSequence --------------------------------------------------------------


def reverse_sequence(node: Node) -> list[Result]:
    """out[t, b] = x[len[b] - 1 - t, b] for t < len[b], else x[t, b]: a gatherElements
    along the time axis with indices computed from the lengths."""
    e, x, lens = node.emit, node.input(0), node.input(1)
    dims = shape_of(x)
    if len(dims) < 2:
        raise ImportProblem(f"the input must have rank ≥ 2, got {len(dims)}")
    time = node.require("time_axis", (0, 1), 0)
    batch = node.require("batch_axis", (0, 1), 1)
    if time == batch or shape_of(lens) != (dims[batch],):
        raise ImportProblem(
            f"time_axis {time}, batch_axis {batch} and lengths {shape_of(lens)} do not fit {dims}"
        )
    shape = [1] * len(dims)
    shape[time] = dims[time]
    t = e.constant(np.arange(dims[time], dtype=np.int64).reshape(shape))
    shape = [1] * len(dims)
    shape[batch] = dims[batch]
    n = e.reshape(
        e.op(DataTypeCastOp, [lens], dtype=StringAttr("i64"))
        if tensor_type(lens).dt != "i64"
        else lens,
        shape,
    )
    back = e.binary("subtract", e.binary("subtract", n, e.scalar(1, "i64")), t)
    index = e.op(SelectOp, [back, t, e.binary("lessThan", t, n)])
    index = e.binary("add", index, e.splat(0, dims, "i64"))
    return [e.op(GatherElementsOp, [x, index], axis=IntAttr(time))]


CONVERTERS: dict[str, Converter] = {
    "RNN": recurrent,
    "GRU": recurrent,
    "LSTM": recurrent,
    "ReverseSequence": reverse_sequence,
}
