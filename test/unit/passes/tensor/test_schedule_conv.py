"""The register-tiled convolution schedule (dlc/passes/tensor/schedule_conv.py, carried
out by dlc/lowering/tensor_to_loop/nest.py): awkward shapes (sizes 1, primes, tails
smaller than a tile, short rows), strides (rows of stride 2 as vectors of every second
element), padding, dilations, groups, 1-3 spatial
dims, f64, bounds checks and thread counts, tiled even when small (MIN_WORK patched to
0), compiled and compared with an exact float64 convolution within the bound of a
length-K float sum, and bit for bit with the plain nest without fma; the tiles the
policy picks for the host and for older CPU models."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from dlc.api import compile_graph_module
from dlc.dialects import tensor
from dlc.parser import parse_module
from dlc.passes.tensor import schedule_conv
from dlc.passes.tensor.schedule import SchedulePass
from dlc.semantics.interpreter import run_function
from dlc.target import Target, check_runnable

Conv = tuple[tuple[int, ...], tuple[int, ...], list[int], list[int], list[int], int]
"""x shape, kernel shape, strides, padding (same both sides), right dilation, groups."""


@pytest.fixture(autouse=True)
def _always_tile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedule_conv, "MIN_WORK", 0)


def _ty(dims: Sequence[int], dt: str) -> str:
    return "<" + " x ".join([*map(str, dims), dt]) + ">"


def _out_shape(conv: Conv) -> list[int]:
    xs, ks, strides, pads, dilations, _ = conv
    out = [xs[0], ks[0]]
    for i in range(len(xs) - 2):
        window = (ks[2 + i] - 1) * dilations[i] + 1
        out.append((xs[2 + i] + 2 * pads[i] - window) // strides[i] + 1)
    return out


def _source(conv: Conv, dt: str) -> str:
    xs, ks, strides, pads, dilations, groups = conv
    x, k, y = _ty(xs, dt), _ty(ks, dt), _ty(_out_shape(conv), dt)
    padding = ", ".join(f"({p}, {p})" for p in pads)
    clauses = (
        f"strides {', '.join(map(str, strides))} padding {padding} "
        f"rightDilation {', '.join(map(str, dilations))} groups {groups}"
    )
    return (
        'module "c"\nstage raw\n'
        f"func @conv: ({x}, {k}) -> {y} {{\n'entry(%x: {x}, %k: {k}):\n"
        f"    %y = convolve %x: {x} kernel %k: {k} {clauses}\n    return %y: {y}\n}}\n"
    )


def _inputs(conv: Conv, dt: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(sum(conv[0]) + sum(conv[1]))
    x = rng.standard_normal(conv[0]).astype(dt.replace("f", "float"))
    k = rng.standard_normal(conv[1]).astype(dt.replace("f", "float"))
    return x, k


def _check(conv: Conv, dt: str = "f32", **options: object) -> str:
    """Compiled (with `options`) against the exact convolution (the reference on
    float64) within K eps (|x| * |k|), K the taps per output; returns the tensor IR."""
    module = parse_module(_source(conv, dt))
    x, k = _inputs(conv, dt)
    compiled = compile_graph_module(module, **options)  # type: ignore[arg-type]
    got = compiled["conv"](x, k)
    wide = parse_module(_source(conv, "f64"))
    exact = np.asarray(run_function(wide, "conv", [x.astype(np.float64), k.astype(np.float64)]))
    scale = np.asarray(run_function(wide, "conv", [np.abs(x).astype(np.float64), np.abs(k)]))
    taps = int(np.prod(conv[1][1:]))
    bound = taps * np.finfo(x.dtype).eps * scale + np.finfo(x.dtype).tiny
    assert got.shape == exact.shape and got.dtype == x.dtype
    assert np.all(np.abs(got - exact) <= bound), "compiled vs float64 convolution"
    return compiled.ir("tensor")


CONVS: list[Conv] = [
    ((1, 8, 9, 20), (16, 8, 3, 3), [1, 1], [1, 1], [1, 1], 1),  # whole tiles, padded
    ((1, 1, 1, 1), (1, 1, 1, 1), [1, 1], [0, 0], [1, 1], 1),  # every size 1
    ((2, 3, 5, 13), (7, 3, 2, 3), [1, 1], [0, 1], [1, 1], 1),  # primes, batch 2
    ((1, 5, 4, 3), (3, 5, 3, 3), [1, 1], [1, 1], [1, 1], 1),  # row shorter than a vector
    ((1, 4, 11, 70), (13, 4, 3, 3), [1, 1], [1, 1], [1, 1], 1),  # column and channel tails
    ((1, 6, 7, 7), (10, 6, 3, 3), [1, 1], [1, 1], [1, 1], 1),  # short rows: rows tiled too
    ((1, 6, 7, 37), (9, 2, 3, 3), [1, 1], [1, 1], [2, 2], 3),  # dilated, grouped
    ((1, 4, 9, 33), (4, 1, 3, 3), [1, 1], [1, 1], [1, 1], 4),  # depthwise
    ((1, 4, 12, 40), (6, 4, 3, 3), [2, 2], [1, 1], [1, 1], 1),  # stride 2: every second
    ((2, 3, 50), (5, 3, 4), [1], [2], [1], 1),  # one spatial dim
    ((1, 2, 3, 4, 19), (3, 2, 2, 2, 3), [1, 1, 1], [0, 1, 1], [1, 1, 1], 1),  # three
    ((1, 6, 9, 27), (6, 1, 3, 3), [2, 2], [1, 1], [1, 1], 6),  # depthwise stride 2, tails
    ((1, 4, 11, 41), (5, 4, 3, 3), [1, 2], [1, 1], [2, 2], 1),  # dilated, stride 2 in rows
    ((1, 3, 8, 40), (4, 3, 3, 3), [3, 3], [1, 1], [1, 1], 1),  # stride 3: a scalar tile
]


@pytest.mark.parametrize("conv", CONVS, ids=[str(i) for i in range(len(CONVS))])
@pytest.mark.parametrize("fma", [True, False])
def test_tiled_convolution(conv: Conv, fma: bool) -> None:
    ir = _check(conv, fma=fma)
    if conv[2][-1] in (1, 2):  # rows read whole or every second element
        assert "vectorize" in ir


@pytest.mark.parametrize("target", ["x86-64", "haswell"])
def test_tiled_convolution_on_older_cpus(target: str) -> None:
    try:
        check_runnable(target)
    except ValueError:
        pytest.skip(f"this machine cannot run {target} code")
    for conv in (CONVS[0], CONVS[4], CONVS[5], CONVS[6], CONVS[8], CONVS[11], CONVS[12]):
        assert "vectorize" in _check(conv, target_cpu=target)


def test_tiled_convolution_f64_bounds_checked() -> None:
    _check(CONVS[4], "f64")
    _check(CONVS[6], bounds_check=True, fma=True)
    _check(CONVS[5], bounds_check=True)
    _check(CONVS[11], bounds_check=True)  # no vector reads past a row's last element
    _check(CONVS[12], "f64", bounds_check=True)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_thread_counts_do_not_change_the_bits(threads: int) -> None:
    conv: Conv = ((2, 8, 10, 40), (13, 8, 3, 3), [1, 1], [1, 1], [1, 1], 1)
    module = parse_module(_source(conv, "f32"))
    x, k = _inputs(conv, "f32")
    one = compile_graph_module(module, num_threads=1)["conv"](x, k)
    many = compile_graph_module(module, num_threads=threads)["conv"](x, k)
    np.testing.assert_array_equal(many, one)


BIT_CONVS: list[Conv] = [
    ((1, 5, 9, 45), (11, 5, 3, 3), [1, 1], [1, 1], [1, 1], 1),  # vector tiles with tails
    ((1, 3, 10, 23), (9, 3, 3, 3), [2, 2], [1, 1], [1, 1], 1),  # every second element
    ((1, 3, 10, 23), (9, 3, 3, 3), [3, 3], [1, 1], [1, 1], 1),  # a scalar tile (stride 3)
]


@pytest.mark.parametrize("conv", BIT_CONVS, ids=["vector", "every-second", "scalar"])
@pytest.mark.parametrize("target", ["host", "haswell", "x86-64"])
def test_without_fma_the_tiles_are_bit_identical_to_opt_level_0(conv: Conv, target: str) -> None:
    """The tile folds every element in the order ci, kh, kw, as the plain nest does.
    The tiles of the fixed targets are known; the host's depend on its vector width (a
    row of 12 outputs is shorter than one AVX-512 vector: no tile there)."""
    module = parse_module(_source(conv, "f32"))
    x, k = _inputs(conv, "f32")
    plain = compile_graph_module(module, opt_level=0)["conv"](x, k)
    tiled = compile_graph_module(module, fma=False, target_cpu=target)
    if target != "host":
        assert "unroll [d1.1, d3.1]" in tiled.ir("tensor")
    np.testing.assert_array_equal(tiled["conv"](x, k), plain)


def _schedule(conv: Conv, target: str) -> str:
    from dlc.lowering.graph_to_tensor.lower_graph_to_tensor import LowerGraphToTensorPass
    from dlc.passes.tensor.fuse import FusePass
    from dlc.pipeline import context

    module = parse_module(_source(conv, "f32"))
    LowerGraphToTensorPass().apply(context(), module)
    FusePass().apply(context(), module)
    SchedulePass(target=target).apply(context(), module)
    computes = [op for op in module.walk() if isinstance(op, tensor.ComputeOp)]
    return str(computes[-1].schedule)


W5: Conv = ((1, 64, 56, 56), (64, 64, 3, 3), [1, 1], [1, 1], [1, 1], 1)


@pytest.mark.parametrize(
    ("target", "tiles", "lanes"),
    [
        ("znver4", "d1 = [4], d3 = [56]", 16),  # a whole row in 4 zmm, 4 channels: 16 acc.
        # 2 vectors x 4 channels (64's divisor) would be 8 accumulators: too few for the
        # FMA latency, so 6 channels (12 of 16 registers) and a tail of 4
        ("haswell", "d1 = [6], d3 = [16]", 8),
        ("x86-64", "d1 = [6], d3 = [8]", 4),
    ],
)
def test_tiles_follow_the_target(target: str, tiles: str, lanes: int) -> None:
    schedule = _schedule(W5, target)
    assert f"tile [{tiles}]" in schedule
    order = "interchange [d0, d1.0, d2, d3.0, r0, r1, r2, d1.1, d3.1]"
    assert order in schedule and "unroll [d1.1, d3.1]" in schedule
    assert f"vectorize d3.1 x {lanes}" in schedule


def test_a_divisor_that_spills_is_not_filled() -> None:
    """A 28-wide row is 4 ymm vectors: 2 channels (128's divisor, 8 accumulators) stay,
    since 3 channels' 12 accumulators, 4 loads and a broadcast exceed 16 registers."""
    schedule = _schedule(((1, 128, 28, 28), (128, 128, 3, 3), [1, 1], [1, 1], [1, 1], 1), "haswell")
    assert "tile [d1 = [2], d3 = [28]]" in schedule


def test_a_filled_tile_with_a_channel_tail_is_bit_identical_to_opt_level_0() -> None:
    """64 channels in tiles of 6 (haswell, `MIN_ACCUMULATORS`): the last tile holds 4."""
    conv: Conv = ((1, 8, 3, 40), (64, 8, 1, 1), [1, 1], [0, 0], [1, 1], 1)
    try:
        check_runnable("haswell")
    except ValueError:
        pytest.skip("this machine cannot run haswell code")
    module = parse_module(_source(conv, "f32"))
    x, k = _inputs(conv, "f32")
    plain = compile_graph_module(module, opt_level=0)["conv"](x, k)
    tiled = compile_graph_module(module, fma=False, target_cpu="haswell")
    assert "tile [d1 = [6], d3 = [16]]" in tiled.ir("tensor")
    np.testing.assert_array_equal(tiled["conv"](x, k), plain)
    _check(conv, target_cpu="haswell", fma=True)


def test_short_rows_tile_rows_too() -> None:
    """A 7-wide row (4 + 2 + 1 lanes) takes 4 rows of the axis before it."""
    schedule = _schedule(((1, 32, 7, 7), (32, 32, 3, 3), [1, 1], [1, 1], [1, 1], 1), "znver4")
    assert "tile [d1 = [2], d2 = [4], d3 = [7]]" in schedule
    assert "unroll [d1.1, d2.1, d3.1]" in schedule


def test_rows_two_apart_are_vectorized_other_strides_get_a_scalar_tile() -> None:
    """Stride 2: vectors of every second element (`vload2`); stride 3: scalars."""
    for target, lanes in (("znver4", 16), ("haswell", 8), ("x86-64", 4)):
        assert f"vectorize d3.1 x {lanes}" in _schedule(CONVS[8], target)
    strided = _schedule(CONVS[13], "znver4")
    assert "tile [d1 = [4], d3 = [4]]" in strided and "vectorize" not in strided


def test_tiling_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedule_conv, "MIN_WORK", 1 << 16)
    assert "tile" not in _schedule(CONVS[3], "znver4")
    assert "tile" in _schedule(W5, "znver4")


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_f16_convolutions(threads: int) -> None:
    """f16 convolutions (whole tiles, tails, dilated and grouped, strided, depthwise)
    within K eps(f16) (|x| * |k|) of the exact convolution, at 1-3 threads (2 with
    bounds checks)."""
    for conv in (CONVS[0], CONVS[4], CONVS[6], CONVS[7], CONVS[8]):
        _check(conv, "f16", num_threads=threads, bounds_check=threads == 2)


