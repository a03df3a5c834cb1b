"""Enough iterations for the parallel loop (dlc/passes/tensor/schedule_blocks.py): the
column blocks of K-blocked products and the row loop of convolutions with few channel
blocks, for the host's and older targets; results bit for bit the same at any thread
count and as the plain nest without fma (opt_level 0)."""

from __future__ import annotations

import numpy as np
import pytest

from dlc.api import compile_graph_module
from dlc.dialects import tensor
from dlc.lowering.graph_to_tensor.lower_graph_to_tensor import LowerGraphToTensorPass
from dlc.parser import parse_module
from dlc.passes.tensor import schedule_conv, schedule_policy
from dlc.passes.tensor.fuse import FusePass
from dlc.passes.tensor.schedule import SchedulePass
from dlc.passes.tensor.schedule_blocks import PARALLEL_BLOCKS, column_blocks, rows_first
from dlc.pipeline import context

TARGETS = ["haswell", "skylake-avx512", "znver4", "znver5"]


def _ty(dims: tuple[int, ...]) -> str:
    return "<" + " x ".join([*map(str, dims), "f32"]) + ">"


def _product(m: int, k: int, n: int) -> str:
    a, b, c = _ty((m, k)), _ty((k, n)), _ty((m, n))
    return (
        f'module "mm"\nstage raw\nfunc @f: ({a}, {b}) -> {c} {{\n'
        f"'entry(%a: {a}, %b: {b}):\n    %c = dot %a: {a}, %b: {b}\n    return %c: {c}\n}}\n"
    )


def _conv(x: tuple[int, ...], k: tuple[int, ...]) -> str:
    y = _ty((x[0], k[0], x[2], x[3]))
    return (
        f'module "c"\nstage raw\nfunc @f: ({_ty(x)}, {_ty(k)}) -> {y} {{\n'
        f"'entry(%x: {_ty(x)}, %k: {_ty(k)}):\n"
        f"    %y = convolve %x: {_ty(x)} kernel %k: {_ty(k)} padding (1, 1), (1, 1)\n"
        f"    return %y: {y}\n}}\n"
    )


def _parallel_trips(source: str, target: str) -> tuple[str, int]:
    """The parallel loop of the last compute scheduled for `target`, and its iterations."""
    module = parse_module(source)
    LowerGraphToTensorPass().apply(context(), module)
    FusePass().apply(context(), module)
    SchedulePass(target=target).apply(context(), module)
    op = [c for c in module.walk() if isinstance(c, tensor.ComputeOp)][-1]
    assert op.schedule is not None
    loops = op.schedule.loops(op.domain, op.reduction_extents)
    (chosen,) = [lp for lp in loops if lp.name in op.schedule.parallel_loops]
    return chosen.name, -(-chosen.block // chosen.step)


@pytest.mark.parametrize(
    ("n", "nc", "nr", "want"),
    [
        (768, 256, 32, 96),  # BERT's hidden size: 8 blocks of 3 panels, not 3 of 256
        (3072, 256, 32, 256),  # 12 blocks of the L2 size already
        (784, 256, 32, 96),  # 25 panels: 8 of 3, then a short one
        (320, 256, 32, 32),  # 10 panels: one each
        (1000, 256, 32, 128),  # a column tail: 8 blocks, the last short
        (768, 64, 16, 64),  # 12 blocks of the L2 size (a small L2)
        (256, 256, 32, 0),  # one block holds them all: no column blocks
    ],
)
def test_column_blocks(n: int, nc: int, nr: int, want: int) -> None:
    assert column_blocks(n, nc, nr) == want
    if want:
        assert want % nr == 0 and want <= nc
        assert -(-n // want) >= min(PARALLEL_BLOCKS, -(-n // nr))


def test_rows_first() -> None:
    assert rows_first(1, 2, 112)  # 16 channels in blocks of 8, 112 rows
    assert not rows_first(1, 8, 112)  # 8 channel blocks are enough
    assert not rows_first(4, 2, 112)  # with the batch outside: 8
    assert not rows_first(1, 4, 3)  # fewer rows than channel blocks


@pytest.mark.parametrize("target", TARGETS)
def test_products_split_evenly(target: str) -> None:
    """BERT's 128 x 768 x 768 and x 3072 products (B beyond L2: column blocks) and
    ResNet-50's 49 x 4608 x 512 get at least `PARALLEL_BLOCKS` parallel iterations
    on every target."""
    for m, k, n in [(128, 768, 768), (128, 3072, 768), (49, 4608, 512)]:
        name, trips = _parallel_trips(_product(m, k, n), target)
        assert name == "d1.0" and trips >= PARALLEL_BLOCKS, (m, k, n, target)


@pytest.mark.parametrize("target", TARGETS)
def test_convolutions_with_few_channel_blocks_split_rows(target: str) -> None:
    """8 output channels are 2-4 blocks: the 30 rows are the parallel loop; 96 channels
    are enough blocks and stay outside."""
    name, trips = _parallel_trips(_conv((1, 3, 30, 30), (8, 3, 3, 3)), target)
    assert (name, trips) == ("d2", 30)
    name, trips = _parallel_trips(_conv((1, 8, 30, 30), (96, 8, 3, 3)), target)
    assert name == "d1.0" and trips >= PARALLEL_BLOCKS


@pytest.mark.parametrize("target", ["host", "haswell"])
def test_bits_do_not_depend_on_threads(monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    """A product in finer column blocks (K blocks and column blocks forced on a small
    one) and a convolution with its rows outside: the same bits at 1-3 threads, and
    without fma the same bits as opt_level 0."""
    monkeypatch.setenv("DLC_CACHE", "0")  # the patched policy is not in the cache key
    monkeypatch.setattr(schedule_policy, "MIN_WORK", 0)
    monkeypatch.setattr(schedule_conv, "MIN_WORK", 0)
    monkeypatch.setattr(schedule_policy, "k_block", lambda k, row_bytes, t: 256)
    monkeypatch.setattr(schedule_policy, "n_block", lambda kc, dt_bytes, nr, t: 4 * nr)
    rng = np.random.default_rng(11)
    cases = [
        (_product(40, 600, 200), [(40, 600), (600, 200)]),
        (_conv((1, 3, 12, 20), (16, 3, 3, 3)), [(1, 3, 12, 20), (16, 3, 3, 3)]),
    ]
    for source, shapes in cases:
        module = parse_module(source)
        args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        tensor_ir = compile_graph_module(module, target_cpu=target).ir("tensor")
        # which loop is parallel depends on the host's vector width (row blocks on AVX2)
        assert any(f"parallel [{d}]" in tensor_ir for d in ("d0.0", "d1.0", "d2")), tensor_ir
        one, *many = [
            compile_graph_module(module, num_threads=t, target_cpu=target)["f"](*args)
            for t in (1, 2, 3)
        ]
        for other in many:
            np.testing.assert_array_equal(other, one)
        plain = compile_graph_module(module, opt_level=0)["f"](*args)
        unfused = compile_graph_module(module, fma=False, num_threads=2, target_cpu=target)
        np.testing.assert_array_equal(unfused["f"](*args), plain)
