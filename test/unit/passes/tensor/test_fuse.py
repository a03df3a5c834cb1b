"""`fuse` (tensor level): structure of fused programs and results with fusion on/off."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

from dlc.api import compile_graph_module
from dlc.dialects import tensor
from dlc.dialects.graph import FuncOp
from dlc.dialects.graph_types import TensorType
from dlc.dialects.tensor_groups import fusion_of
from dlc.parser import parse_module
from dlc.passes.tensor.schedule_policy import kept_outside
from dlc.semantics.interpreter import numpy_dtype, run_function

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
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
    tensor_level = mod.ir_module("tensor")
    for f in tensor_level.body.block.ops:
        if isinstance(f, tensor.FuncOp) and f.sym_name.data == name:
            return [op for op in f.body.block.ops if isinstance(op, tensor.ComputeOp)]
    raise KeyError(name)


def _group(c: tensor.ComputeOp) -> int | None:
    fusion = fusion_of(c)
    return fusion[0] if fusion else None


def _feeds(c: tensor.ComputeOp) -> bool:
    fusion = fusion_of(c)
    return bool(fusion and fusion[2])


def _internal(c: tensor.ComputeOp) -> bool:
    fusion = fusion_of(c)
    return bool(fusion and fusion[3])


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
    # softmax k's normalise runs in softmax k+1's max nest, exp in the sum nest:
    # 2 nests per softmax plus the last normalise
    module = _load("softmax_chain20.dl")
    mod = compile_graph_module(module)
    stats = mod.stats("softmax_chain")
    assert stats["loop_nests"] == 2 * 20 + 1
    assert stats["arena_bytes"] <= 1.1 * stats["min_live_bytes"]
    computes = _computes(mod, "softmax_chain")
    feeders = [c for c in computes if _feeds(c)]
    assert len(feeders) == 2 * 20 - 1  # e_k (20) and the normalised x_k (19) computed once
    # every exp and every division is evaluated once per element
    exps = sum(1 for c in computes for op in c.body.block.ops if op.name == "math.exp")
    divs = sum(1 for c in computes for op in c.body.block.ops if op.name == "arith.divf")
    assert exps == 20 and divs == 20
    x = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    want = run_function(module, "softmax_chain", [x])
    np.testing.assert_allclose(mod.softmax_chain(x), want, rtol=2e-5, atol=1e-9)


FEED_TEXT = """module "m"
stage raw
func @f: (<6 x 37 x f32>) -> (<6 x 37 x f32>, <6 x f32>) {
'entry(%x: <6 x 37 x f32>):
    %e = exp %x: <6 x 37 x f32>
    %s = reduce %e: <6 x 37 x f32> by add init 0.0: f32 along 1
    %s2 = padShape %s: <6 x f32> at 1
    %y = divide %e: <6 x 37 x f32>, %s2: <6 x 1 x f32>
    %m = reduce %y: <6 x 37 x f32> by max init -inf: f32 along 1
    %out = literal (%y: <6 x 37 x f32>, %m: <6 x f32>): (<6 x 37 x f32>, <6 x f32>)
    return %out: (<6 x 37 x f32>, <6 x f32>)
}
"""


def test_producer_feeds_row_reduction_in_one_nest() -> None:
    # exp is stored inside the sum's loop, the division inside the max's loop, all
    # within one nest over the rows (the group's base domain is (6,))
    module = parse_module(FEED_TEXT)
    mod = compile_graph_module(module)
    stats = mod.stats("f")
    assert stats["loop_nests"] == 1
    computes = _computes(mod, "f")
    assert sum(1 for c in computes if _feeds(c)) == 2
    assert len({_group(c) for c in computes}) == 1
    args = _random_args(module, "f")
    want = run_function(module, "f", args)
    plain = compile_graph_module(module, fuse=False, fast_math_functions=False)
    for got in (mod.f(*args), plain.f(*args)):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-7)


def test_feeder_read_elsewhere_at_other_index_stays_stored() -> None:
    # %e is read reversed by %r: it must be stored (not internal) and %r gets its own
    # inner loop after the reduction
    text = """module "m"
stage raw
func @f: (<8 x f32>) -> (<8 x f32>, f32) {
'entry(%x: <8 x f32>):
    %e = exp %x: <8 x f32>
    %s = reduce %e: <8 x f32> by add init 0.0: f32 along 0
    %r = reverse %e: <8 x f32> along 0
    %y = divide %r: <8 x f32>, %s: f32
    %out = literal (%y: <8 x f32>, %s: f32): (<8 x f32>, f32)
    return %out: (<8 x f32>, f32)
}
"""
    module = parse_module(text)
    mod = compile_graph_module(module)
    computes = _computes(mod, "f")
    exp = next(c for c in computes if any(o.name == "math.exp" for o in c.body.block.ops))
    assert _feeds(exp) and not _internal(exp)
    args = _random_args(module, "f")
    for g, w in zip(mod.f(*args), run_function(module, "f", args), strict=True):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-7)


def test_dot_runs_reduction_outside_last_output_loop() -> None:
    # i-k-j order (contiguous, vectorized inner loop); same fold order: bit-identical.
    # The large first dot is register-tiled on its own; the bias, relu, second dot and
    # softmax run in one nest per row.
    module = _load("mlp_b64.dl")
    mod = compile_graph_module(module)
    computes = _computes(mod, "mlp")
    dots = [c for c in computes if c.combinator is not None and kept_outside(c) < len(c.domain)]
    assert len(dots) == 2
    tiled, small = dots
    assert tiled.schedule.tiles and tiled.schedule.fusion is None
    assert kept_outside(small) == 1 and small.schedule.fusion is not None
    assert mod.stats("mlp")["loop_nests"] == 2  # the dot (column panels outer), the rows
    args = _random_args(module, "mlp")
    plain = compile_graph_module(module, fuse=False)
    np.testing.assert_array_equal(mod.mlp(*args), plain.mlp(*args))
    ir = mod.ir("llvm")
    assert "<16 x float>" in ir or "<8 x float>" in ir


def test_dot_schedule_is_bit_identical() -> None:
    text = """module "m"
