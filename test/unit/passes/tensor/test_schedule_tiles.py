"""The register/cache-tiled `dot` schedule (dlc/passes/tensor/schedule.py, carried out by
dlc/lowering/tensor_to_loop/nest.py): awkward shapes (M, N, K not multiples of the tile,
1-sized dims, several K blocks, batched), tiled even when small (MIN_WORK patched to 0),
compiled and compared with the reference interpreter (NumPy's matmul, its own summation
order) and an exact float64 product, within 4 sqrt(K) eps (|A| |B|); the tiles the
policy picks for the host and for older CPU models."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dlc.analysis.tensor_lanes import vector_pieces
from dlc.api import compile_graph_module
from dlc.dialects import tensor
from dlc.parser import parse_module
from dlc.passes.tensor import schedule_policy as schedule
from dlc.passes.tensor.schedule import SchedulePass
from dlc.semantics.interpreter import run_function
from dlc.target import Target


@pytest.fixture(autouse=True)
def _always_tile(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tile small products, and block K above K_BLOCK however small B is."""
    monkeypatch.setattr(schedule, "MIN_WORK", 0)
    monkeypatch.setattr(schedule, "k_block", lambda k, row_bytes, target: schedule.K_BLOCK)
    monkeypatch.setattr(schedule, "n_block", lambda kc, dt_bytes, nr, target: 2 * nr)


def _source(lhs: tuple[int, ...], rhs: tuple[int, ...], out: tuple[int, ...], dt: str) -> str:
    def ty(dims: tuple[int, ...]) -> str:
        return "<" + " x ".join([*map(str, dims), dt]) + ">"

    return (
        'module "mm"\nstage raw\n'
        f"func @mm: ({ty(lhs)}, {ty(rhs)}) -> {ty(out)} {{\n"
        f"'entry(%a: {ty(lhs)}, %b: {ty(rhs)}):\n"
        f"    %c = dot %a: {ty(lhs)}, %b: {ty(rhs)}\n"
        f"    return %c: {ty(out)}\n}}\n"
    )


def _check(
    lhs: tuple[int, ...], rhs: tuple[int, ...], out: tuple[int, ...], dt: str, **options: object
) -> None:
    """Compiled (with `options`) against an exact product and the reference, within the
    bound of a length-K float sum (with or without fused multiply-adds)."""
    module = parse_module(_source(lhs, rhs, out, dt))
    rng = np.random.default_rng(7)
    a = rng.standard_normal(lhs).astype(dt.replace("f", "float"))
    b = rng.standard_normal(rhs).astype(dt.replace("f", "float"))
    got = compile_graph_module(module, **options)["mm"](a, b)  # type: ignore[arg-type]
    want = run_function(module, "mm", [a, b])
    k = lhs[-1]
    scale = np.matmul(np.abs(a).astype(np.float64), np.abs(b))
    bound = 4 * np.sqrt(k) * np.finfo(a.dtype).eps * scale + np.finfo(a.dtype).tiny
    exact = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert np.all(np.abs(got - exact) <= bound), "compiled vs float64 product"
    assert np.all(np.abs(np.asarray(want) - got) <= 2 * bound), "compiled vs reference"


@pytest.mark.parametrize(
    ("m", "k", "n"),
    [
        (64, 64, 64),  # whole tiles, one K block
        (67, 50, 83),  # partial row block and column panel
        (7, 300, 17),  # two K blocks (the second partial), tiny partial panel
        (1, 513, 40),  # one row (a vector x matrix product: not tiled)
        (2, 513, 40),  # two rows: tiled, one row block, K not blocked
        (13, 1, 64),  # K = 1
        (6, 600, 16),  # exactly one tile, three K blocks
        (30, 520, 100),  # column blocks of 32 (n_block patched), the last partial
    ],
)
@pytest.mark.parametrize("fma", [True, False])
def test_tiled_matrix_product(m: int, k: int, n: int, fma: bool) -> None:
    _check((m, k), (k, n), (m, n), "f32", fma=fma)


