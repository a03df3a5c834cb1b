"""Packed B panels (`pack [1]`, dlc/lowering/tensor_to_loop/pack.py): awkward shapes
(sizes 1, primes, tails smaller than a tile, several K and column blocks), a
transposed B (strided reads packed into panels), f64, bounds checks and 1, 2 and 3
threads, compiled with pack forced on and compared with the reference interpreter and
an exact product within the bound of a length-K float sum (`test_schedule_tiles.py`);
packing copies values, so without FMA the bits are those of the unpacked nest."""

from __future__ import annotations

import numpy as np
import pytest

from dlc import compile as dlc_compile
from dlc.api import compile_graph_module
from dlc.parser import parse_module
from dlc.passes.tensor import schedule_policy as schedule
from dlc.semantics.interpreter import run_function
from dlc.target import Target


@pytest.fixture(autouse=True)
def _always_pack(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tile and pack small products; K blocks of 256 and column blocks of two panels."""
    monkeypatch.setattr(schedule, "MIN_WORK", 0)
    monkeypatch.setattr(schedule, "k_block", lambda k, row_bytes, target: schedule.K_BLOCK)
    monkeypatch.setattr(schedule, "n_block", lambda kc, dt_bytes, nr, target: 2 * nr)
    monkeypatch.setattr(schedule, "pack_pays", lambda *args: True)


def _source(m: int, k: int, n: int, dt: str, transposed: bool = False) -> str:
    def ty(*dims: int) -> str:
        return "<" + " x ".join([*map(str, dims), dt]) + ">"

    b_type = ty(n, k) if transposed else ty(k, n)
    lines = [
        'module "mm"\nstage raw\n',
        f"func @mm: ({ty(m, k)}, {b_type}) -> {ty(m, n)} {{\n",
        f"'entry(%a: {ty(m, k)}, %b0: {b_type}):\n",
        f"    %b = transpose %b0: {b_type}\n" if transposed else "",
        f"    %c = dot %a: {ty(m, k)}, %{'b' if transposed else 'b0'}: {ty(k, n)}\n",
        f"    return %c: {ty(m, n)}\n}}\n",
    ]
    return "".join(lines)


def _check(
    m: int, k: int, n: int, dt: str = "f32", transposed: bool = False, **options: object
) -> str:
    """Compiled with `options` against the reference and an exact product; the tensor IR."""
    module = parse_module(_source(m, k, n, dt, transposed))
    rng = np.random.default_rng(m * 1000 + n)
    a = rng.standard_normal((m, k)).astype(dt.replace("f", "float"))
    b = rng.standard_normal((n, k) if transposed else (k, n)).astype(a.dtype)
    compiled = compile_graph_module(module, **options)  # type: ignore[arg-type]
    got = compiled["mm"](a, b)
    want = np.asarray(run_function(module, "mm", [a, b]))
    b_kn = (b.T if transposed else b).astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b_kn)
    bound = 4 * np.sqrt(k) * np.finfo(a.dtype).eps * scale + np.finfo(a.dtype).tiny
    assert np.all(np.abs(got - a.astype(np.float64) @ b_kn) <= bound), "vs float64 product"
    assert np.all(np.abs(want - got) <= 2 * bound), "vs reference"
    return compiled.ir("tensor")


@pytest.mark.parametrize(
    ("m", "k", "n"),
    [
        (64, 64, 64),  # whole tiles and panels, one K block
        (67, 50, 83),  # primes: partial row block, column block and panel
        (7, 300, 65),  # two K blocks (the second partial), a 1-column last panel
        (2, 513, 40),  # two rows, three K blocks
        (13, 1, 64),  # K = 1
        (30, 520, 100),  # column blocks, the last partial
    ],
)
def test_packed_products(m: int, k: int, n: int) -> None:
    assert "pack [1]" in _check(m, k, n)


def test_products_too_small_for_panels() -> None:
    """Not tiled (below one panel of columns, or one row): nothing to pack."""
    for m, k, n in [(40, 30, 1), (1, 30, 40), (5, 3, 3)]:
        assert "pack [" not in _check(m, k, n)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_packed_products_on_threads(threads: int) -> None:
    """Column blocks on threads pack disjoint panels; results do not depend on the
    thread count."""
    ir = _check(67, 600, 150, num_threads=threads)
    assert "parallel [d1.0]" in ir and "pack [1]" in ir


def test_packed_transposed_operand_f64_and_bounds_checked() -> None:
    assert "pack [1]" in _check(37, 290, 45, transposed=True)
    assert "pack [1]" in _check(31, 270, 21, "f64")
    assert "pack [1]" in _check(67, 300, 83, bounds_check=True, fma=True)


def test_packing_keeps_the_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    module = parse_module(_source(37, 300, 41, "f32"))
    rng = np.random.default_rng(3)
    a = rng.standard_normal((37, 300)).astype(np.float32)
    b = rng.standard_normal((300, 41)).astype(np.float32)
    packed = compile_graph_module(module, fma=False)
    assert "pack [1]" in packed.ir("tensor")
    plain = compile_graph_module(module, opt_level=0)["mm"](a, b)
    np.testing.assert_array_equal(packed["mm"](a, b), plain)
    monkeypatch.setattr(schedule, "pack_pays", lambda *args: False)
    unpacked = compile_graph_module(module, fma=True)
    assert "pack [" not in unpacked.ir("tensor")
    fused = compile_graph_module(module, fma=True)
    monkeypatch.setattr(schedule, "pack_pays", lambda *args: True)
    np.testing.assert_array_equal(fused["mm"](a, b), unpacked["mm"](a, b))


def _literal(a: np.ndarray, dt: str) -> str:
    rows = ", ".join(
        "<" + ", ".join(f"{float(v)}: {dt}" for v in r) + f">: <{a.shape[1]} x {dt}>" for r in a
    )
    return f"<{rows}>: <{a.shape[0]} x {a.shape[1]} x {dt}>"


@pytest.mark.parametrize(("dt", "transposed"), [("f32", False), ("f32", True), ("f64", False)])
def test_constant_weights_are_packed_at_compile_time(dt: str, transposed: bool) -> None:
    """A literal B becomes a packed read-only constant: no copy loops at run time; the
    bits are those of the unpacked nest (without FMA)."""
    m, k, n = 29, 37, 45
    rng = np.random.default_rng(17)
    np_dt = np.dtype(dt.replace("f", "float"))
    w = rng.integers(-4, 5, (n, k) if transposed else (k, n)).astype(np_dt)
    w_type = f"<{w.shape[0]} x {w.shape[1]} x {dt}>"
    kn = f"<{k} x {n} x {dt}>"
    weights = f"%t = transpose %w: {w_type}\n    " if transposed else ""
    text = (
        f'module "cw"\nstage raw\nfunc @f: (<{m} x {k} x {dt}>) -> <{m} x {n} x {dt}> {{\n'
        f"'entry(%x: <{m} x {k} x {dt}>):\n    %w = literal {_literal(w, dt)}\n    {weights}"
        f"%y = dot %x: <{m} x {k} x {dt}>, %{'t' if transposed else 'w'}: {kn}\n"
        f"    return %y: <{m} x {n} x {dt}>\n}}\n"
    )
    x = rng.standard_normal((m, k)).astype(np_dt)
    packed = dlc_compile(text, fma=False)
    loops = packed.ir("loop")
    panels = -(-n // schedule.tile_shape(Target.host(), n, dt)[0])
    assert loops.count("loop.const_buffer") == 1 and f"memref<{panels}x{k}x" in loops
    assert "loop.alloc" not in loops  # no scratch: nothing packed at run time
    plain = dlc_compile(text, opt_level=0)
    np.testing.assert_array_equal(packed.f(x), plain.f(x))
    bound = 4 * np.sqrt(k) * np.finfo(np_dt).eps * (np.abs(x) @ np.abs(w.T if transposed else w))
    got = dlc_compile(text, fma=True).f(x)
    assert np.all(np.abs(got - x.astype(np.float64) @ (w.T if transposed else w)) <= bound + 1e-30)
