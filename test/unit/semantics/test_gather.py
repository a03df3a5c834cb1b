"""Gathers and scatters (dlc/dialects/graph_gather.py): compiled code against the
reference interpreter and NumPy on random indices (negative ones included, i32 and
i64, f32 / f64 / integer data, ranks 1-4, every axis), out-of-range indices in every
build, and the importer's use of them."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dlc
from dlc.semantics.interpreter import run_function

RNG = np.random.default_rng(12)
NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}
DATA_TYPES = ("f32", "f64", "i32")


def ty(shape: Sequence[int], dt: str) -> str:
    return f"<{' x '.join(str(n) for n in shape)} x {dt}>" if shape else dt


def module(functions: list[tuple[str, list[tuple[str, str]], str, str]]) -> str:
    """DLVM text of functions (name, params (name, type), instruction, result type)."""
    parts = ['module "gathers"', "stage raw", ""]
    for name, params, inst, rtype in functions:
        sig = ", ".join(t for _, t in params)
        entry = ", ".join(f"%{n}: {t}" for n, t in params)
        parts += [
            f"func @{name}: ({sig}) -> {rtype} {{",
            f"'entry({entry}):",
            f"    %y = {inst}",
            f"    return %y: {rtype}",
            "}",
            "",
        ]
    return "\n".join(parts)


def data(shape: Sequence[int], dt: str) -> np.ndarray:
    if dt.startswith("f"):
        return RNG.standard_normal(shape).astype(NP[dt])
    return RNG.integers(-50, 50, shape).astype(NP[dt])


def indices(shape: Sequence[int], n: int, dt: str) -> np.ndarray:
    """Random indices in [-n, n): negative ones count from the end."""
    return RNG.integers(-n, n, shape).astype(NP[dt])


def check_all(
    text: str, cases: dict[str, list[np.ndarray]], want: dict[str, Any], rtol: float = 0.0
) -> None:
    """Every function compiled equals the reference interpreter and NumPy (exactly,
    or within `rtol` for float results: a scatter combines the updates that land on
    one element first, then with the data, so sums and products may round
    differently from applying them one by one)."""
    compiled = dlc.compile(text)
    parsed = dlc.parse(text)
    for name, args in cases.items():
        got = compiled[name](*args)
        for other in (run_function(parsed, name, args), want[name]):
            if rtol and got.dtype.kind == "f":
                np.testing.assert_allclose(got, other, rtol=rtol, err_msg=name)
            else:
                np.testing.assert_array_equal(got, other, err_msg=name)


# -- gathers -------------------------------------------------------------------------------


def test_gather_every_rank_and_axis() -> None:
    functions, cases, want = [], {}, {}
    k = 0
    for rank in range(1, 5):
        for axis in range(rank):
            shape = [3 + (d + rank) % 3 for d in range(rank)]
            dt, it = DATA_TYPES[k % 3], ("i32", "i64")[k % 2]
            ishape = [(2, 3), (4,), ()][k % 3]
            out = [*shape[:axis], *ishape, *shape[axis + 1 :]]
            name = f"g{k}"
            params = [("t", ty(shape, dt)), ("i", ty(ishape, it))]
            functions.append(
                (name, params, f"gather %t: {params[0][1]} at %i: {params[1][1]} along {axis}",
                 ty(out, dt))
            )  # fmt: skip
            x, i = data(shape, dt), indices(ishape, shape[axis], it)
            cases[name], want[name] = [x, i], np.take(x, i, axis=axis)
            k += 1
    check_all(module(functions), cases, want)


def test_gather_elements_every_rank_and_axis() -> None:
    functions, cases, want = [], {}, {}
    k = 0
    for rank in range(1, 5):
        for axis in range(rank):
            shape = [3 + (d + rank) % 3 for d in range(rank)]
            ishape = [n if d == axis else max(1, n - 1) for d, n in enumerate(shape)]
            ishape[axis] = 5
            dt, it = DATA_TYPES[k % 3], ("i64", "i32")[k % 2]
            name = f"e{k}"
            params = [("t", ty(shape, dt)), ("i", ty(ishape, it))]
            inst = f"gatherElements %t: {params[0][1]} at %i: {params[1][1]} along {axis}"
            functions.append((name, params, inst, ty(ishape, dt)))
            x, i = data(shape, dt), indices(ishape, shape[axis], it)
            view = x[tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(ishape))]
            cases[name] = [x, i]
            want[name] = np.take_along_axis(view, np.where(i < 0, i + shape[axis], i), axis)
            k += 1
    check_all(module(functions), cases, want)


ND_CASES = [  # data shape, indices shape, batch dims
    ((5, 4), (3, 1), 0),
    ((5, 4), (3, 2), 0),
    ((2, 3, 4), (2, 2, 2), 0),
    ((2, 3, 4), (2, 1), 1),
    ((2, 3, 4, 2), (2, 3, 2, 1), 2),
    ((6,), (2, 2, 1), 0),
]


def _gather_nd_numpy(x: np.ndarray, idx: np.ndarray, batch: int) -> np.ndarray:
    idx = idx.astype(np.int64)
    out = np.empty((*idx.shape[:-1], *x.shape[batch + idx.shape[-1] :]), x.dtype)
    for b in np.ndindex(*idx.shape[:batch]):
        ids = idx[b] % np.array(x.shape[batch : batch + idx.shape[-1]])
        out[b] = x[b][tuple(np.moveaxis(ids, -1, 0))]
    return out


def test_gather_nd_with_and_without_batch_dims() -> None:
    functions, cases, want = [], {}, {}
    for k, (shape, ishape, batch) in enumerate(ND_CASES):
        dt, it = DATA_TYPES[k % 3], ("i32", "i64")[k % 2]
        out = [*ishape[:-1], *shape[batch + ishape[-1] :]]
        params = [("t", ty(shape, dt)), ("i", ty(ishape, it))]
        tail = f" batchDims {batch}" if batch else ""
        inst = f"gatherND %t: {params[0][1]} at %i: {params[1][1]}{tail}"
        functions.append((f"n{k}", params, inst, ty(out, dt)))
        x = data(shape, dt)
        lim = np.array(shape[batch : batch + ishape[-1]])
        i = (RNG.integers(-lim, lim, ishape)).astype(NP[it])
        cases[f"n{k}"], want[f"n{k}"] = [x, i], _gather_nd_numpy(x, i, batch)
    check_all(module(functions), cases, want)


# -- scatters ------------------------------------------------------------------------------

REDUCTIONS = (None, "add", "multiply", "max", "min")
UFUNC = {"add": np.add, "multiply": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter_elements_numpy(
    u: np.ndarray, x: np.ndarray, idx: np.ndarray, axis: int, by: str | None
) -> np.ndarray:
    out = x.copy()
    for j in np.ndindex(*idx.shape):
        at = (*j[:axis], int(idx[j]) % x.shape[axis], *j[axis + 1 :])
        out[at] = u[j] if by is None else UFUNC[by](out[at], u[j])
    return out


def test_scatter_elements_every_reduction_rank_and_axis() -> None:
    functions, cases, want = [], {}, {}
    k = 0
    for rank in range(1, 4):
        for axis in range(rank):
            by = REDUCTIONS[k % 5]
            shape = [4 + (d + rank) % 2 for d in range(rank)]
            ishape = [3 if d == axis else n - d % 2 for d, n in enumerate(shape)]
            dt, it = ("f64", "i32", "f32")[k % 3], ("i64", "i32")[k % 2]
            params = [("u", ty(ishape, dt)), ("t", ty(shape, dt)), ("i", ty(ishape, it))]
            tail = f" by {by}" if by else ""
            inst = (
                f"scatterElements %u: {params[0][1]} to %t: {params[1][1]} "
                f"at %i: {params[2][1]} along {axis}{tail}"
            )
            functions.append((f"s{k}", params, inst, ty(shape, dt)))
            u, x, i = data(ishape, dt), data(shape, dt), indices(ishape, shape[axis], it)
            cases[f"s{k}"] = [u, x, i]
            want[f"s{k}"] = _scatter_elements_numpy(u, x, i, axis, by)
            k += 1
    check_all(module(functions), cases, want, rtol=1e-6)


def _scatter_nd_numpy(u: np.ndarray, x: np.ndarray, idx: np.ndarray, by: str | None) -> np.ndarray:
    out = x.copy()
    depth = idx.shape[-1]
    for r in np.ndindex(*idx.shape[:-1]):
        at = tuple(int(v) % n for v, n in zip(idx[r], x.shape[:depth], strict=True))
        out[at] = u[r] if by is None else UFUNC[by](out[at], u[r])
    return out


def test_scatter_nd_every_reduction() -> None:
    functions, cases, want = [], {}, {}
    shapes = [((5, 4), (3, 1)), ((5, 4), (6, 2)), ((3, 4, 2), (2, 2, 1)), ((6,), (1,))]
    k = 0
    for shape, ishape in shapes:
        for by in REDUCTIONS:
            dt, it = ("f32", "i64", "f64")[k % 3], ("i32", "i64")[k % 2]
            ushape = [*ishape[:-1], *shape[ishape[-1] :]]
            params = [("u", ty(ushape, dt)), ("t", ty(shape, dt)), ("i", ty(ishape, it))]
            tail = f" by {by}" if by else ""
            inst = f"scatterND %u: {params[0][1]} to %t: {params[1][1]} at %i: {params[2][1]}{tail}"
            functions.append((f"s{k}", params, inst, ty(shape, dt)))
            lim = np.array(shape[: ishape[-1]])
            i = RNG.integers(-lim, lim, ishape).astype(NP[it])
            u, x = data(ushape, dt), data(shape, dt)
            cases[f"s{k}"], want[f"s{k}"] = [u, x, i], _scatter_nd_numpy(u, x, i, by)
            k += 1
    check_all(module(functions), cases, want, rtol=1e-6)


# -- out-of-range indices ------------------------------------------------------------------

OUT_OF_RANGE = [  # instruction, params, result type, bad args, message
    (
        "gather %t: <5 x 4 x f32> at %i: <3 x i64> along 0",
        [("t", "<5 x 4 x f32>"), ("i", "<3 x i64>")],
        "<3 x 4 x f32>",
        [np.zeros((5, 4), np.float32), np.array([0, 5, -5])],
        "out-of-bounds gather index 5 into axis 0 of <5 x 4 x f32>",
    ),
    (
        "gather %t: <5 x 4 x f32> at %i: <3 x i32> along 1",
        [("t", "<5 x 4 x f32>"), ("i", "<3 x i32>")],
        "<5 x 3 x f32>",
        [np.zeros((5, 4), np.float32), np.array([0, -5, 3], np.int32)],
        "out-of-bounds gather index -5 into axis 1 of <5 x 4 x f32>",
    ),
    (
        "gatherElements %t: <5 x 4 x f32> at %i: <5 x 1 x i64> along 1",
        [("t", "<5 x 4 x f32>"), ("i", "<5 x 1 x i64>")],
        "<5 x 1 x f32>",
        [np.zeros((5, 4), np.float32), np.array([[0], [1], [2], [9], [-4]])],
        "out-of-bounds gatherElements index 9 into axis 1 of <5 x 4 x f32>",
    ),
    (
        "gatherND %t: <5 x 4 x f32> at %i: <1 x 2 x i64>",
        [("t", "<5 x 4 x f32>"), ("i", "<1 x 2 x i64>")],
        "<1 x f32>",
        [np.zeros((5, 4), np.float32), np.array([[4, 4]])],
        "out-of-bounds gatherND index 4 into axis 1 of <5 x 4 x f32>",
    ),
    (
        "scatterElements %u: <2 x f64> to %t: <3 x f64> at %i: <2 x i64> along 0 by add",
        [("u", "<2 x f64>"), ("t", "<3 x f64>"), ("i", "<2 x i64>")],
        "<3 x f64>",
        [np.ones(2), np.zeros(3), np.array([-4, 0])],
        "out-of-bounds scatterElements index -4 into axis 0 of <3 x f64>",
    ),
    (
        "scatterND %u: <1 x 2 x f32> to %t: <3 x 2 x f32> at %i: <1 x 1 x i32>",
        [("u", "<1 x 2 x f32>"), ("t", "<3 x 2 x f32>"), ("i", "<1 x 1 x i32>")],
        "<3 x 2 x f32>",
        [np.ones((1, 2), np.float32), np.zeros((3, 2), np.float32), np.array([[[3]]][0], np.int32)],
        "out-of-bounds scatterND index 3 into axis 0 of <3 x 2 x f32>",
    ),
]


@pytest.mark.parametrize("opt_level", [0, 2])
def test_out_of_range_index_is_an_index_error_in_every_build(opt_level: int) -> None:
    text = module([(f"f{k}", p, inst, r) for k, (inst, p, r, _, _) in enumerate(OUT_OF_RANGE)])
    compiled = dlc.compile(text, opt_level=opt_level)
    parsed = dlc.parse(text)
    for k, (_, _, _, args, message) in enumerate(OUT_OF_RANGE):
        line = 6 + 6 * k
        want = f"<string>:{line}:10: {message}"
        with pytest.raises(IndexError) as compiled_error:
            compiled[f"f{k}"](*args)
        assert str(compiled_error.value) == want
        with pytest.raises(IndexError) as reference_error:
            run_function(parsed, f"f{k}", args)
        assert str(reference_error.value) == want


def test_gather_from_an_empty_axis_is_an_error_unless_there_are_no_indices() -> None:
    text = module(
        [
            ("some", [("t", "<0 x 3 x f32>"), ("i", "<2 x i64>")],
             "gather %t: <0 x 3 x f32> at %i: <2 x i64> along 0", "<2 x 3 x f32>"),
            ("none", [("t", "<0 x 3 x f32>"), ("i", "<0 x i64>")],
             "gather %t: <0 x 3 x f32> at %i: <0 x i64> along 0", "<0 x 3 x f32>"),
        ]
    )  # fmt: skip
    compiled = dlc.compile(text)
    with pytest.raises(IndexError, match="out-of-bounds gather index 0 into axis 0 of <0 x 3"):
        compiled.some(np.zeros((0, 3), np.float32), np.zeros(2, np.int64))
    assert compiled.none(np.zeros((0, 3), np.float32), np.zeros(0, np.int64)).shape == (0, 3)


def test_dlc_run_reports_an_out_of_range_index_with_its_source_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dlc.cli import dlc_run

    inst, params, rtype, args, message = OUT_OF_RANGE[0]
    source = tmp_path / "g.dl"
    source.write_text(module([("f", params, inst, rtype)]))
    np.save(tmp_path / "t.npy", args[0])
    np.save(tmp_path / "i.npy", args[1])
    code = dlc_run.main(
        [str(source), "-i", f"t={tmp_path / 't.npy'}", "-i", f"i={tmp_path / 'i.npy'}"]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert f"g.dl:6:10: error: {message}" in err
    assert "    %y = gather" in err and "^" in err


def test_onnx_gather_and_scatter_use_the_new_ops_and_refuse_out_of_range_indices() -> None:
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Gather", ["t", "i"], ["rows"], axis=0),
        helper.make_node("ScatterND", ["t", "j", "rows"], ["y"], reduction="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("t", TensorProto.FLOAT, [5, 3]),
            helper.make_tensor_value_info("i", TensorProto.INT64, [2]),
            helper.make_tensor_value_info("j", TensorProto.INT32, [2, 1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    text = dlc.print_module(dlc.onnx.load(model))
    assert "gather %t: <5 x 3 x f32> at %i: <2 x i64> along 0" in text
    assert "scatterND %rows: <2 x 3 x f32> to %t: <5 x 3 x f32> at %j: <2 x 1 x i32> by add" in text
    compiled = dlc.compile_onnx(model)
    t = RNG.standard_normal((5, 3)).astype(np.float32)
    i, j = np.array([4, -5]), np.array([[0], [0]], np.int32)
    want = t.copy()
    want[0] += t[4] + t[0]
    np.testing.assert_allclose(compiled.g(t, i, j), want, rtol=1e-6)
    with pytest.raises(IndexError, match="out-of-bounds gather index 5 into axis 0 of <5 x 3"):
        compiled.g(t, np.array([5, 0]), j)


def test_edge_cases_scalar_results_bool_and_f16_data() -> None:
    """Rank-0 indices and results, bool and f16 data, a scatterND of one element."""
    text = (Path(__file__).parent / "gather_edges.dl").read_text()
    compiled, parsed = dlc.compile(text), dlc.parse(text)
    cases = {
        "scalar": [data([5], "f32"), np.int32(-2)],
        "bools": [RNG.random((5, 2)) < 0.5, np.array([4, -1, 0])],
        "halfs": [RNG.standard_normal((5, 40)).astype(np.float16), np.array([4, -1, 0])],
        "sbool": [np.array([True, False]), np.zeros(5, bool), np.array([1, -1])],
        "nd_full": [data([3, 4], "f64"), np.array([2, -1])],
        "snd_one": [np.float64(2.5), data([3, 4], "f64"), np.array([2, -1])],
    }
    for name, args in cases.items():
        got = compiled[name](*args)
        np.testing.assert_array_equal(got, run_function(parsed, name, args), err_msg=name)
    assert compiled.scalar(*cases["scalar"]) == cases["scalar"][0][3]
    assert compiled.sbool(*cases["sbool"]).tolist() == [False, True, False, False, False]


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler 'cc' on this machine")
def test_aot_call_returns_the_index_status_without_bounds_checking(tmp_path: Path) -> None:
    from aot_driver import build, driver_source, results, run

    from dlc.aot.signature import c_function
    from dlc.cli import dlc_compile
    from dlc.program_levels import defined_functions

    inst, params, rtype, args, message = OUT_OF_RANGE[0]
    source = tmp_path / "g.dl"
    source.write_text(module([("f", params, inst, rtype)]))
    functions = [
        c_function(f, "g") for f in defined_functions(dlc.parse(source.read_text())).values()
    ]
    (tmp_path / "driver.c").write_text(driver_source(functions, "g.h"))
    assert dlc_compile.main([str(source), "-o", str(tmp_path / "g.o"), "--prefix", "g"]) == 0
    driver = build(
        shutil.which("cc"),
        tmp_path / "driver.c",
        tmp_path / "driver",
        [str(tmp_path / "g.o"), "-lm"],
    )  # type: ignore[arg-type]
    table = np.arange(20, dtype=np.float32).reshape(5, 4)
    good = results(run(driver, "f", [table, np.array([4, -5, 1])]))[0]
    np.testing.assert_array_equal(good, table[[4, 0, 1]].reshape(-1))
    assert f"g.dl:6:10: {message}" in run(driver, "f", args)


def test_fold_constants_leaves_an_out_of_range_constant_gather_to_run_time() -> None:
    from dlc.passes.graph.fold_constants import FoldConstantsPass

    text = """module "fold"
stage raw

func @f: () -> <2 x f32> {
'entry():
    %t = literal <1.0: f32, 2.0: f32, 3.0: f32>: <3 x f32>
    %i = literal <0: i64, 7: i64>: <2 x i64>
    %y = gather %t: <3 x f32> at %i: <2 x i64> along 0
    return %y: <2 x f32>
}
"""
    folded = dlc.parse(text)
    FoldConstantsPass().apply(None, folded)  # type: ignore[arg-type]
    assert "gather %t: <3 x f32> at %i: <2 x i64> along 0" in dlc.print_module(folded)
    with pytest.raises(IndexError, match="<string>:8:10: out-of-bounds gather index 7 into"):
        dlc.compile(text).f()