def test_tiled_product_bounds_checked_and_fused() -> None:
    _check((67, 50, 83)[:2], (50, 83), (67, 83), "f32", bounds_check=True, fma=True)


def test_without_fma_the_tiled_product_is_bit_identical_to_opt_level_0() -> None:
    """Schedules never change the fold order: only `fma` changes rounding."""
    module = parse_module(_source((37, 300), (300, 41), (37, 41), "f32"))
    rng = np.random.default_rng(3)
    a = rng.standard_normal((37, 300)).astype(np.float32)
    b = rng.standard_normal((300, 41)).astype(np.float32)
    plain = compile_graph_module(module, opt_level=0)["mm"](a, b)
    tiled = compile_graph_module(module, fma=False)["mm"](a, b)
    fused = compile_graph_module(module, fma=True)["mm"](a, b)
    np.testing.assert_array_equal(tiled, plain)
    assert not np.array_equal(fused, plain)  # fma did change some roundings


def test_vector_lanes_keep_the_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A vectorized register tile folds every element in the same order as the scalar
    tile, with and without fused multiply-adds, for the host and an SSE target."""
    module = parse_module(_source((29, 70), (70, 45), (29, 45), "f32"))
    rng = np.random.default_rng(5)
    a = rng.standard_normal((29, 70)).astype(np.float32)
    b = rng.standard_normal((70, 45)).astype(np.float32)
    options = [{"fma": True}, {"fma": False}, {"target_cpu": "x86-64"}]
    vector = [compile_graph_module(module, **o)["mm"](a, b) for o in options]  # type: ignore[arg-type]
    assert "vectorize d1.1" in compile_graph_module(module).ir("tensor")
    monkeypatch.setattr(schedule, "lane_plan", lambda op, axis: "scalar tiles")
    scalar = [compile_graph_module(module, **o)["mm"](a, b) for o in options]  # type: ignore[arg-type]
    assert "vectorize" not in compile_graph_module(module).ir("tensor")
    for v, s in zip(vector, scalar, strict=True):
        np.testing.assert_array_equal(v, s)


def test_remainder_columns_are_narrower_vectors() -> None:
    """45 columns for 8-lane vectors (haswell: NR = 16): two panels, then 13 columns as
    8 + 4 lanes and one scalar, with the same bits as the scalar tile."""
    module = parse_module(_source((29, 70), (70, 45), (29, 45), "f32"))
    mod = compile_graph_module(module, target_cpu="haswell", fma=False)
    ir = mod.ir("loop")
    assert "vector<8xf32>" in ir and "vector<4xf32>" in ir and "vector<2xf32>" not in ir
    rng = np.random.default_rng(11)
    a = rng.standard_normal((29, 70)).astype(np.float32)
    b = rng.standard_normal((70, 45)).astype(np.float32)
    plain = compile_graph_module(module, opt_level=0)["mm"](a, b)
    np.testing.assert_array_equal(mod.mm(a, b), plain)


@pytest.mark.parametrize(
    ("extent", "width", "pieces"),
    [
        (32, 16, [(0, 16, 16), (16, 16, 16)]),
        (13, 16, [(0, 8, 8), (8, 4, 4), (12, 1, 1)]),
        (31, 16, [(0, 16, 16), (16, 8, 8), (24, 4, 4), (28, 2, 2), (30, 1, 1)]),
        (3, 1, [(0, 1, 1), (1, 1, 1), (2, 1, 1)]),
        (0, 8, []),
    ],
)
def test_vector_pieces(extent: int, width: int, pieces: list[tuple[int, int, int]]) -> None:
    assert vector_pieces(extent, width) == pieces


def test_partial_panels_are_narrower_vectors() -> None:
    """The columns left over after whole vectors (46 = 5 x 8 + 4 + 2 with SSE's 4-lane
    vectors) become vectors of 4 and 2 lanes, not scalars; the bits stay those of the
    plain nest."""
    module = parse_module(_source((9, 40), (40, 46), (9, 46), "f32"))
    rng = np.random.default_rng(11)
    a = rng.standard_normal((9, 40)).astype(np.float32)
    b = rng.standard_normal((40, 46)).astype(np.float32)
    compiled = compile_graph_module(module, fma=False, target_cpu="x86-64")
    loops = compiled.ir("loop")
    assert "-> vector<2xf32>" in loops and "-> vector<4xf32>" in loops
    plain = compile_graph_module(module, opt_level=0)["mm"](a, b)
    np.testing.assert_array_equal(compiled["mm"](a, b), plain)


def test_non_contiguous_and_f16_products() -> None:
    _check((33, 65), (65, 7), (33, 7), "f16")  # f16: not tiled, fused sums
    module = parse_module(_source((40, 64), (64, 48), (40, 48), "f32"))
    rng = np.random.default_rng(9)
    a = rng.standard_normal((64, 40)).astype(np.float32).T  # Fortran-ordered views
    b = rng.standard_normal((48, 64)).astype(np.float32).T
    got = compile_graph_module(module)["mm"](a, b)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_tiled_matrix_product_f64() -> None:
    _check((31, 270), (270, 21), (31, 21), "f64")


def test_tiled_batched_product() -> None:
    _check((3, 11, 300), (3, 300, 35), (3, 11, 35), "f32")


def _schedules(m: int, k: int, n: int, target: str, dt: str = "f32") -> list[str]:
    from dlc.lowering.graph_to_tensor.lower_graph_to_tensor import LowerGraphToTensorPass
    from dlc.pipeline import context

    module = parse_module(_source((m, k), (k, n), (m, n), dt))
    LowerGraphToTensorPass().apply(context(), module)
    SchedulePass(target=target).apply(context(), module)
    return [str(op.schedule) for op in module.walk() if isinstance(op, tensor.ComputeOp)]


@pytest.mark.parametrize(
    ("target", "mr", "nr", "lanes"),
    [
        ("x86-64", 6, 8, 4),
        ("haswell", 6, 16, 8),
        ("skylake-avx512", 12, 32, 16),
        ("znver5", 12, 32, 16),
        ("znver4", 6, 64, 16),
    ],
)
def test_tiles_follow_the_target(target: str, mr: int, nr: int, lanes: int) -> None:
    """Two of the target's vectors of columns (SSE: 8 f32, AVX2: 16, AVX-512: 32) and
    rows enough to fill its vector registers (6 of 16, 12 of 32); on Zen 4, whose
    512-bit arithmetic runs on 256-bit halves, four vectors of 6 rows when the row
    holds them (`tile_shape`)."""
    (tiled,) = _schedules(64, 64, 64, target)
    assert f"tile [d0 = [{mr}], d1 = [{nr}]]" in tiled
    assert "interchange [d0.0, d1.0, r0, d0.1, d1.1]" in tiled and "unroll [d0.1, d1.1]" in tiled
    assert f"vectorize d1.1 x {lanes}" in tiled
    assert Target.from_cpu(target).cpu == target
    assert Target.from_cpu(target).split_vectors == (target == "znver4")


def test_tiling_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedule, "MIN_WORK", 1 << 16)
    (small,) = _schedules(4, 4, 4, "host")  # N below one column panel: no tiles
    assert "tile" not in small
    (large,) = _schedules(8, 600, 32, "haswell")  # K above K_BLOCK: K blocks
    assert "r0 = [256]" in large and "interchange [r0.0, d0.0, d1.0, r0.1, d0.1, d1.1]" in large
    monkeypatch.undo()
    monkeypatch.setattr(schedule, "MIN_WORK", 1 << 16)
    (fits,) = _schedules(8, 600, 32, "haswell")  # B (75 KB) fits in L2: no K blocks
    assert "r0 = [" not in fits and "interchange [d0.0, d1.0, r0, d0.1, d1.1]" in fits
    (big,) = _schedules(16, 8192, 64, "haswell")  # B (2 MiB) does not: K blocks
    assert "r0 = [256]" in big
    (wide_b,) = _schedules(64, 2048, 512, "haswell")  # and 8 column blocks (PARALLEL_BLOCKS)
    assert "d1 = [64, 16]" in wide_b and "interchange [d1.0, r0.0, d0.0, d1.1" in wide_b
    assert "parallel [d1.0]" in wide_b
    (wide,) = _schedules(64, 784, 256, "haswell")  # 16 column panels, 11 row blocks
    assert "interchange [d1.0, d0.0, r0, d0.1, d1.1], parallel [d1.0]" in wide


def test_product_with_a_splat_matrix_is_tiled() -> None:
    """A splat B (ONNX fill weights) is folded into the body, so no read depends on
    the columns: the product still gets the tiles of a real one (it summed each row
    again for every column, 3x slower on MatMul 128 x 768 x 3072), the same fold
    order (bits of opt_level=0 without fma), within the K bound with fma, any threads."""
    src = (
        'module "mm"\nstage raw\n'
        "func @mm: (<37 x 300 x f32>) -> <37 x 43 x f32> {\n"
        "'entry(%a: <37 x 300 x f32>):\n"
        "    %w = literal 0.03125: <300 x 43 x f32>\n"
        "    %c = dot %a: <37 x 300 x f32>, %w: <300 x 43 x f32>\n"
        "    return %c: <37 x 43 x f32>\n}\n"
    )
    a = np.random.default_rng(5).standard_normal((37, 300)).astype(np.float32)
    want = np.asarray(run_function(parse_module(src), "mm", [a]))
    plain = compile_graph_module(parse_module(src), opt_level=0)["mm"](a)
    tiled = compile_graph_module(parse_module(src), fma=False, num_threads=2)
    assert "tile [d0 = [" in tiled.ir("tensor") and "vectorize d1." in tiled.ir("tensor")
    np.testing.assert_array_equal(tiled["mm"](a), plain)
    fused = compile_graph_module(parse_module(src), num_threads=1, target_cpu="haswell")["mm"](a)
    bound = 300 * np.finfo(np.float32).eps * (np.abs(a).sum(axis=1).max() * 0.03125)
    assert np.abs(fused - want).max() <= bound


@pytest.mark.parametrize("dt", ["f32", "f64"])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_four_vector_tile(monkeypatch: pytest.MonkeyPatch, dt: str, threads: int) -> None:
    """The Zen 4 tile (6 rows x 4 vectors, `tile_shape`), forced on whatever host runs
    the test: partial row blocks and column panels, a column tail narrower than a vector,
    several K blocks, f32 and f64, 1-3 threads (bounds-checked on 2), within the bound
    of a length-K sum."""
    monkeypatch.setenv("DLC_CACHE", "0")  # the patched policy is not in the cache key

    def four_vectors(target: Target, n: int, dt: str) -> tuple[int, int]:
        width = target.vector_bytes // (4 if dt == "f32" else 8)
        return (4 * width, 6) if n >= 4 * width else (2 * width, 6)

    monkeypatch.setattr(schedule, "tile_shape", four_vectors)
    lanes = 16 if dt == "f32" else 8
    for m, k, n in [(37, 301, 4 * lanes + 5), (6, 256, 4 * lanes), (64, 520, 13 * lanes - 3)]:
        text = str(_schedules(m, k, n, "znver4", dt))
        assert re.search(rf"d1 = \[(\d+, )?{4 * lanes}\]", text), text  # panels of 4 vectors
        _check((m, k), (k, n), (m, n), dt, num_threads=threads, bounds_check=threads == 2)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_f16_products_at_thread_counts(threads: int) -> None:
    """f16 products of every shape class (sizes 1, primes, tails, K blocks, batched)
    within 4 sqrt(K) eps(f16) (|A| |B|) at 1-3 threads, bounds-checked on 2."""
    for lhs, rhs, out in [
        ((1, 1), (1, 1), (1, 1)),
        ((37, 301), (301, 41), (37, 41)),
        ((64, 64), (64, 64), (64, 64)),
        ((3, 13, 30), (3, 30, 17), (3, 13, 17)),
    ]:
        _check(lhs, rhs, out, "f16", num_threads=threads, bounds_check=threads == 2)
