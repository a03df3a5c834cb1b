"""Gradients through calls reuse the forward run (autodiff/differentiate_tape.py): each call runs
once forward (`@g_fwd` records a `$g_tape`) and its adjoint reads the tape, so a
gradient through a recursion is linear in its depth; checked against central
differences, the reference interpreter and the box count."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from autodiff_util import check_gradients, differentiate
from xdsl.dialects.builtin import ModuleOp

import dlc
from dlc.dialects.graph import EnumOp, FuncOp
from dlc.dialects.graph_memory import ApplyOp
from dlc.dialects.graph_types import NominalType, TupleType
from dlc.passes.graph.differentiate import differentiated
from dlc.semantics.interpreter import run_function

HERE = Path(__file__).resolve().parent
TREE = (HERE.parents[1] / "recursive_tree.dl").read_text()  # shared with test_recursive_enums
WALK = (HERE / "tape_walk.dl").read_text()

RNG = np.random.default_rng(7)
W = RNG.normal(size=(4, 2)) * 0.5
B = RNG.normal(size=(1, 2)) * 0.1
X = np.array([0.3, -0.2])


def walk_list(rng: np.random.Generator, n: int) -> Any:
    """A `$List` of n random pairs, built iteratively."""
    out: Any = ("nil", ())
    for _ in range(n):
        out = ("cons", (rng.normal(size=2), out))
    return out


def in_thread(stack_bytes: int, call: Callable[[], Any]) -> Any:
    """`call()` on a thread with a stack of `stack_bytes` (native recursion is deep)."""
    out: list[Any] = []
    old = threading.stack_size(stack_bytes)
    try:
        thread = threading.Thread(target=lambda: out.append(call()))
        thread.start()
        thread.join()
    finally:
        threading.stack_size(old)
    assert out, "the call raised (see the thread's traceback)"
    return out[0]


@pytest.mark.parametrize("n", [0, 1, 5, 9])
def test_mutual_recursion_matches_central_differences(n: int) -> None:
    """@walk and @bounce call each other (a tuple result, both elements used), after a
    conditional on a computed value; @cell is a leaf helper, once called inactively."""
    lst = walk_list(np.random.default_rng(n), n)
    w, h = np.array([0.9, -1.3]), np.array([0.4, 0.7])
    check_gradients(WALK, "loss", "loss_grad", [w, h, lst], wrt=[0, 1])


def test_both_branches_of_the_recursion_are_taken() -> None:
    """The lists above take both branches of a `cons`: @walk's tape records `?path1`
    (`'up`, recursing into @walk) and `?path2` (`'down`, into @bounce)."""
    module = differentiate(WALK)
    w, h = np.array([0.9, -1.3]), np.array([0.4, 0.7])
    seen = set()
    for n in [5, 9]:
        tape = run_function(module, "walk_fwd", [w, h, walk_list(np.random.default_rng(n), n)])[1]  # type: ignore[index]
        while tape[1]:  # every case but the end holds the next callee's tape last
            seen.add(tape[0])
            tape = tape[1][-1]
    assert {"path1", "path2"} <= seen


def tape_types(module: ModuleOp) -> set[str]:
    original = {op.sym_name.data for op in dlc.parse(WALK, filename="w.dl").body.block.ops}
    return {
        op.sym_name.data
        for op in module.body.block.ops
        if isinstance(op, EnumOp) and op.sym_name.data not in original
    }


def test_adjoints_read_calls_from_the_tape() -> None:
    """No adjoint that takes a tape calls a primal or a `@g_fwd`: the forward values of
    its calls come from the tape (so nothing below a call is evaluated twice)."""
    module = differentiate(WALK)
    tapes = tape_types(module)
    assert tapes == {"walk_tape", "bounce_tape"}  # @cell calls nothing: no tape needed
    funcs = {f.sym_name.data: f for f in module.body.block.ops if isinstance(f, FuncOp)}

    def takes_tape(f: FuncOp) -> bool:
        return any(isinstance(t, NominalType) and t.ident in tapes for t in f.function_type.args)

    def makes_tape(f: FuncOp) -> bool:
        out = f.function_type.output
        return isinstance(out, TupleType) and any(
            isinstance(t, NominalType) and t.ident in tapes for t in out.types
        )

    pullbacks = [f for f in funcs.values() if takes_tape(f)]
    assert len(pullbacks) == 4  # @walk and @bounce, from each element of the tuple
    for f in pullbacks:
        for op in f.walk():
            if isinstance(op, ApplyOp):
                callee = funcs[op.callee.data]
                assert not makes_tape(callee) and callee.sym_name.data not in {
                    "walk",
                    "bounce",
                    "cell",
                }, f"@{f.sym_name.data} calls @{callee.sym_name.data}"


def test_compiled_tapes_agree_with_the_interpreter() -> None:
    """At opt_level 0 the compiled gradient is the interpreter's (up to libm's tanh
    against NumPy's, as for the primal), and every box of the tapes is released."""
    mod = dlc.compile(WALK, filename="tape_walk.dl", opt_level=0)
    graph = differentiate(WALK)
    w, h = np.array([0.9, -1.3]), np.array([0.4, 0.7])
    for n in [0, 3, 9, 40]:
        lst = walk_list(np.random.default_rng(n), n)
        got = mod.loss_grad(w, h, lst)
        want = run_function(graph, "loss_grad", [w, h, lst])
        for g, r in zip(got, want, strict=True):
            np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-15)
        assert mod.live_boxes() == 0


