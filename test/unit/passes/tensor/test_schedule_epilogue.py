"""Epilogues computed at a contraction's register tile (`epilogue n`: the schedule
policy in dlc/passes/tensor/schedule_epilogue.py, the code generator in
dlc/lowering/tensor_to_loop/epilogue.py) on layers as ONNX exports them, weights as
constant initializers: Conv + bias + Relu, Conv + BatchNormalization + residual Add +
Relu, a Conv whose weights are one repeated value, Gemm with a packed constant B and
a column tail, a K-blocked MatMul + bias, squeeze-and-excitation blocks after a 1x1
convolution (and the fallback when the policy contradicts itself). Odd sizes, 1, 2 and 3 threads, bounds
checks; compared with the reference interpreter bit for bit without fma (the epilogue
runs the same operations on the same values) and within the bound of a length-K
float sum with it."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx_models import conv, make, node, randn

import dlc
import dlc.onnx
from dlc.dialects import tensor
from dlc.passes.tensor import schedule_conv
from dlc.passes.tensor import schedule_policy as policy
from dlc.semantics.interpreter import run_function
from dlc.target import check_runnable


@pytest.fixture(autouse=True)
def _small_tiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tile small contractions; K blocks of 16 where B exceeds 4 KiB (so the products
    here run several K blocks: the epilogue only in the last)."""
    monkeypatch.setattr(schedule_conv, "MIN_WORK", 0)
    monkeypatch.setattr(policy, "MIN_WORK", 0)
    monkeypatch.setattr(
        policy, "k_block", lambda k, row_bytes, t: 16 if k * row_bytes > 4096 else k
    )


def _conv_model(co: int, ci: int, size: tuple[int, int], fill: bool = False) -> onnx.ModelProto:
    """Conv 3x3 pad 1 (+ bias) then Relu."""
    w = np.full((co, ci, 3, 3), 0.25, np.float32) if fill else randn(co, ci, 3, 3, seed=1)
    b = randn(co, seed=2)
    nodes = [node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1]), node("Relu", ["y"], ["z"])]
    shape = (1, ci, *size)
    return make(nodes, {"x": shape}, {"z": (1, co, *size)}, {"w": w, "b": b})


def _residual_model(co: int, ci: int, size: tuple[int, int]) -> onnx.ModelProto:
    """Conv 1x1 + BatchNormalization + Add(residual) + Relu, ResNet's block tail."""
    inits = {
        "w": randn(co, ci, 1, 1, seed=3),
        "gamma": randn(co, seed=4),
        "beta": randn(co, seed=5),
        "mean": randn(co, seed=6),
        "var": np.abs(randn(co, seed=7)) + 0.5,
    }
    nodes = [
        node("Conv", ["x", "w"], ["y"]),
        node("BatchNormalization", ["y", "gamma", "beta", "mean", "var"], ["n"]),
        node("Add", ["n", "r"], ["s"]),
        node("Relu", ["s"], ["z"]),
    ]
    out = (1, co, *size)
    return make(nodes, {"x": (1, ci, *size), "r": out}, {"z": out}, inits)


def _gemm_model(m: int, k: int, n: int, matmul: bool = False) -> onnx.ModelProto:
    """Gemm (constant B, transB) + bias + Relu, or MatMul + Add(bias)."""
    b = randn(n, seed=9)
    if matmul:
        nodes = [node("MatMul", ["x", "w"], ["y"]), node("Add", ["y", "b"], ["z"])]
        return make(nodes, {"x": (m, k)}, {"z": (m, n)}, {"w": randn(k, n, seed=8), "b": b})
    nodes = [node("Gemm", ["x", "w", "b"], ["y"], transB=1), node("Relu", ["y"], ["z"])]
    return make(nodes, {"x": (m, k)}, {"z": (m, n)}, {"w": randn(n, k, seed=8), "b": b})