stage raw
func @f: (<5 x 33 x f32>, <33 x 40 x f32>, <1 x 40 x f32>) -> <5 x 40 x f32> {
'entry(%x: <5 x 33 x f32>, %w: <33 x 40 x f32>, %b: <1 x 40 x f32>):
    %d = dot %x: <5 x 33 x f32>, %w: <33 x 40 x f32>
    %z = add %d: <5 x 40 x f32>, %b: <1 x 40 x f32>
    %h = max %z: <5 x 40 x f32>, 0.0: f32
    return %h: <5 x 40 x f32>
}
"""
    module = parse_module(text)
    mod = compile_graph_module(module)
    dot = _computes(mod, "f")[0]
    assert kept_outside(dot) == 1 and _internal(dot)
    assert mod.stats("f")["buffers"] == 0  # accumulates in the output, relu in place
    args = _random_args(module, "f")
    plain = compile_graph_module(module, fuse=False)
    np.testing.assert_array_equal(mod.f(*args), plain.f(*args))
    want = run_function(module, "f", args)
    np.testing.assert_allclose(mod.f(*args), want, rtol=1e-5, atol=1e-5)


LOOP_TEXT = """module "m"
stage raw
func @f: (<64 x f32>, i64) -> <64 x f32> {
'entry(%x: <64 x f32>, %n: i64):
    branch 'head(%x: <64 x f32>, 0: i64)
'head(%v: <64 x f32>, %i: i64):
    %c = lessThan %i: i64, %n: i64
    conditional %c: bool then 'body(%v: <64 x f32>, %i: i64) else 'exit(%v: <64 x f32>)
'body(%u: <64 x f32>, %k: i64):
    %m = reduce %u: <64 x f32> by max init -inf: f32 along 0
    %s = subtract %u: <64 x f32>, %m: f32
    %e = exp %s: <64 x f32>
    %z = reduce %e: <64 x f32> by add init 0.0: f32 along 0
    %y = divide %e: <64 x f32>, %z: f32
    %t = tanh %y: <64 x f32>
    %k1 = add %k: i64, 1: i64
    branch 'head(%t: <64 x f32>, %k1: i64)
'exit(%r: <64 x f32>):
    return %r: <64 x f32>
}
"""


def test_multi_block_function_is_fused_per_block() -> None:
    module = parse_module(LOOP_TEXT)
    mod = compile_graph_module(module)
    computes = [
        op
        for f in mod.ir_module("tensor").body.block.ops
        if isinstance(f, tensor.FuncOp)
        for op in f.body.walk()
        if isinstance(op, tensor.ComputeOp)
    ]
    assert any(_group(c) is not None for c in computes)
    assert any(_feeds(c) for c in computes)
    stats = mod.stats("f")
    assert stats["loop_nests"] == 3  # max; exp + sum; divide + tanh
    x = np.random.default_rng(2).standard_normal(64).astype(np.float32)
    for n in (0, 1, 3):
        want = run_function(module, "f", [x, np.int64(n)])
        np.testing.assert_allclose(mod.f(x, np.int64(n)), want, rtol=2e-5, atol=1e-7)


def test_layernorm_gelu_nests() -> None:
    stats = compile_graph_module(_load("layernorm_gelu.dl")).stats("layernorm_gelu")
    assert stats["loop_nests"] <= 3  # two reductions (mean, variance), one epilogue


def test_mlp_bias_and_relu_fused_into_first_dot() -> None:
    # at B = 1 the first dot is a vector x matrix product: not register-tiled, it
    # streams w1 row by row and fuses with the bias and relu
    with open(os.path.join(ROOT, "examples", "mlp.dl")) as f:
        mod = compile_graph_module(parse_module(f.read()))
    computes = _computes(mod, "mlp")
    dot, epilogue = computes[0], computes[1]
    assert dot.combinator is not None and dot.combinator.data == "add"
    assert _group(dot) is not None and _internal(dot)
    assert _group(epilogue) == _group(dot)
    names = {op.name for op in epilogue.body.block.ops}
    assert "arith.addf" in names and "arith.maximumf" in names
    # the dot's operands stay materialized: exactly the function arguments
    assert all(
        v.owner is not None and not isinstance(v.owner, tensor.ComputeOp) for v in dot.inputs
    )


def test_dot_operand_stays_materialized() -> None:
    text = """module "m"
stage raw
func @f: (<4 x 8 x f32>, <16 x 8 x f32>) -> <4 x 16 x f32> {
'entry(%x: <4 x 8 x f32>, %w: <16 x 8 x f32>):
    %e = exp %x: <4 x 8 x f32>
    %wt = transpose %w: <16 x 8 x f32>
    %d = dot %e: <4 x 8 x f32>, %wt: <8 x 16 x f32>
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
