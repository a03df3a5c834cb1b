"""`fuse` (tensor level): structure of fused programs and results with fusion on/off."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

from dlc.dialects import tensor
from dlc.dialects.graph import FuncOp
from dlc.dialects.graph_types import TensorType
from dlc.parser import parse_module
from dlc.passes.fuse import GROUP, INTERNAL
from dlc.runtime.compiled import compile_graph_module
from dlc.runtime.reference import numpy_dtype, run_function

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
PROGRAMS = sorted(
    glob.glob(os.path.join(ROOT, "examples", "*.dl"))
    + [
        os.path.join(ROOT, "benchmarks", name)
        for name in ("lstm_tail.dl", "softmax_chain20.dl", "layernorm_gelu.dl", "mlp_b64.dl")
    ]
)


def _load(name: str):
    with open(os.path.join(ROOT, "benchmarks", name)) as f:
        return parse_module(f.read())


def _computes(mod, name: str) -> list[tensor.ComputeOp]:
    tensor_level = mod._stages["tensor"]
    for f in tensor_level.body.block.ops:
        if isinstance(f, tensor.FuncOp) and f.sym_name.data == name:
            return [op for op in f.body.block.ops if isinstance(op, tensor.ComputeOp)]
    raise KeyError(name)


def _random_args(module, name: str, seed: int = 0) -> list[np.ndarray] | None:
    rng = np.random.default_rng(seed)
    func = next(
        f for f in module.body.block.ops if isinstance(f, FuncOp) and f.sym_name.data == name
    )
    args = []
    for t in func.function_type.args:
        if not isinstance(t, TensorType):
            return None  # structs, enums, ...: covered by test_e2e_language.py
        dtype = numpy_dtype(t.dt)
        if dtype.kind == "f":
            args.append(rng.standard_normal(t.dims).astype(dtype))
        elif dtype.kind == "b":
            args.append(rng.integers(0, 2, size=t.dims).astype(dtype))
        else:  # small positive integers: loop counts, recursion depths
            args.append(rng.integers(1, 6, size=t.dims).astype(dtype))
    return args


def _leaves(value) -> list[np.ndarray]:
    return list(value) if isinstance(value, tuple) else [value]


def test_lstm_tail_is_one_nest_without_buffers() -> None:
    mod = compile_graph_module(_load("lstm_tail.dl"))
    stats = mod.stats("lstm_tail")
    assert stats["loop_nests"] == 1
    assert stats["buffers"] == 0 and stats["arena_bytes"] == 0


def test_unfused_lstm_tail_has_many_nests() -> None:
    stats = compile_graph_module(_load("lstm_tail.dl"), fuse=False).stats("lstm_tail")
    assert stats["loop_nests"] > 10 and stats["buffers"] > 10


def test_softmax_chain_one_nest_per_reduction_boundary() -> None:
    # each softmax: max (reduction), sum (reduction), normalize -> 3 nests, 20 softmaxes
    stats = compile_graph_module(_load("softmax_chain20.dl")).stats("softmax_chain")
    assert stats["loop_nests"] <= 3 * 20


def test_layernorm_gelu_nests() -> None:
    stats = compile_graph_module(_load("layernorm_gelu.dl")).stats("layernorm_gelu")
    assert stats["loop_nests"] <= 3  # two reductions (mean, variance), one epilogue


def test_mlp_bias_and_relu_fused_into_first_dot() -> None:
    mod = compile_graph_module(_load("mlp_b64.dl"))
    computes = _computes(mod, "mlp")
    dot, epilogue = computes[0], computes[1]
    assert dot.combinator is not None and dot.combinator.data == "add"
    assert GROUP in dot.attributes and INTERNAL in dot.attributes
    assert epilogue.attributes.get(GROUP) == dot.attributes[GROUP]
    names = {op.name for op in epilogue.body.block.ops}
    assert "arith.addf" in names and "arith.maximumf" in names
    # the dot's operands stay materialized: exactly the function arguments
    assert all(
        v.owner is not None and not isinstance(v.owner, tensor.ComputeOp) for v in dot.inputs
    )


def test_dot_operand_stays_materialized() -> None:
    text = """module "m"
stage raw
func @f: (<4 x 8 x f32>, <8 x 16 x f32>) -> <4 x 16 x f32> {
'entry(%x: <4 x 8 x f32>, %w: <8 x 16 x f32>):
    %e = exp %x: <4 x 8 x f32>
    %wt = transpose %w: <8 x 16 x f32>
    %w2 = transpose %wt: <16 x 8 x f32>
    %d = dot %e: <4 x 8 x f32>, %w2: <8 x 16 x f32>
    return %d: <4 x 16 x f32>
}
"""
    module = parse_module(text)
    mod = compile_graph_module(module)
    computes = _computes(mod, "f")
    dot = next(c for c in computes if c.combinator is not None)
    producers = [v.owner for v in dot.inputs if isinstance(v.owner, tensor.ComputeOp)]
    assert len(producers) == 2  # exp and the transposed weight are still tensors
    args = _random_args(module, "f")
    np.testing.assert_allclose(mod.f(*args), run_function(module, "f", args), rtol=1e-5, atol=1e-5)


def test_vector_code_in_fused_elementwise_nest() -> None:
    ir = compile_graph_module(_load("lstm_tail.dl")).ir("llvm")
    assert "<16 x float>" in ir or "<8 x float>" in ir
    assert "expf" not in ir and "tanhf" not in ir


@pytest.mark.parametrize("path", PROGRAMS, ids=os.path.basename)
def test_results_with_passes_on_and_off(path: str) -> None:
    with open(path) as f:
        module = parse_module(f.read())
    fused = compile_graph_module(module)
    plain = compile_graph_module(module, fuse=False, plan_memory=False, fast_math_functions=False)
    for name in fused.functions:
        args = _random_args(module, name)
        if args is None:
            continue
        want = _leaves(run_function(module, name, args))
        if not all(isinstance(w, np.ndarray | np.generic) and w.dtype.kind in "fiub" for w in want):
            continue  # aggregate results: covered by test_e2e_language.py
        for mod in (fused, plain):
            got = _leaves(mod[name](*args))
            for g, w in zip(got, want, strict=True):
                np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)