def _check(
    model: onnx.ModelProto, args: list[np.ndarray], terms: int, **options: object
) -> tuple[str, np.ndarray]:
    """Compiled with and without fma against the reference interpreter (within
    `terms` ε of the magnitudes) and without fma bit for bit against the plain nests
    of opt_level=0 (no schedule, no epilogue); returns the tensor IR and the result."""
    module = dlc.onnx.load(model)
    want = np.asarray(run_function(module, "g", args))
    plain = dlc.compile_onnx(model, opt_level=0, **options).g(*args)
    exact = dlc.compile_onnx(model, fma=False, **options)
    np.testing.assert_array_equal(exact.g(*args), plain)
    fused = dlc.compile_onnx(model, fma=True, **options)
    bound = terms * np.finfo(np.float32).eps * (np.abs(want).max() + 1)
    got = fused.g(*args)
    assert np.abs(plain - want).max() <= bound and np.abs(got - want).max() <= bound
    return fused.ir("tensor"), got


@pytest.mark.parametrize("threads", [1, 3])
def test_conv_bias_relu(threads: int) -> None:
    # rows of 37: a tiled convolution on every target (im2col takes rows shorter than
    # two vectors, 32 f32 with AVX-512)
    model = _conv_model(13, 5, (11, 37))
    x = randn(1, 5, 11, 37, seed=10)
    ir, got = _check(model, [x], 5 * 9, num_threads=threads, bounds_check=threads == 3)
    assert "epilogue 1" in ir
    exact = conv(x, randn(13, 5, 3, 3, seed=1), [1, 1], [(1, 1)] * 2, [1, 1])
    want = np.maximum(exact + randn(13, seed=2)[:, None, None], 0)
    assert np.abs(got - want).max() <= 45 * np.finfo(np.float32).eps * (np.abs(want).max() + 1)


def test_conv_batchnorm_residual_relu() -> None:
    model = _residual_model(12, 7, (9, 37))
    x, r = randn(1, 7, 9, 37, seed=11), randn(1, 12, 9, 37, seed=12)
    ir, _ = _check(model, [x, r], 7, num_threads=2)
    assert "epilogue 1" in ir


def test_conv_with_one_repeated_weight_is_tiled() -> None:
    """A splat kernel is folded into the body (no kernel read): the convolution is
    still register-tiled, over output channels no read depends on."""
    model = _conv_model(16, 8, (10, 37), fill=True)  # rows of 37: not im2col anywhere
    ir, _ = _check(model, [randn(1, 8, 10, 37, seed=13)], 8 * 9, num_threads=1)
    assert "unroll [d1.1, d3.1]" in ir and "epilogue 1" in ir


def test_gemm_packed_tail_bias_relu() -> None:
    """37 columns: the packed constant B's last panel is zero-padded; the epilogue
    loads only the valid columns of the bias and stores only the valid outputs."""
    model = _gemm_model(29, 40, 37)
    ir, _ = _check(model, [randn(29, 40, seed=14)], 40, num_threads=3, bounds_check=True)
    assert "pack [1]" in ir and "epilogue 1" in ir


def test_matmul_k_blocked_bias() -> None:
    """K = 70 in blocks of 16: the accumulators are final only in the last block."""
    model = _gemm_model(26, 70, 45, matmul=True)
    ir, _ = _check(model, [randn(26, 70, seed=15)], 70, num_threads=2)
    assert "r0 = [16]" in ir and "epilogue 1" in ir


def _squeeze_excitation_model(c: int, ci: int, size: tuple[int, int], gate: str) -> onnx.ModelProto:
    """MobileNetV3's and EfficientNet's block: Conv 1x1 + bias, an activation, then a
    squeeze-and-excitation gate (global pool, two 1x1 convolutions, a sigmoid-like
    gate) multiplied into the activation."""
    act, sigmoid = {"hardswish": ("HardSwish", "HardSigmoid"), "silu": ("Sigmoid", "Sigmoid")}[gate]
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"]), node(act, ["c1"], ["a"])]
    if gate == "silu":
        nodes.append(node("Mul", ["c1", "a"], ["h"]))
    else:
        nodes.append(node("Identity", ["a"], ["h"]))
    nodes += [
        node("GlobalAveragePool", ["h"], ["p"]),
        node("Conv", ["p", "w2", "b2"], ["c2"]),
        node("Relu", ["c2"], ["r"]),
        node("Conv", ["r", "w3", "b3"], ["c3"]),
        node(sigmoid, ["c3"], ["g"]),
        node("Mul", ["h", "g"], ["y"]),
    ]
    inits = {
        "w1": randn(c, ci, 1, 1, seed=1),
        "b1": randn(c, seed=2),
        "w2": randn(4, c, 1, 1, seed=3),
        "b2": randn(4, seed=4),
        "w3": randn(c, 4, 1, 1, seed=5),
        "b3": randn(c, seed=6),
    }
    return make(nodes, {"x": (1, ci, *size)}, {"y": (1, c, *size)}, inits)


