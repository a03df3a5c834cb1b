"""ONNX RNN, GRU, LSTM and ReverseSequence, interpreted and compiled, against onnx's
reference implementation, and against a NumPy implementation of the attributes the
reference ignores (activations, clip, input_forget, sequence_lens)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx_models import interpret, run

import dlc
import dlc.onnx
from dlc.onnx import OnnxImportError

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


FUNCTIONS = {
    "Tanh": lambda x, a, b: np.tanh(x),
    "Sigmoid": lambda x, a, b: _sigmoid(x),
    "Relu": lambda x, a, b: np.maximum(x, 0),
    "HardSigmoid": lambda x, a, b: np.clip(a * x + b, 0, 1),
    "LeakyRelu": lambda x, a, b: np.where(x >= 0, x, a * x),
    "Softsign": lambda x, a, b: x / (1 + np.abs(x)),
    "Affine": lambda x, a, b: a * x + b,
    "ScaledTanh": lambda x, a, b: a * np.tanh(b * x),
}


def _inputs(op, t, batch, size, hidden, directions, seed=0):
    rng = np.random.default_rng(seed)
    g = GATES[op]
    arrays = {
        "X": rng.standard_normal((t, batch, size)),
        "W": 0.5 * rng.standard_normal((directions, g * hidden, size)),
        "R": 0.5 * rng.standard_normal((directions, g * hidden, hidden)),
        "B": rng.standard_normal((directions, 2 * g * hidden)),
        "h0": rng.standard_normal((directions, batch, hidden)),
    }
    if op == "LSTM":
        arrays["c0"] = rng.standard_normal((directions, batch, hidden))
        arrays["P"] = rng.standard_normal((directions, 3 * hidden))
    return {k: v.astype(np.float32) for k, v in arrays.items()}


def _model(op, arrays, lens=None, outputs=("Y", "Y_h", "Y_c"), layout=0, **attrs):
    """X is the graph input; the weights (and sequence_lens) are initializers."""
    x = arrays["X"].transpose(1, 0, 2) if layout else arrays["X"]
    names = ["X", "W", "R", "B", "lens" if lens is not None else "", "h0"]
    names += ["c0", "P"] if op == "LSTM" else []
    inits = dict(arrays)
    if layout:
        inits["h0"] = inits["h0"].transpose(1, 0, 2)
        if "c0" in inits:
            inits["c0"] = inits["c0"].transpose(1, 0, 2)
    if lens is not None:
        inits["lens"] = np.asarray(lens, np.int32)
    del inits["X"]
    outs = list(outputs[: 3 if op == "LSTM" else 2])
    n = helper.make_node(op, names, outs, name="rnn", layout=layout, **attrs)
    g = helper.make_graph(
        [n], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
        [numpy_helper.from_array(a, k) for k, a in inits.items()],
    )  # fmt: skip
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), x


def _cell(op, x, h, c, w, r, b, p, f, options):
    """One step of one batch row, by the operator's equations."""
    wb, rb = np.split(b, 2)
    act, clip = options["act"], options.get("clip")

    def pre(v):
        return np.clip(v, -clip, clip) if clip is not None else v

    if op == "RNN":
        return act[0](pre(x @ w.T + h @ r.T + wb + rb)), None
    if op == "GRU":
        (wz, wr, wh), (rz, rr, rh) = np.split(w, 3), np.split(r, 3)
        (wbz, wbr, wbh), (rbz, rbr, rbh) = np.split(wb, 3), np.split(rb, 3)
        z = act[0](pre(x @ wz.T + h @ rz.T + wbz + rbz))
        reset = act[0](pre(x @ wr.T + h @ rr.T + wbr + rbr))
        if options.get("linear_before_reset"):
            cand = act[1](pre(x @ wh.T + reset * (h @ rh.T + rbh) + wbh))
        else:
            cand = act[1](pre(x @ wh.T + (reset * h) @ rh.T + rbh + wbh))
        return (1 - z) * cand + z * h, None
    gi, go, gf, gc = np.split(x @ w.T + h @ r.T + wb + rb, 4)
    pi, po, pf = np.split(p, 3)
    i = act[0](pre(gi + pi * c))
    forget = 1 - i if options.get("input_forget") else act[0](pre(gf + pf * c))
    c_new = forget * c + i * act[1](pre(gc))
    o = act[0](pre(go + po * c_new))
    return o * act[2](c_new), c_new


