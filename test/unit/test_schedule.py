"""Schedules as typed IR (dlc/dialects/schedule.py): the attribute round-trips and is
verified; the `schedule` pass writes the default policy; without it every compute is
one plain nest with the same results; what the code generator cannot carry out yet is
a located diagnostic."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.parser import Parser

import dlc
from dlc import pipeline
from dlc.cli.dlc_opt import main as dlc_opt_main
from dlc.dialects.schedule import ScheduleAttr
from dlc.runtime import cache

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted(
    p
    for p in [*ROOT.glob("examples/*.dl"), *ROOT.glob("benchmarks/*.dl")]
    if p.name != "softmax_chain200.dl"  # softmax_chain20 has the same structure
)


@pytest.mark.parametrize(
    "text",
    [
        "#schedule.nest<>",
        "#schedule.nest<parallel [d0]>",
        "#schedule.nest<tile [d0 = [64, 8], r0 = [256]], interchange [r0.0, d0.0, d0.1, r0.1, d0.2]"
        ", parallel [d0.0], unroll [d0.2], vectorize d0.2 x 8, pack [1], group 3 at 0 feeds internal>",
        "#schedule.nest<parallel [d1], split [d3 = [1, 57]]>",
    ],
)
def test_schedule_round_trips(text: str) -> None:
    attr = Parser(pipeline.context(), text).parse_attribute()
    assert isinstance(attr, ScheduleAttr) and str(attr) == text
    assert Parser(pipeline.context(), str(attr)).parse_attribute() == attr
    assert hash(attr) == hash(Parser(pipeline.context(), text).parse_attribute())


def test_tile_order_is_normalized() -> None:
    a = ScheduleAttr(tiles={"r0": [4], "d1": [8], "d0": [2]})
    b = ScheduleAttr(tiles={"d0": [2], "d1": [8], "r0": [4]})
    assert a == b and str(a).startswith("#schedule.nest<tile [d0 = [2], d1 = [8], r0 = [4]]")


def _without_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    real = pipeline.level_passes

    def no_schedule(level: str, options: pipeline.Options) -> list:
        return [p for p in real(level, options) if p.name != "schedule"]

    monkeypatch.setattr(pipeline, "level_passes", no_schedule)
    monkeypatch.setenv("DLC_CACHE", "0")
    cache.clear_memory()


def _inputs(mod: dlc.runtime.module.CompiledModule, name: str) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    f = mod[name]
    return [
        rng.standard_normal(shape).astype(dtype)
        if np.dtype(dtype).kind == "f"
        else np.ones(shape, dtype)
        for dtype, shape, _ in f._checks  # type: ignore[union-attr]
    ]


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_without_the_schedule_pass_plain_nests_give_the_same_results(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scheduled = dlc.compile_file(path, fma=False)  # fma changes rounding (its own test)
    with monkeypatch.context() as m:
        _without_schedule(m)
        plain = dlc.compile_file(path, fma=False)
        plain_tensor = plain.ir("tensor")  # the levels are lowered again on first use
    assert "#schedule.nest" in scheduled.ir("tensor")
    assert "#schedule.nest" not in plain_tensor
    for name in scheduled.functions:
        f = scheduled[name]
        if f._checks is None or f._structured is not None:  # structs: test_e2e_language.py
            continue
        args = _inputs(scheduled, name)
        got, want = scheduled[name](*args), plain[name](*args)
        for g, w in zip(*(x if isinstance(x, tuple) else (x,) for x in (got, want)), strict=True):
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)


def test_plain_nest_has_no_tiles_and_scheduled_matmul_does() -> None:
    text = (ROOT / "benchmarks" / "matmul.dl").read_text()
    tensor_ir = dlc.compile(text).ir("tensor")
    # column blocks (d1.0) when B does not fit in the host's L2: the lanes are d1.2
    assert "tile [d0 = [" in tensor_ir
    assert "unroll [d0.1, d1.1]" in tensor_ir or "unroll [d0.1, d1.2]" in tensor_ir


@pytest.mark.parametrize(
    ("clause", "message"),
    [
        (
            "vectorize d0 x 8",
            "vectorize d0: only the innermost level of an axis in an unrolled register tile",
        ),
        ("pack [0]", "pack [0]: only an operand of a matrix product (two output axes, one"),
    ],
)
def test_unsupported_schedule_primitives_are_located_diagnostics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], clause: str, message: str
) -> None:
    source = tmp_path / "v.mlir"
    source.write_text(
        "tensor.func @f(%x: !graph.tensor<8xf32>) -> !graph.tensor<8xf32> {\n"
        f"    %e = tensor.compute(%x) schedule #schedule.nest<{clause}> {{\n"
        "    ^bb0(%i: i64):\n"
        "      %v = tensor.read %x[%i] : !graph.tensor<8xf32>\n"
        "      tensor.yield %v : f32\n"
        "    } : (!graph.tensor<8xf32>) -> !graph.tensor<8xf32>\n"
        "    tensor.return %e : !graph.tensor<8xf32>\n}\n"
    )
    assert dlc_opt_main([str(source), "-p", "lower-tensor-to-loop"]) == 1
    err = capsys.readouterr().err
    assert f"v.mlir:2:5: error: not supported by the code generator yet: {message}" in err


_TILE = "tile [d1 = [8]], interchange [d0, d1.0, r0, d1.1], unroll [d1.1], vectorize d1.1 x 4"


@pytest.mark.parametrize(
    ("dt", "read_w", "message"),
    [
        ("i32", "%w[%k, %j]", "vectorize d1.1: only float results, not i32"),
        ("f32", "%w[%j, %k]", "vectorize d1.1: tensor.read depends on the vectorized index"),
    ],
)
def test_vectorize_refuses_what_it_cannot_lane(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], dt: str, read_w: str, message: str
) -> None:
    """A vectorized register tile needs float lanes and unit-stride reads along the
    axis (dlc/analysis/tensor_lanes.py); anything else is a located diagnostic."""
    t = f"!graph.tensor<16x16x{dt}>"
    mul = "arith.muli" if dt == "i32" else "arith.mulf"
    init = "0 : i32" if dt == "i32" else "0.000000e+00 : f32"
    source = tmp_path / "v.mlir"
    source.write_text(
        f"tensor.func @f(%a: {t}, %w: {t}) -> {t} {{\n"
        f'    %e = tensor.compute(%a, %w) reduce [16] by "add" init {init}'
        f" schedule #schedule.nest<{_TILE}> {{\n"
        "    ^bb0(%i: i64, %j: i64, %k: i64):\n"
        f"      %x = tensor.read %a[%i, %k] : {t}\n"
        f"      %y = tensor.read {read_w} : {t}\n"
        f"      %p = {mul} %x, %y : {dt}\n"
        f"      tensor.yield %p : {dt}\n"
        f"    }} : ({t}, {t}) -> {t}\n"
        f"    tensor.return %e : {t}\n}}\n"
    )
    assert dlc_opt_main([str(source), "-p", "lower-tensor-to-loop"]) == 1
    err = capsys.readouterr().err
    assert f"v.mlir:2:5: error: not supported by the code generator yet: {message}" in err


PADDED = """module "m"
stage raw
func @f: (<1 x 16 x 20 x 40 x f32>, <16 x 1 x 3 x 3 x f32>) -> <1 x 16 x 20 x 40 x f32> {
'entry(%x: <1 x 16 x 20 x 40 x f32>, %k: <16 x 1 x 3 x 3 x f32>):
    %y = convolve %x: <1 x 16 x 20 x 40 x f32> kernel %k: <16 x 1 x 3 x 3 x f32> padding (1, 1), (2, 0) groups 16
    return %y: <1 x 16 x 20 x 40 x f32>
}
"""


@pytest.mark.parametrize("target", ["host", "haswell"])
def test_split_padding_keeps_the_bits(target: str) -> None:
    """A depthwise convolution's padded copy runs its rows in pieces (`split`, at the
    columns where its range checks change: asymmetric padding 2 | 0 splits at 2 only);
    without fma the result is bit for bit the reference interpreter's (opt_level=0),
    on 1 and 2 threads."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 16, 20, 40)).astype(np.float32)
    k = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)
    want = dlc.compile(PADDED, opt_level=0).f(x, k)
    for threads in (1, 2):
        got = dlc.compile(PADDED, fma=False, target_cpu=target, num_threads=threads)
        assert "split [d3 = [2]]" in got.ir("tensor")
        np.testing.assert_array_equal(got.f(x, k), want)
