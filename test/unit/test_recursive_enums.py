"""Recursive enums (DLVM's `$Tree`) compile: boxes, reference counts, deep trees,
gradients through the recursion, and agreement with the reference interpreter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dlc
from dlc.semantics.interpreter import run_function

HERE = Path(__file__).resolve().parent
TREE = (HERE / "recursive_tree.dl").read_text()
DLVM_ENUM = (HERE.parent / "lit" / "dlvm" / "enum.dl").read_text()

RNG = np.random.default_rng(7)
W = RNG.normal(size=(4, 2)) * 0.5
B = RNG.normal(size=(1, 2)) * 0.1
X = np.array([0.3, -0.2])


@pytest.fixture(scope="module")
def tree() -> Any:
    return dlc.compile(TREE, filename="recursive_tree.dl", opt_level=0)


@pytest.fixture(scope="module")
def graph() -> Any:
    return dlc.parse(TREE, filename="recursive_tree.dl")


def reference_chain(n: int) -> float:
    """@deep_score in NumPy, iteratively: the chain folds left to right."""
    v = X[None, :]
    for _ in range(n):
        v = np.tanh(np.concatenate([v, 0.5 * X[None, :]], axis=1) @ W + B)
    return float(v.sum())


def random_tree(rng: np.random.Generator, leaves: int) -> Any:
    """A random binary tree as `(case, values)` tuples (built iteratively)."""
    forest = [("leaf", (rng.normal(size=2),)) for _ in range(leaves)]
    while len(forest) > 1:
        i = int(rng.integers(len(forest) - 1))
        forest[i : i + 2] = [("node", (forest[i], forest[i + 1]))]
    return forest[0]


def depth(value: Any) -> int:
    """The depth of a left-deep chain, walked iteratively."""
    d = 0
    while value[0] == "node":
        value, d = value[1][0], d + 1
    return d


@pytest.mark.parametrize("n", [0, 1, 3, 40])
def test_tree_matches_the_interpreter(tree: Any, graph: Any, n: int) -> None:
    """(`dot` is NumPy's matmul in the interpreter: equal up to summation order.)"""
    expected = run_function(graph, "deep_score", [W, B, np.int64(n), X])
    assert tree.deep_score(W, B, np.int64(n), X) == pytest.approx(expected, rel=1e-12)
    assert tree.live_boxes() == 0  # every box the call made was freed


def test_trees_cross_the_python_boundary(tree: Any, graph: Any) -> None:
    built = tree.chain(np.int64(3), X)
    assert built[0] == "node" and depth(built) == 3
    assert tree.live_boxes() == 0  # the result's boxes were read back and released
    shaped = random_tree(np.random.default_rng(1), 9)
    for t in (shaped, built):
        expected = run_function(graph, "score", [W, B, t])
        assert tree.score(W, B, t) == pytest.approx(expected, rel=1e-12)
    assert tree.live_boxes() == 0  # the argument's boxes too


def test_depth_ten_thousand(tree: Any) -> None:
    """A tree 10 000 deep, built at run time: the recursion runs natively (no stack
    overflow), the tree comes back to Python and goes in again, nothing leaks."""
    n = 10_000
    assert tree.deep_score(W, B, np.int64(n), X) == pytest.approx(reference_chain(n), rel=1e-12)
    deep = tree.chain(np.int64(n), X)
    assert depth(deep) == n
    assert tree.score(W, B, deep) == pytest.approx(reference_chain(n), rel=1e-12)
    assert tree.live_boxes() == 0


@pytest.mark.parametrize("shape", ["random", "chain"])
def test_gradient_through_the_recursion(tree: Any, shape: str) -> None:
    """`[adjoint @score wrt 0, 1]` against central differences in f64, on a random
    tree and on a chain 200 deep (10 000 deep: test_autodiff_tapes.py)."""
    if shape == "random":
        shaped = random_tree(np.random.default_rng(3), 12)
    else:
        shaped = tree.chain(np.int64(200), X)
    dw, db = tree.score_grad(W, B, shaped)
    eps = 1e-6
    for param, grad, index in [(W, dw, 0), (B, db, 1)]:
        numeric = np.zeros_like(param)
        for k in np.ndindex(param.shape):
            hi, lo = param.copy(), param.copy()
            hi[k] += eps
            lo[k] -= eps
            args_hi = [hi, B] if index == 0 else [W, hi]
            args_lo = [lo, B] if index == 0 else [W, lo]
            numeric[k] = (tree.score(*args_hi, shaped) - tree.score(*args_lo, shaped)) / (2 * eps)
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9)
    assert tree.live_boxes() == 0


