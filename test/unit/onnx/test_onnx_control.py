"""ONNX If, Loop and Scan: subgraphs imported as blocks of one function, compiled and
interpreted, against onnx's reference implementation or NumPy; and every refusal."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx_models import interpret, node, run

import dlc
import dlc.onnx
import dlc.onnx.backend as backend
from dlc.onnx import OnnxImportError
from dlc.onnx.ops_control import UnreachableBranchWarning

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def vi(name: str, elem: int = F, shape=None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def graph(nodes, inputs, outputs, name="body", inits=None) -> onnx.GraphProto:
    arrays = [numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()]
    return helper.make_graph(nodes, name, inputs, outputs, arrays)


def model(nodes, inputs, outputs, inits=None, opset=17) -> onnx.ModelProto:
    g = graph(nodes, inputs, outputs, "g", inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def check(m: onnx.ModelProto, *args: np.ndarray, compiled: bool = True) -> None:
    """dlc (interpreted, and compiled) agrees with onnx's reference implementation."""
    names = [v.name for v in m.graph.input]
    expected = ReferenceEvaluator(m).run(None, dict(zip(names, args, strict=True)))
    results = [interpret(m, *args)] + ([run(m, *args)] if compiled else [])
    for got in results:
        got = got if isinstance(got, tuple) else (got,)
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def problems(m: onnx.ModelProto, **kwargs) -> list[str]:
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(m, **kwargs)
    return info.value.problems


# ---- If ---------------------------------------------------------------------------