def _pooled_products(shape: Sequence[int]) -> str:
    """The spatial sum of x * exp(x) (a squeeze-and-excitation's pooling of an
    activation): a float sum of products over the last two axes."""
    t, out = _ty(shape, "f32"), _ty(shape[:2], "f32")
    return (
        'module "p"\nstage raw\n'
        f"func @pool: ({t}) -> {out} {{\n'entry(%x: {t}):\n"
        f"    %e = exp %x: {t}\n    %p = multiply %x: {t}, %e: {t}\n"
        f"    %y = reduce %p: {t} by add init 0: f32 along 2, 3\n    return %y: {out}\n}}\n"
    )


@pytest.mark.parametrize("target", ["znver4", "haswell"])
def test_a_sum_of_products_along_rows_is_not_a_scalar_tile(target: str) -> None:
    """The pooling's reduction walks rows (`walks_rows`): no tile of scalar channels,
    so its one accumulator becomes partial vector sums; results within n eps."""
    from dlc.lowering.graph_to_tensor.lower_graph_to_tensor import LowerGraphToTensorPass
    from dlc.passes.tensor.fuse import FusePass
    from dlc.pipeline import context

    shape = (1, 6, 9, 20)
    module = parse_module(_pooled_products(shape))
    LowerGraphToTensorPass().apply(context(), module)
    FusePass().apply(context(), module)
    SchedulePass(target=target).apply(context(), module)
    (pool,) = [op for op in module.walk() if isinstance(op, tensor.ComputeOp)]
    assert pool.reduction_extents == (9, 20) and schedule_conv.walks_rows(pool)
    assert schedule_conv.conv_tiles(pool, Target.from_cpu(target)) is None
    assert "tile" not in str(pool.schedule)
    try:
        check_runnable(target)
    except ValueError:
        pytest.skip(f"this machine cannot run {target} code")
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    got = compile_graph_module(parse_module(_pooled_products(shape)), target_cpu=target)["pool"](x)
    wide = x.astype(np.float64)
    exact = (wide * np.exp(wide)).sum(axis=(2, 3))
    bound = 180 * 4 * np.finfo(np.float32).eps * (np.abs(wide) * np.exp(wide)).sum(axis=(2, 3))
    assert np.all(np.abs(got - exact) <= bound)