SHARING = """module "sharing"
stage raw

enum $T {
    ?leaf(f64)
    ?pair($T, $T)
}

var @kept: $T
var @never: $T

func @count: ($T) -> f64 {
'entry(%t: $T):
    branchEnum %t: $T case ?leaf 'leaf case ?pair 'pair
'leaf(%x: f64):
    return %x: f64
'pair(%a: $T, %b: $T):
    %ca = apply @count(%a: $T): ($T) -> f64
    %cb = apply @count(%b: $T): ($T) -> f64
    %s = add %ca: f64, %cb: f64
    return %s: f64
}

func @doubled: (i64) -> $T {
'entry(%n: i64):
    %t0 = literal ?leaf(1.0: f64): $T
    branch 'loop(%n: i64, %t0: $T)
'loop(%i: i64, %t: $T):
    %done = lessThanOrEqual %i: i64, 0: i64
    conditional %done: bool then 'exit() else 'body()
'body():
    %t1 = literal ?pair(%t: $T, %t: $T): $T
    %j = subtract %i: i64, 1: i64
    branch 'loop(%j: i64, %t1: $T)
'exit():
    return %t: $T
}

func @keep: (i64) -> f64 {
'entry(%n: i64):
    %t = apply @doubled(%n: i64): (i64) -> $T
    %old = load @kept: *$T
    %c = apply @count(%old: $T): ($T) -> f64
    store %t: $T to @kept: *$T
    return %c: f64
}

func @zeros: () -> ($T, f64) {
'entry():
    %z = load @never: *$T
    %k = load @kept: *$T
    %c = apply @count(%k: $T): ($T) -> f64
    %r = literal (%z: $T, %c: f64): ($T, f64)
    return %r: ($T, f64)
}
"""


@pytest.mark.parametrize("opt_level", [0, 3])
def test_shared_subtrees_and_variables(opt_level: int) -> None:
    """`?pair(%t, %t)` shares one box (counted twice); a tree kept in a variable stays
    alive until it is overwritten; a fresh variable holds the zero value (address 0,
    no box), as in the interpreter."""
    mod = dlc.compile(SHARING, filename="sharing.dl", opt_level=opt_level)
    graph = dlc.parse(SHARING, filename="sharing.dl")
    assert mod.count(mod.doubled(np.int64(10))) == 1024.0
    assert mod.live_boxes() == 0
    assert mod.keep(np.int64(3)) == 0.0  # the variable held the zero value ?leaf(0.0)
    assert mod.live_boxes() == 4  # a chain of 4 shared boxes is kept
    assert mod.keep(np.int64(5)) == 8.0
    assert mod.live_boxes() == 6  # the old tree was released when overwritten
    zero, kept = mod.zeros()
    assert zero == ("leaf", (0.0,)) and kept == 32.0
    assert run_function(graph, "zeros", [])[0] == zero


def test_dlvm_enum_example_compiles() -> None:
    """DLVM's FileCheck/enum.dl: the recursive $TestEnum1 literal stored in a variable
    and the $Tree classifier on a struct of weights, against the interpreter."""
    mod = dlc.compile(DLVM_ENUM, filename="enum.dl", opt_level=0)
    graph = dlc.parse(DLVM_ENUM, filename="enum.dl")
    assert mod.initialize_enum1() is None
    assert mod.live_boxes() == 3  # ?baz holds ?foo and ?bar, kept by @enum1
    rng = np.random.default_rng(0)
    net = tuple(rng.normal(size=s).astype(np.float32) for s in [(4, 2), (1, 2), (1,), (1,)])
    word = lambda: ("word", (rng.normal(size=1).astype(np.float32),))  # noqa: E731
    shaped = (
        "combine",
        (
            word(),
            rng.normal(size=2).astype(np.float32),
            ("combine", (word(), np.zeros(2, np.float32), word())),
        ),
    )
    got = mod.prediction(net, shaped)
    np.testing.assert_allclose(
        got, run_function(graph, "prediction", [net, shaped]), rtol=2e-5, atol=1e-6
    )
    assert mod.live_boxes() == 3


def test_bad_trees_are_refused_without_leaks(tree: Any) -> None:
    good = ("leaf", (X,))
    with pytest.raises(
        TypeError, match=r"argument 2 \(%tree\) of @score: expected \(case, values\)"
    ):
        tree.score(W, B, ("node", (good, ("branch", ()))))
    with pytest.raises(TypeError, match=r"expected a f64 value of shape \(2,\)"):
        tree.score(W, B, ("node", (good, ("leaf", (np.zeros(3),)))))
    assert tree.live_boxes() == 0


ZEROS = """module "zeros"
stage raw

enum $Opt {
    ?some(f32)
    ?none()
}

enum $Wrap {
    ?one($Opt, i32)
    ?two(f64)
}

var @o: $Opt
var @w: $Wrap

func @fresh: () -> ($Opt, $Wrap) {
'entry():
    %o = load @o: *$Opt
    %w = load @w: *$Wrap
    %r = literal (%o: $Opt, %w: $Wrap): ($Opt, $Wrap)
    return %r: ($Opt, $Wrap)
}

func @same: ($Opt) -> $Opt {
'entry(%o: $Opt):
    return %o: $Opt
}

func @is_none: ($Opt) -> bool {
'entry(%o: $Opt):
    branchEnum %o: $Opt case ?none 'yes case ?some 'no
'yes():
    return true: bool
'no(%x: f32):
    return false: bool
}
"""