@pytest.mark.parametrize("gate", ["hardswish", "silu"])
def test_squeeze_excitation_after_a_product(gate: str) -> None:
    """The activation after the tiled 1x1 convolution (a literal, its bias, between
    them) is its epilogue, and the pool that reads it is a nest of its own: the
    policy wrote the epilogue, then grouped the same compute with the pool
    (`schedule: epilogue 1: op 1 after it is in a fusion group or has an epilogue`)."""
    model = _squeeze_excitation_model(24, 8, (10, 37), gate)
    x = randn(1, 8, 10, 37, seed=16)
    compiled = dlc.compile_onnx(model, num_threads=2)
    want = np.asarray(run_function(dlc.onnx.load(model), "g", [x]))
    np.testing.assert_allclose(compiled.g(x), want, rtol=1e-5, atol=1e-5)
    assert "epilogue 1" in compiled.ir("tensor")


def test_contradicting_epilogue_falls_back_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    """A policy that contradicts itself (here: runs split at literals, as before the
    fix above, so a later run groups an epilogue's member) costs the epilogue, with a
    ScheduleWarning at the contraction, never the program."""
    from dlc.passes.tensor import schedule
    from dlc.passes.tensor.schedule_epilogue import ScheduleWarning

    def split_at_literals(ops: list) -> list:
        runs = original([op for op in ops if not isinstance(op, tensor.ConstantOp)])
        return [part for run in runs for part in _split(run)]

    def _split(run: list) -> list:
        parts, current = [], []
        for op in run:
            if current and op.prev_op is not current[-1]:
                parts.append(current)
                current = []
            current.append(op)
        return [*parts, current]

    original = schedule._runs_to_schedule
    monkeypatch.setattr(schedule, "_runs_to_schedule", split_at_literals)
    monkeypatch.setenv("DLC_CACHE", "0")  # the policy, not a cached compile
    model = _squeeze_excitation_model(24, 8, (10, 37), "hardswish")
    x = randn(1, 8, 10, 37, seed=17)
    with pytest.warns(ScheduleWarning, match=r"epilogue 1: op 1 after it is in a fusion group"):
        got = dlc.compile_onnx(model).g(x)
    want = np.asarray(run_function(dlc.onnx.load(model), "g", [x]))
    assert np.abs(got - want).max() <= 1e-4 * (np.abs(want).max() + 1)


def _depthwise_silu_model(c: int, size: tuple[int, int]) -> onnx.ModelProto:
    """EfficientNet's depthwise 3x3 convolution (+ bias) then SiLU (x * sigmoid(x))."""
    nodes = [
        node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], group=c),
        node("Sigmoid", ["y"], ["s"]),
        node("Mul", ["y", "s"], ["z"]),
    ]
    inits = {"w": randn(c, 1, 3, 3, seed=17), "b": randn(c, seed=18)}
    return make(nodes, {"x": (1, c, *size)}, {"z": (1, c, *size)}, inits)


@pytest.mark.parametrize("target", ["host", "haswell"])
@pytest.mark.parametrize(("width", "epilogue"), [(7, False), (37, True)])
def test_a_sigmoid_leaves_a_tile_of_short_rows(target: str, width: int, epilogue: bool) -> None:
    """Rows of 7 are vectors less than half full on any target (4 + 2 + 1 lanes): the
    SiLU, which calls `exp`, is a nest of its own (`in_full_vectors`); rows of 37 keep
    it as the convolution's epilogue."""
    try:
        check_runnable(target)
    except ValueError:
        pytest.skip(f"this machine cannot run {target} code")
    model = _depthwise_silu_model(12, (6, width))
    x = randn(1, 12, 6, width, seed=19)
    ir, _ = _check(model, [x], 9, target_cpu=target, num_threads=2)
    convolution = next(line for line in ir.splitlines() if "reduce [1, 3, 3]" in line)
    assert "tile" in convolution and ("epilogue 1" in convolution) == epilogue