def test_a_convolution_does_not_walk_rows() -> None:
    """A convolution's column tap is added to the output column: not a row walk."""
    from dlc.lowering.graph_to_tensor.lower_graph_to_tensor import LowerGraphToTensorPass
    from dlc.pipeline import context

    module = parse_module(_source(CONVS[0], "f32"))
    LowerGraphToTensorPass().apply(context(), module)
    computes = [op for op in module.walk() if isinstance(op, tensor.ComputeOp)]
    assert not schedule_conv.walks_rows(computes[-1])


def _max_pool(shape: Sequence[int], window: int, stride: int) -> str:
    t = _ty(shape, "f32")
    out = _ty([*shape[:2], *((n - window) // stride + 1 for n in shape[2:])], "f32")
    return (
        f'module "p"\nstage raw\nfunc @pool: ({t}) -> {out} {{\n\'entry(%x: {t}):\n'
        f"    %p = reduceWindow %x: {t} by max init -inf: f32 dims 1, 1, {window}, {window} "
        f"strides 1, 1, {stride}, {stride} padding none\n    return %p: {out}\n}}\n"
    )


@pytest.mark.parametrize("target", ["host", "haswell"])
@pytest.mark.parametrize(("window", "stride"), [(3, 2), (2, 1)])
def test_a_max_pooling_is_tiled_and_bit_identical(target: str, window: int, stride: int) -> None:
    """A max window (`max_window`) gets a tile of channels x vector columns (rows two
    apart: `vload2`; stride 1: plain vectors); each output folds its window in the same
    order, so results equal opt_level 0's bit for bit, a NaN included."""
    try:
        check_runnable(target)
    except ValueError:
        pytest.skip(f"this machine cannot run {target} code")
    source = _max_pool((1, 6, 11, 41), window, stride)
    x = np.random.default_rng(4).standard_normal((1, 6, 11, 41)).astype(np.float32)
    x[0, 2, 5, 7] = np.nan
    tiled = compile_graph_module(parse_module(source), target_cpu=target)
    pool = next(line for line in tiled.ir("tensor").splitlines() if '"max"' in line)
    assert "tile [d1 = [" in pool and "vectorize d3.1 x " in pool
    plain = compile_graph_module(parse_module(source), opt_level=0)["pool"](x)
    np.testing.assert_array_equal(tiled["pool"](x), plain)
    assert np.isnan(plain).any()