def test_enum_zero_values_agree() -> None:
    """An enum's zero is its first case without values (else the first whose values
    have zeros): zeroed variables read so in compiled code as in the interpreter."""
    mod = dlc.compile(ZEROS, filename="zeros.dl", opt_level=0)
    graph = dlc.parse(ZEROS, filename="zeros.dl")
    compiled, reference = mod.fresh(), run_function(graph, "fresh", [])
    assert compiled[0] == reference[0] == ("none", ())
    assert compiled[1][0] == reference[1][0] == "one"
    assert compiled[1][1][0] == ("none", ()) and compiled[1][1][1] == 0
    for value in [("some", (np.float32(1.5),)), ("none", ())]:
        assert mod.same(value)[0] == value[0]
        assert bool(mod.is_none(value)) == (value[0] == "none")
        assert bool(run_function(graph, "is_none", [value])) == (value[0] == "none")


def _in_thread(stack_bytes: int, call: Any) -> Any:
    """`call()` on a thread with a stack of `stack_bytes`: its result or its error."""
    import threading

    out: list[Any] = []

    def run() -> None:
        try:
            out.append(call())
        except dlc.TrapError as error:
            out.append(error)

    old = threading.stack_size(stack_bytes)
    try:
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
    finally:
        threading.stack_size(old)
    return out[0]


def test_recursion_depth_is_bounded_by_the_stack() -> None:
    """Native recursion uses the calling thread's stack: past its end the call traps
    (never a crash; the trapped call's boxes are not freed, so a module of its own); a
    thread with a larger stack goes deeper (up to the call depth limit, 20 000)."""
    tree = dlc.compile(TREE, filename="recursive_tree.dl", opt_level=0)
    n = np.int64(19_990)
    small = _in_thread(1 << 20, lambda: tree.deep_score(W, B, np.int64(10_000), X))
    assert isinstance(small, dlc.TrapError) and "stack overflow in @combine" in str(small)
    big = _in_thread(256 << 20, lambda: tree.deep_score(W, B, n, X))
    assert big == pytest.approx(reference_chain(int(n)), rel=1e-12)


def test_python_trees_share_and_cycles_are_refused(tree: Any, graph: Any) -> None:
    """A Python object used twice is one box held twice (8 levels of `(t, t)` are 9
    boxes, not 511); a list that contains itself is refused, leaving no box behind."""
    dag: Any = ("leaf", (X,))
    for _ in range(8):
        dag = ("node", (dag, dag))
    assert tree.score(W, B, dag) == pytest.approx(run_function(graph, "score", [W, B, dag]))
    loop: list[Any] = ["node", None]
    loop[1] = (loop, ("leaf", (X,)))
    with pytest.raises(
        TypeError, match=r"argument 2 \(%tree\) of @score: a \$Tree value that contains itself"
    ):
        tree.score(W, B, loop)
    assert tree.live_boxes() == 0


FOREST = (
    (HERE.parent / "lit" / "parser" / "recursive-types.dl").read_text()
    + """
func @total: ($Forest) -> f32 {
'entry(%f: $Forest):
    branchEnum %f: $Forest case ?grow 'grow case ?empty 'empty
'grow(%n: $Node, %rest: $Forest):
    %x = extract #label from %n: $Node
    %kids = extract #kids from %n: $Node
    %a = apply @total(%kids: $Forest): ($Forest) -> f32
    %b = apply @total(%rest: $Forest): ($Forest) -> f32
    %ab = add %a: f32, %b: f32
    %s = add %x: f32, %ab: f32
    return %s: f32
'empty():
    return 0.0: f32
}
"""
)


def test_recursion_through_a_struct() -> None:
    """`$Node` (a struct) holds `$Forest` (an enum) which holds `$Node`: the enum is
    boxed, the struct is a value holding a box address."""
    mod = dlc.compile(FOREST, filename="forest.dl", opt_level=0)
    graph = dlc.parse(FOREST, filename="forest.dl")
    planted = mod.plant(np.float32(2.5))
    assert planted[0] == "grow" and planted[1][0][1] == ("empty", ())
    node = lambda x, kids: (np.float32(x), kids)  # noqa: E731
    forest = ("grow", (node(1, ("grow", (node(2, ("empty", ())), ("empty", ())))), planted))
    assert mod.total(forest) == run_function(graph, "total", [forest]) == np.float32(5.5)
    assert mod.live_boxes() == 0
