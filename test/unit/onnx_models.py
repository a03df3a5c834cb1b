"""Helpers the ONNX tests share: small models built with `onnx.helper`, and NumPy
versions of the ONNX ops whose semantics take more than one line.

- `make(nodes, inputs, outputs, initializers, opset)`: a `ModelProto` from node
  protos, `{name: shape}` inputs and outputs (shape None: unknown) and initializer
  arrays;
- `node(op_type, inputs, outputs, **attributes)`: `onnx.helper.make_node` with a name;
- `run(model, *args)`: compiled by dlc; `interpret(model, *args)`: the reference
  interpreter on the imported module;
- `conv`, `pool`: NumPy convolution and pooling with explicit pads;
- `typed_model(nodes, inputs, constants, outputs, opset)`: inputs of any ONNX type,
  outputs of unknown type; `check_reference(model, *args)`: dlc compiled and
  interpreted against onnx's reference implementation.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import dlc
import dlc.onnx
from dlc.semantics.interpreter import run_function

F32 = np.float32


def node(
    op_type: str, inputs: Sequence[str], outputs: Sequence[str], **attrs: Any
) -> onnx.NodeProto:
    return helper.make_node(op_type, list(inputs), list(outputs), name=outputs[0], **attrs)


def make(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, Sequence[int | str] | None],
    outputs: Mapping[str, Sequence[int | str] | None],
    initializers: Mapping[str, np.ndarray] | None = None,
    opset: int = 17,
    dtype: int = TensorProto.FLOAT,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        list(nodes),
        "g",
        [helper.make_tensor_value_info(n, dtype, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, dtype, s) for n, s in outputs.items()],
        [numpy_helper.from_array(a, n) for n, a in (initializers or {}).items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def run(model: onnx.ModelProto, *args: np.ndarray, **options: Any) -> Any:
    return dlc.compile_onnx(model, **options).g(*args)


def interpret(model: onnx.ModelProto, *args: np.ndarray) -> Any:
    return run_function(dlc.onnx.load(model), "g", list(args))


def typed_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, tuple[Sequence[int], int]],
    constants: Mapping[str, np.ndarray] | None = None,
    outputs: Sequence[str] | None = None,
    opset: int = 18,
) -> onnx.ModelProto:
    """`inputs` name: (shape, ONNX element type); `constants` initializers; the
    outputs (default: the last node's) of unknown type."""
    graph = helper.make_graph(
        list(nodes),
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, (s, t) in inputs.items()],
        [
            helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None)
            for n in (outputs or nodes[-1].output)
        ],
        [numpy_helper.from_array(a, n) for n, a in (constants or {}).items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def check_reference(model: onnx.ModelProto, *args: np.ndarray, rtol: float = 0.0) -> list:
    """dlc's compiled and interpreted outputs equal onnx's reference implementation's
    (shapes, dtypes, values within `rtol`, signs of zeros); the reference's outputs."""
    from onnx.reference import ReferenceEvaluator

    feeds = {i.name: a for i, a in zip(model.graph.input, args, strict=True)}
    expected = ReferenceEvaluator(model).run(None, feeds)
    compiled = dlc.compile_onnx(model).g(*args)
    interpreted = run_function(dlc.onnx.load(model), "g", list(args))
    for got in (compiled, interpreted):
        got = list(got) if isinstance(got, tuple) else [got]
        for g, e in zip(got, expected, strict=True):
            assert g.shape == e.shape and g.dtype == e.dtype
            if e.dtype.kind != "f":
                np.testing.assert_array_equal(g, e)
                continue
            np.testing.assert_allclose(g, e, rtol=rtol)
            np.testing.assert_array_equal(np.signbit(g), np.signbit(e))
    return expected


def randn(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(F32)


def conv(
    x: np.ndarray, w: np.ndarray, strides: Sequence[int], pads: Sequence[tuple[int, int]],
    dilations: Sequence[int], group: int = 1,
) -> np.ndarray:  # fmt: skip
    """ONNX Conv (cross-correlation) in float64, by kernel offset."""
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), *pads])
    n, c = x.shape[:2]
    m, cg = w.shape[:2]
    kernel = w.shape[2:]
    out = [
        (xp.shape[2 + i] - (k - 1) * d - 1) // s + 1
        for i, (k, s, d) in enumerate(zip(kernel, strides, dilations))
    ]
    y = np.zeros((n, m, *out))
    mg = m // group
    for g in range(group):
        xs = xp[:, g * cg : (g + 1) * cg]
        for offset in itertools.product(*(range(k) for k in kernel)):
            picks = tuple(
                slice(o * d, o * d + (size - 1) * s + 1, s)
                for o, d, size, s in zip(offset, dilations, out, strides)
            )
            patch = xs[(slice(None), slice(None), *picks)]
            weights = w[(slice(g * mg, (g + 1) * mg), slice(None), *offset)]
            y[:, g * mg : (g + 1) * mg] += np.einsum("nc...,mc->nm...", patch, weights)
    return y


def pool(
    x: np.ndarray, kernel: Sequence[int], strides: Sequence[int],
    pads: Sequence[tuple[int, int]], kind: str, count_include_pad: bool = False,
) -> np.ndarray:  # fmt: skip
    """ONNX MaxPool / AveragePool (ceil_mode=0) in float64, window by window."""
    fill = -np.inf if kind == "max" else np.nan
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), *pads], constant_values=fill)
    out = [(xp.shape[2 + i] - k) // s + 1 for i, (k, s) in enumerate(zip(kernel, strides))]
    y = np.zeros((*x.shape[:2], *out))
    for index in itertools.product(*(range(o) for o in out)):
        window = xp[
            (
                slice(None),
                slice(None),
                *(slice(i * s, i * s + k) for i, s, k in zip(index, strides, kernel)),
            )
        ].reshape(*x.shape[:2], -1)
        if kind == "max":
            y[(slice(None), slice(None), *index)] = window.max(-1)
        elif count_include_pad:
            y[(slice(None), slice(None), *index)] = np.nansum(window, -1) / window.shape[-1]
        else:
            y[(slice(None), slice(None), *index)] = np.nanmean(window, -1)
    return y