def _numpy(op, arrays, lens, direction, options):
    """Y [T, D, B, H], Y_h and Y_c: each batch row runs over its own length; Y is 0
    past it, and a reversed direction reads the row's steps backwards within it."""
    x = arrays["X"].astype(np.float64)
    t, batch, _ = x.shape
    d_count, hidden = arrays["h0"].shape[0], arrays["R"].shape[-1]
    lens = np.full(batch, t) if lens is None else np.asarray(lens)
    y = np.zeros((t, d_count, batch, hidden))
    yh, yc = np.zeros((d_count, batch, hidden)), np.zeros((d_count, batch, hidden))
    for d in range(d_count):
        back = direction == "reverse" or d == 1
        for b in range(batch):
            h = arrays["h0"][d, b].astype(np.float64)
            c = arrays["c0"][d, b].astype(np.float64) if op == "LSTM" else None
            p = arrays["P"][d] if op == "LSTM" else None
            steps = range(lens[b] - 1, -1, -1) if back else range(lens[b])
            for s in steps:
                h, c = _cell(op, x[s, b], h, c, arrays["W"][d], arrays["R"][d], arrays["B"][d], p, None, options[d])  # fmt: skip
                y[s, d, b] = h
            yh[d, b] = h
            if c is not None:
                yc[d, b] = c
    return y, yh, yc


def _assert_close(got, expected, rtol=2e-5, atol=2e-5):
    for a, b in zip(got, expected, strict=False):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_recurrence_matches_onnx_reference(op, direction):
    arrays = _inputs(op, 4, 2, 3, 5, 2 if direction == "bidirectional" else 1)
    m, x = _model(op, arrays, direction=direction, hidden_size=5)
    _assert_close(interpret(m, x), ReferenceEvaluator(m).run(None, {"X": x}))


@pytest.mark.parametrize(
    ("op", "direction", "layout", "attrs"),
    [
        ("LSTM", "bidirectional", 0, {}),
        ("GRU", "reverse", 1, {"linear_before_reset": 1}),
        ("RNN", "forward", 1, {}),
    ],
)
def test_recurrence_compiled_matches_onnx_reference(op, direction, layout, attrs):
    arrays = _inputs(op, 5, 3, 4, 6, 2 if direction == "bidirectional" else 1, seed=1)
    m, x = _model(op, arrays, layout=layout, direction=direction, **attrs)
    _assert_close(run(m, x), ReferenceEvaluator(m).run(None, {"X": x}))


def _specs(names, alphas=(), betas=()):
    specs = {"activations": list(names), "activation_alpha": list(alphas)}
    specs["activation_beta"] = list(betas)
    return {k: v for k, v in specs.items() if v}


CASES = [
    # op, direction, lens, attributes, activations per direction (function, alpha, beta)
    ("LSTM", "bidirectional", [3, 1],
     {**_specs(["HardSigmoid", "LeakyRelu", "Softsign", "Sigmoid", "Tanh", "ScaledTanh"],
               [0.3, 0.2, 0.7], [0.4, 1.5]), "clip": 0.8, "input_forget": 1},
     [[("HardSigmoid", 0.3, 0.4), ("LeakyRelu", 0.2, 0), ("Softsign", 0, 0)],
      [("Sigmoid", 0, 0), ("Tanh", 0, 0), ("ScaledTanh", 0.7, 1.5)]]),
    ("GRU", "reverse", [2, 3], {**_specs(["Sigmoid", "Affine"], [0.5], [0.1]),
                                "linear_before_reset": 1},
     [[("Sigmoid", 0, 0), ("Affine", 0.5, 0.1)]]),
    ("RNN", "forward", [3, 0], {**_specs(["Relu"]), "clip": 1.5}, [[("Relu", 0, 0)]]),
]  # fmt: skip