def _if_model(then_out="t", else_shape=(3,)) -> onnx.ModelProto:
    """y = x * 2 + a if c else x - a: the branches read outer values `x` and `a`."""
    then = graph([node("Mul", ["x", "two"], ["m"]), node("Add", ["m", "a"], ["t"])], [], [vi(then_out)])  # fmt: skip
    other = graph([node("Sub", ["x", "a"], ["e"])], [], [vi("e")], "other")
    if else_shape != (3,):
        other = graph([node("ReduceSum", ["x"], ["e"], keepdims=0)], [], [vi("e")], "other")
    return model(
        [node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
        [vi("c", B, []), vi("x", F, [3]), vi("a", F, [3])], [vi("y")], {"two": np.float32(2)},
    )  # fmt: skip


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_a_dynamic_condition_runs_one_branch(cond):
    x, a = np.array([1, 2, 3], np.float32), np.array([0.5, -1, 4], np.float32)
    check(_if_model(), np.array(cond), x, a)


def test_if_with_a_constant_condition_imports_its_branch_only():
    m = _if_model(else_shape=())  # the branches' shapes differ: fine once one is chosen
    x, a = np.array([1, 2, 3], np.float32), np.array([0.5, -1, 4], np.float32)
    module = dlc.onnx.load(m, constant_inputs={"c": np.array(False)})
    assert "conditional" not in dlc.print_module(module)
    rep = backend.prepare(m, "CPU")  # compiled for the value of `c`
    np.testing.assert_allclose(rep.run([np.array(False), x, a])[0], 6.0)
    np.testing.assert_allclose(rep.run([np.array(True), x, a])[0], x * 2 + a)
    assert rep.specialized == ["c"]


def test_if_branches_of_different_shapes_want_a_constant_condition():
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(_if_model(else_shape=()))
    assert info.value.problems == [
        "node 'y' (If): output 0 is <3 x f32> in the then branch and f32 in the else branch "
        "(dlc's shapes are static); a constant condition picks one branch"
    ]
    assert info.value.wanted_constants == ["c"]


def _if_with_a_bad_branch(bad: onnx.GraphProto, failing: str) -> onnx.ModelProto:
    """y = If(c) with `bad` as the `failing` branch and x - a as the other; `bad` may read
    a rank-5 `x5` and an LSTM's weights `w`, `r` (initializers)."""
    good = graph([node("Sub", ["x", "a"], ["e"])], [], [vi("e")], "good")
    then, other = (bad, good) if failing == "then" else (good, bad)
    inits = {"x5": np.zeros((1, 1, 1, 1, 3), np.float32), "w": np.zeros((1, 8, 3), np.float32),
             "r": np.zeros((1, 8, 2), np.float32)}  # fmt: skip
    return model(
        [node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
        [vi("c", B, []), vi("x", F, [3]), vi("a", F, [3])], [vi("y")], inits,
    )  # fmt: skip


@pytest.mark.parametrize("failing", ["then", "else"])
def test_if_branch_that_cannot_be_imported_traps_with_a_warning(failing):
    """An exporter's branch for inputs of another rank (an LSTM over rank 5 here: X
    must have rank 3) is compiled as a trap, with a warning, when the other imports."""
    bad = graph(
        [node("LSTM", ["x5", "w", "r"], ["", "h"], hidden_size=2), node("Identity", ["x"], ["b"])],
        [], [vi("b")], "bad",
    )  # fmt: skip
    m = _if_with_a_bad_branch(bad, failing)
    x, a = np.array([1, 2, 3], np.float32), np.array([0.5, -1, 4], np.float32)
    with pytest.warns(
        UnreachableBranchWarning,
        match=r"node 'y' \(If\): a branch cannot be imported \(graph 'bad': .*LSTM.*rank.*\); it traps if the model takes it",
    ):
        compiled = dlc.compile_onnx(m)
    np.testing.assert_array_equal(compiled.g(np.array(failing == "else"), x, a), x - a)
    with pytest.raises(dlc.TrapError):
        compiled.g(np.array(failing == "then"), x, a)


def test_if_branch_that_fails_after_nested_control_flow_is_discarded_whole():
    """The failing branch first imports an If of its own (blocks of the function) and
    then fails: those blocks are erased with it, and the other branch still runs."""
    inner = graph([node("Neg", ["x"], ["n"])], [], [vi("n")], "inner")
    bad = graph(
        [node("If", ["c"], ["z"], then_branch=inner, else_branch=inner),
         node("LSTM", ["x5", "w", "r"], ["", "h"], hidden_size=2), node("Add", ["z", "x"], ["b"])],
        [], [vi("b")], "bad",
    )  # fmt: skip
    m = _if_with_a_bad_branch(bad, "then")
    x, a = np.array([1, 2, 3], np.float32), np.array([0.5, -1, 4], np.float32)
    with pytest.warns(UnreachableBranchWarning, match=r"graph 'bad': .*LSTM"):
        compiled = dlc.compile_onnx(m)
    np.testing.assert_array_equal(compiled.g(np.array(False), x, a), x - a)
    with pytest.raises(dlc.TrapError):
        compiled.g(np.array(True), x, a)


def test_if_whose_branches_both_fail_names_the_first():
    bad = graph([node("Xyz", ["x"], ["b"])], [], [vi("b")], "bad")
    m = model(
        [node("If", ["c"], ["y"], then_branch=bad, else_branch=bad)],
        [vi("c", B, []), vi("x", F, [3])], [vi("y")],
    )  # fmt: skip
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(m)
    assert info.value.problems == [
        "node 'y' (If): graph 'bad': node 'b' (Xyz): operator Xyz is not supported"
    ]


# ---- Loop -------------------------------------------------------------------------


def _loop(body, m_value=None, cond_value=None, carried=("y0",), extra_inputs=(), outs=("y",)):
    inits = {}
    if m_value is not None:
        inits["M"] = np.array(m_value, np.int64)
    if cond_value is not None:
        inits["c"] = np.array(cond_value)
    ins = ["M" if m_value is not None else "", "c" if cond_value is not None else "", *carried]
    return model(
        [node("Loop", ins, list(outs), body=body)],
        [vi(n, F, [2]) for n in carried] + list(extra_inputs),
        [vi(o) for o in outs], inits,
    )  # fmt: skip


def test_loop_unrolled_slices_at_the_iteration_number():
    """A constant trip count: the body's Slice at row i folds; a scan output."""
    body = graph(
        [
            node("Identity", ["cin"], ["cout"]),
            node("Unsqueeze", ["i", "zero"], ["start"]),
            node("Add", ["start", "one"], ["end"]),
            node("Slice", ["table", "start", "end"], ["rows"]),
            node("Squeeze", ["rows", "zero"], ["row"]),
            node("Add", ["yin", "row"], ["yout"]),
            node("Mul", ["yout", "yout"], ["sq"]),
        ],
        [vi("i", I64, []), vi("cin", B, []), vi("yin")],
        [vi("cout", B, []), vi("yout"), vi("sq")],
        inits={"zero": np.array([0]), "one": np.array([1])},
    )
    table = np.arange(12, dtype=np.float32).reshape(6, 2)
    m = _loop(body, 5, True, outs=("y", "s"))
    m.graph.initializer.append(numpy_helper.from_array(table, "table"))
    assert "branch" not in dlc.print_module(dlc.onnx.load(m))
    check(m, np.array([1, -1], np.float32))


def _counting_body(step_if: bool = False) -> onnx.GraphProto:
    """y += x (or -= x on odd iterations, by a nested If); go on while sum(y) < limit."""
    update = [node("Add", ["yin", "x"], ["yout"])]
    if step_if:
        odd = [node("Mod", ["i", "two"], ["r"]), node("Equal", ["r", "one"], ["odd"])]
        sub = graph([node("Sub", ["yin", "x"], ["d"])], [], [vi("d")], "sub")
        add = graph([node("Add", ["yin", "x"], ["s"])], [], [vi("s")], "add")
        update = [*odd, node("If", ["odd"], ["yout"], then_branch=sub, else_branch=add)]
    return graph(
        [*update, node("ReduceSum", ["yout"], ["total"], keepdims=0),
         node("Less", ["total", "limit"], ["cout"])],
        [vi("i", I64, []), vi("cin", B, []), vi("yin")], [vi("cout", B, []), vi("yout")],
        inits={"two": np.array(2, np.int64), "one": np.array(1, np.int64)},
    )  # fmt: skip


@pytest.mark.parametrize(("limit", "iterations"), [(7.0, 7), (1000.0, 100), (-5.0, 1)])
def test_loop_exits_early_on_a_dynamic_condition(limit, iterations):
    m = _loop(_counting_body(), 100, True, extra_inputs=[vi("x", F, [2]), vi("limit", F, [])])
    y0, x = np.zeros(2, np.float32), np.array([1.0, 0.0], np.float32)
    check(m, y0, x, np.array(limit, np.float32), compiled=limit == 7.0)
    expected = x * iterations
    np.testing.assert_allclose(interpret(m, y0, x, np.array(limit, np.float32)), expected)


def test_loop_with_a_nested_if_and_a_dynamic_trip_count():
    m = _loop(_counting_body(step_if=True), None, True, extra_inputs=[vi("x", F, [2]), vi("limit", F, [])])  # fmt: skip
    m.graph.node[0].input[0] = "n"
    m.graph.input.append(vi("n", I64, []))
    y0, x = np.zeros(2, np.float32), np.array([1.0, 2.0], np.float32)
    for n in (0, 5, 6):
        check(m, y0, x, np.array(100.0, np.float32), np.array(n, np.int64), compiled=n == 5)


def test_loop_cfg_with_scan_outputs():
    """40 iterations (too many to unroll): a CFG loop that fills its scan output."""
    body = graph(
        [node("Identity", ["cin"], ["cout"]), node("Add", ["yin", "x"], ["yout"]),
         node("Cast", ["i"], ["fi"], to=F), node("Mul", ["yout", "fi"], ["s"])],
        [vi("i", I64, []), vi("cin", B, []), vi("yin")], [vi("cout", B, []), vi("yout"), vi("s")],
    )  # fmt: skip
    m = _loop(body, 40, True, extra_inputs=[vi("x", F, [2])], outs=("y", "s"))
    module = dlc.onnx.load(m)
    assert "conditional" in dlc.print_module(module)
    check(m, np.zeros(2, np.float32), np.array([1.0, 0.5], np.float32))


def _with_scan_output(m: onnx.ModelProto, passes_condition: bool = False) -> onnx.ModelProto:
    """The counting loop with a scan output `s` (and its condition passed through)."""
    body = m.graph.node[0].attribute[0].g
    if passes_condition:
        body.node[-1].CopyFrom(node("Identity", ["cin"], ["cout"]))
    body.node.append(node("Identity", ["yout"], ["s"]))
    body.output.append(vi("s"))
    m.graph.node[0].output.append("s")
    m.graph.output.append(vi("s"))
    return m


def test_loop_refusals():
    changing = graph(
        [node("Identity", ["cin"], ["cout"]), node("Concat", ["yin", "yin"], ["yout"], axis=0)],
        [vi("i", I64, []), vi("cin", B, []), vi("yin")], [vi("cout", B, []), vi("yout")],
    )  # fmt: skip
    assert problems(_loop(changing, 40, True)) == [
        "node 'y' (Loop): loop-carried value 0 changes type from <2 x f32> to <4 x f32> "
        "(dlc's shapes are static)"
    ]
    assert problems(_loop(changing)) == [
        "node 'y' (Loop): a Loop with neither a trip count nor a condition never ends"
    ]
    extra = [vi("x", F, [2]), vi("limit", F, [])]
    assert problems(_with_scan_output(_loop(_counting_body(), 40, True, extra_inputs=extra))) == [
        "node 'y' (Loop): scan outputs need a fixed number of iterations: the body's "
        "condition must pass the incoming one through"
    ]
    huge = _loop(_counting_body(), 1 << 40, True, extra_inputs=extra)
    assert problems(_with_scan_output(huge, passes_condition=True)) == [
        "node 'y' (Loop): scan outputs of more than 1048576 iterations"
    ]


def test_loop_trip_count_for_scan_outputs_is_wanted_as_a_constant():
    body = graph(
        [node("Identity", ["cin"], ["cout"]), node("Identity", ["yin"], ["yout"]),
         node("Identity", ["yin"], ["s"])],
        [vi("i", I64, []), vi("cin", B, []), vi("yin")], [vi("cout", B, []), vi("yout"), vi("s")],
    )  # fmt: skip
    m = model(
        [node("Add", ["n", "n"], ["twice"]), node("Loop", ["twice", "", "y0"], ["y", "s"], body=body)],
        [vi("n", I64, []), vi("y0", F, [2])], [vi("y"), vi("s")],
    )  # fmt: skip
    with pytest.raises(OnnxImportError) as info:
        dlc.onnx.load(m)
    assert info.value.problems == [
        "node 'y' (Loop): the trip count, for scan outputs, (input 0) must be a constant"
    ]
    assert info.value.wanted_constants == ["n"]  # computed from it
    y0 = np.array([1.0, 2.0], np.float32)
    _, s = backend.prepare(m, "CPU").run([np.array(3), y0])
    np.testing.assert_array_equal(s, np.tile(y0, (6, 1)))


# ---- Scan -------------------------------------------------------------------------


def _scan_model(axes, directions, out_axes, out_directions) -> onnx.ModelProto:
    """Two states (a running sum and a running max) and two scan inputs."""
    body = graph(
        [node("Add", ["s", "a"], ["s2"]), node("Max", ["mx", "b"], ["mx2"]),
         node("Mul", ["s2", "scale"], ["o1"]), node("Sub", ["mx2", "a"], ["o2"])],
        [vi("s"), vi("mx"), vi("a"), vi("b")], [vi("s2"), vi("mx2"), vi("o1"), vi("o2")],
    )  # fmt: skip
    return model(
        [node("Scan", ["s0", "m0", "xa", "xb"], ["s", "m", "y1", "y2"], body=body,
              num_scan_inputs=2, scan_input_axes=axes, scan_input_directions=directions,
              scan_output_axes=out_axes, scan_output_directions=out_directions)],
        [vi("s0", F, [3]), vi("m0", F, [3]), vi("xa", F, [4, 3] if axes[0] == 0 else [3, 4]),
         vi("xb", F, [4, 3] if axes[1] in (0, -2) else [3, 4])],
        [vi("s"), vi("m"), vi("y1"), vi("y2")], {"scale": np.float32(0.5)},
    )  # fmt: skip


def _scan_numpy(s, m, xa, xb, axes, directions, out_axes, out_directions):
    """Scan by the operator's definition (onnx's reference has no axes or directions)."""
    rows_a = np.moveaxis(xa, axes[0], 0)[:: -1 if directions[0] else 1]
    rows_b = np.moveaxis(xb, axes[1], 0)[:: -1 if directions[1] else 1]
    ys = [[], []]
    for a, b in zip(rows_a, rows_b, strict=True):
        s, m = s + a, np.maximum(m, b)
        ys[0].append(s * 0.5)
        ys[1].append(m - a)
    outs = []
    for y, axis, d in zip(ys, out_axes, out_directions, strict=True):
        outs.append(np.moveaxis(np.stack(y[:: -1 if d else 1]), 0, axis))
    return s, m, *outs


@pytest.mark.parametrize(
    ("axes", "directions", "out_axes", "out_directions"),
    [([0, 0], [0, 0], [0, 0], [0, 0]), ([1, -2], [1, 0], [1, -2], [0, 1])],
)
def test_scan_with_states_axes_and_directions(axes, directions, out_axes, out_directions):
    rng = np.random.default_rng(0)
    s0, m0 = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    xa = rng.standard_normal((4, 3) if axes[0] == 0 else (3, 4)).astype(np.float32)
    xb = rng.standard_normal((4, 3) if axes[1] in (0, -2) else (3, 4)).astype(np.float32)
    layout = (axes, directions, out_axes, out_directions)
    m = _scan_model(*layout)
    expected = _scan_numpy(s0, m0, xa, xb, *layout)
    for got in (interpret(m, s0, m0, xa, xb), run(m, s0, m0, xa, xb)):
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-6)


def test_scan_opset8_runs_a_loop_per_batch_row():
    body = graph([node("Add", ["s", "x"], ["s2"]), node("Identity", ["s2"], ["y"])],
                 [vi("s"), vi("x")], [vi("s2"), vi("y")])  # fmt: skip
    m = model(
        [node("Scan", ["", "s0", "x"], ["s", "y"], body=body, num_scan_inputs=1, directions=[1])],
        [vi("s0", F, [2, 3]), vi("x", F, [2, 4, 3])], [vi("s"), vi("y")], opset=8,
    )  # fmt: skip
    s0 = np.ones((2, 3), np.float32)
    x = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    y = s0[:, None] + np.cumsum(x[:, ::-1], axis=1)
    for got in (interpret(m, s0, x), run(m, s0, x)):
        np.testing.assert_allclose(got[0], y[:, -1])
        np.testing.assert_allclose(got[1], y)


def test_scan_refusals():
    m = _scan_model([0, 0], [0, 0], [0, 0], [0, 0])
    m.graph.input[3].CopyFrom(vi("xb", F, [5, 3]))
    assert problems(m) == [
        "node 's' (Scan): the scan inputs' lengths [4, 5] must be one nonzero length"
    ]
    m = _scan_model([0, 0], [0, 0], [0, 0], [0, 0])
    m.graph.node[0].attribute[0].g.node[0].op_type = "Frobnicate"
    assert problems(m) == [
        "node 's' (Scan): graph 'body': node 's2' (Frobnicate): operator Frobnicate is not supported"
    ]


# ---- import-time folding ------------------------------------------------------------


def test_fold_runs_the_models_opset_of_an_op():
    """Regression: folding ran the newest Unsqueeze, which rejects opset 11's `axes`
    attribute, so a shape computed with it was not a constant."""
    m = model(
        [node("Unsqueeze", ["k"], ["shape"], axes=[0]), node("Reshape", ["x", "shape"], ["y"])],
        [vi("x", F, [2, 3])], [vi("y")], {"k": np.array(6, np.int64)}, opset=11,
    )  # fmt: skip
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(run(m, x), x.reshape(6))