def reference_chain(n: int, w: np.ndarray, b: np.ndarray) -> float:
    """@deep_score in NumPy, iteratively."""
    v = X[None, :]
    for _ in range(n):
        v = np.tanh(np.concatenate([v, 0.5 * X[None, :]], axis=1) @ w + b)
    return float(v.sum())


def test_gradient_ten_thousand_deep() -> None:
    """The adjoint of a recursion 10 000 deep (quadratic in the depth before tapes, 779 s):
    central differences of the NumPy reference agree, and no box is left behind."""
    tree = dlc.compile(TREE, filename="recursive_tree.dl", opt_level=0)
    n = 10_000
    base = tree.live_boxes()
    dw, db = in_thread(128 << 20, lambda: tree.deep_grad(W, B, np.int64(n), X))
    assert tree.live_boxes() == base
    eps = 1e-6
    for param, grad, index in [(W, dw, 0), (B, db, 1)]:
        numeric = np.zeros_like(param)
        for k in np.ndindex(param.shape):
            hi, lo = param.copy(), param.copy()
            hi[k] += eps
            lo[k] -= eps
            args_hi = (hi, B) if index == 0 else (W, hi)
            args_lo = (lo, B) if index == 0 else (W, lo)
            numeric[k] = (reference_chain(n, *args_hi) - reference_chain(n, *args_lo)) / (2 * eps)
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9)


NESTED = """module "nested"
stage raw

func @inner: (f32) -> f32 {
'entry(%x: f32):
    %y = exp %x: f32
    return %y: f32
}

func @outer: (f32) -> f32 {
'entry(%x: f32):
    %y = apply @inner(%x: f32): (f32) -> f32
    %z = tanh %y: f32
    return %z: f32
}

func @top: (f32) -> f32 {
'entry(%x: f32):
    %y = apply @outer(%x: f32): (f32) -> f32
    return %y: f32
}

[adjoint @top]
func @top_grad: (f32) -> (f32)
"""


def test_export_keeps_tapes_internal(tmp_path: Path) -> None:
    """A C library exports the entry points; the functions that take or make tapes
    (enums: no C type) serve the adjoints inside it."""
    made = differentiated(dlc.parse(NESTED, filename="nested.dl")).body.block.ops
    assert {"outer_fwd", "outer_grad"} <= {f.sym_name.data for f in made if isinstance(f, FuncOp)}
    mod = dlc.compile(NESTED, filename="nested.dl", opt_level=0)
    mod.export(tmp_path / "nested.o", prefix="nested")
    header = (tmp_path / "nested.h").read_text()
    assert "nested_top_grad(" in header and "nested_inner_grad(" in header
    assert "outer_fwd" not in header and "nested_outer_grad(" not in header
    x = np.float32(0.3)
    want = (1 - np.tanh(np.exp(x)) ** 2) * np.exp(x)
    assert mod.top_grad(x)[0] == pytest.approx(want, rel=1e-6)


SECOND = (
    TREE
    + """
func @gsum: (<4 x 2 x f64>, <1 x 2 x f64>, $Tree) -> f64 {
'entry(%w: <4 x 2 x f64>, %b: <1 x 2 x f64>, %tree: $Tree):
    %g = apply @score_grad(%w: <4 x 2 x f64>, %b: <1 x 2 x f64>, %tree: $Tree): (<4 x 2 x f64>, <1 x 2 x f64>, $Tree) -> (<4 x 2 x f64>, <1 x 2 x f64>)
    %gb = extract 1 from %g: (<4 x 2 x f64>, <1 x 2 x f64>)
    %s = reduce %gb: <1 x 2 x f64> by add init 0: f64 along 0, 1
    return %s: f64
}

[adjoint @gsum wrt 0, 1]
func @gsum_grad: (<4 x 2 x f64>, <1 x 2 x f64>, $Tree) -> (<4 x 2 x f64>, <1 x 2 x f64>)
"""
)


def test_second_order_through_the_recursion() -> None:
    """An adjoint that is differentiated itself is built without tapes (a tape's values
    would enter its derivative as constants); the adjoint of the adjoint uses them."""
    leaf = lambda x: ("leaf", (np.array(x),))  # noqa: E731
    shaped = ("node", (("node", (leaf([0.3, -0.2]), leaf([0.5, 0.1]))), leaf([-0.4, 0.2])))
    module = check_gradients(SECOND, "gsum", "gsum_grad", [W, B, shaped], wrt=[0, 1])
    funcs = {f.sym_name.data: f for f in module.body.block.ops if isinstance(f, FuncOp)}
    assert len(funcs["score_grad"].function_type.args) == 3
    assert "score_grad_fwd" in funcs  # @gsum_grad records its call of @score_grad