@pytest.mark.parametrize(("op", "direction", "lens", "attrs", "acts"), CASES)
def test_recurrence_attributes_and_lengths_match_numpy(op, direction, lens, attrs, acts):
    """Attributes onnx's reference ignores, against the operator's equations."""
    arrays = _inputs(op, 3, 2, 3, 4, len(acts), seed=2)
    m, x = _model(op, arrays, lens=lens, direction=direction, **attrs)
    options = [
        {"act": [lambda v, f=FUNCTIONS[n], a=a, b=b: f(v, a, b) for n, a, b in per],
         "clip": attrs.get("clip"), "input_forget": attrs.get("input_forget"),
         "linear_before_reset": attrs.get("linear_before_reset")}
        for per in acts
    ]  # fmt: skip
    expected = _numpy(op, arrays, lens, direction, options)
    _assert_close(interpret(m, x), expected)
    if op == "LSTM":
        _assert_close(run(m, x), expected)


def test_recurrence_is_one_loop_whatever_the_sequence_length():
    """The time loop is a CFG loop: the program does not grow with T."""
    sizes = []
    for t in (10, 100):
        m, _ = _model("LSTM", _inputs("LSTM", t, 1, 8, 16, 2), direction="bidirectional")
        sizes.append(len(dlc.print_module(dlc.onnx.load(m)).splitlines()))
    assert sizes[0] == sizes[1]


def test_recurrence_refusals():
    arrays = _inputs("GRU", 3, 2, 3, 4, 1)
    cases = [
        (
            _model("GRU", arrays, activations=["Sigmoid", "Gelu"])[0],
            "activation 'Gelu' is not supported",
        ),  # fmt: skip
        (
            _model("GRU", arrays, activations=["Sigmoid"])[0],
            "activations lists 1 functions, expected 2",
        ),  # fmt: skip
        (_model("GRU", arrays, lens=[4, 1])[0], "sequence_lens [4, 1] do not fit X"),
        (
            _model("GRU", arrays, hidden_size=3)[0],
            "hidden_size differs from R's last dimension 4",
        ),  # fmt: skip
        (
            _model("GRU", arrays, direction="bidirectional")[0],
            "W (1, 12, 3) and R (1, 12, 4) do not fit 2 direction(s), 3 gate(s), hidden size 4 and input size 3",
        ),  # fmt: skip
        (_model("GRU", arrays, layout=2)[0], "layout=2 is not supported"),
    ]
    for m, message in cases:
        with pytest.raises(OnnxImportError) as info:
            dlc.onnx.load(m)
        assert info.value.problems == [f"node 'rnn' (GRU): {message}"]


def test_sequence_lens_from_a_graph_input_are_wanted_as_a_constant():
    m, _ = _model("GRU", _inputs("GRU", 3, 2, 3, 4, 1), lens=[3, 3])
    lens = m.graph.initializer.pop(-1)
    m.graph.input.append(helper.make_tensor_value_info(lens.name, TensorProto.INT32, [2]))
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(m)
    assert info.value.problems == ["node 'rnn' (GRU): sequence_lens (input 4) must be a constant"]
    assert info.value.wanted_constants == ["lens"]


# ---- ReverseSequence --------------------------------------------------------------


@pytest.mark.parametrize(("time_axis", "batch_axis"), [(0, 1), (1, 0)])
def test_reverse_sequence_with_lengths_given_at_run_time(time_axis, batch_axis):
    shape = [5, 3, 2] if time_axis == 0 else [3, 5, 2]
    n = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], name="y", time_axis=time_axis, batch_axis=batch_axis)  # fmt: skip
    g = helper.make_graph(
        [n], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape),
         helper.make_tensor_value_info("lens", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 10)])
    x = np.arange(30, dtype=np.float32).reshape(shape)
    lens = np.array([5, 1, 3], np.int64)
    expected = ReferenceEvaluator(m).run(None, {"x": x, "lens": lens})[0]
    np.testing.assert_array_equal(interpret(m, x, lens), expected)
    np.testing.assert_array_equal(run(m, x, lens), expected)


def test_reverse_sequence_refusal():
    n = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], name="y", time_axis=1, batch_axis=1)  # fmt: skip
    g = helper.make_graph(
        [n], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2]),
         helper.make_tensor_value_info("lens", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )  # fmt: skip
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 10)]))
    assert info.value.problems == [
        "node 'y' (ReverseSequence): time_axis 1, batch_axis 1 and lengths (2,) do not fit (2, 2)"
    ]
