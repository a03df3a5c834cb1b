"""Parameters bound to arrays at compile time (`dlc.compile(..., constants=)`,
`dlc-run --constant`): results, signatures, the cache, folding, and every error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dlc
from dlc.cli.dlc_run import main as dlc_run
from dlc.diagnostics import DiagnosticError
from dlc.parser import parse_module
from dlc.semantics.interpreter import run_function

AFFINE = """module "affine"
stage raw

func @affine: (<3 x 4 x f32>, <4 x 5 x f32>, <1 x 5 x f32>) -> <3 x 5 x f32> {
'entry(%x: <3 x 4 x f32>, %w: <4 x 5 x f32>, %b: <1 x 5 x f32>):
    %y = dot %x: <3 x 4 x f32>, %w: <4 x 5 x f32>
    %z = add %y: <3 x 5 x f32>, %b: <1 x 5 x f32>
    return %z: <3 x 5 x f32>
}
"""

CALLED = """module "called"
stage raw

func @inner: (<2 x f32>, <2 x f32>) -> <2 x f32> {
'entry(%a: <2 x f32>, %b: <2 x f32>):
    %c = add %a: <2 x f32>, %b: <2 x f32>
    return %c: <2 x f32>
}

func @outer: (<2 x f32>) -> <2 x f32> {
'entry(%x: <2 x f32>):
    %y = apply @inner(%x: <2 x f32>, %x: <2 x f32>): (<2 x f32>, <2 x f32>) -> <2 x f32>
    return %y: <2 x f32>
}
"""

ADJOINT = """module "adj"
stage raw

func @f: (<2 x f32>, <2 x f32>) -> f32 {
'entry(%x: <2 x f32>, %w: <2 x f32>):
    %y = multiply %x: <2 x f32>, %w: <2 x f32>
    %s = reduce %y: <2 x f32> by add init 0.0: f32 along 0
    return %s: f32
}

[adjoint @f wrt 0]
func @g: (<2 x f32>, <2 x f32>) -> (<2 x f32>)
"""


def arrays(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((3, 4)).astype(np.float32),
        rng.standard_normal((4, 5)).astype(np.float32),
        rng.standard_normal((1, 5)).astype(np.float32),
    )


@pytest.mark.parametrize("opt_level", [0, 2, 3])
def test_bound_parameters_leave_the_signature_and_keep_the_results(opt_level: int) -> None:
    x, w, b = arrays()
    compiled = dlc.compile(AFFINE, opt_level=opt_level, constants={"affine": {"w": w, "b": b}})
    assert list(compiled["affine"].signature.params) == ["x"]
    want = run_function(parse_module(AFFINE), "affine", [x, w, b])
    got = compiled.affine(x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    if opt_level == 0:  # binding changes no arithmetic
        np.testing.assert_array_equal(got, dlc.compile(AFFINE, opt_level=0).affine(x, w, b))
    with pytest.raises(TypeError, match="expects 1 argument|argument"):
        compiled.affine(x, w, b)


def test_each_binding_compiles_its_own_program() -> None:
    """The compile cache keys on the bound arrays' bytes: other weights, other code."""
    x, w, b = arrays()
    first = dlc.compile(AFFINE, constants={"affine": {"w": w, "b": b}})
    second = dlc.compile(AFFINE, constants={"affine": {"w": 2 * w, "b": b}})
    again = dlc.compile(AFFINE, constants={"affine": {"w": w, "b": b}})
    np.testing.assert_allclose(second.affine(x) - b, 2 * (first.affine(x) - b), rtol=1e-5)
    np.testing.assert_array_equal(again.affine(x), first.affine(x))
    # the text alone compiles the unbound function, not a bound one from the cache
    assert list(dlc.compile(AFFINE)["affine"].signature.params) == ["x", "w", "b"]


def test_what_depends_on_bound_parameters_alone_is_folded() -> None:
    text = AFFINE.replace(
        "%y = dot %x: <3 x 4 x f32>, %w: <4 x 5 x f32>",
        "%w2 = multiply %w: <4 x 5 x f32>, 2.0: f32\n    %y = dot %x: <3 x 4 x f32>, %w2: <4 x 5 x f32>",
    )
    x, w, b = arrays()
    compiled = dlc.compile(text, constants={"affine": {"w": w, "b": b}})
    assert compiled.pass_statistics()["fold-constants"]["ops folded"] >= 1
    assert "multiply" not in compiled.ir("graph")
    np.testing.assert_allclose(compiled.affine(x), x @ (2 * w) + b, rtol=1e-5, atol=1e-6)


def check_error(text: str, constants: object, message: str, line: int) -> None:
    with pytest.raises(DiagnosticError) as err:
        dlc.compile(text, filename="m.dl", constants=constants)  # type: ignore[arg-type]
    assert err.value.message == message
    assert (err.value.filename, err.value.line) == ("m.dl", line)
    assert str(err.value).startswith(f"m.dl:{line}:")


def test_unknown_function_or_parameter_is_located() -> None:
    _, w, _ = arrays()
    check_error(
        AFFINE,
        {"afine": {"w": w}},
        "constants: the program defines no function @afine (it defines @affine)",
        4,
    )
    check_error(
        AFFINE,
        {"affine": {"v": w}},
        "constants: @affine has no parameter %v (its parameters: %x, %w, %b)",
        4,
    )


def test_arrays_must_have_the_parameters_type() -> None:
    _, w, _ = arrays()
    check_error(
        AFFINE,
        {"affine": {"w": w.astype(np.float64)}},
        "constants: parameter %w of @affine is <4 x 5 x f32>, got float64 array of shape (4, 5)",
        4,
    )
    check_error(
        AFFINE,
        {"affine": {"w": w.T.copy()}},
        "constants: parameter %w of @affine is <4 x 5 x f32>, got float32 array of shape (5, 4)",
        4,
    )
    check_error(
        AFFINE,
        {"affine": {"w": [[1.0] * 5] * 4}},
        "constants: parameter %w of @affine is <4 x 5 x f32>, got list",
        4,
    )


def test_only_tensor_parameters_can_be_bound() -> None:
    text = """module "t"
stage raw

func @f: ((f32, f32), f32) -> f32 {
'entry(%t: (f32, f32), %y: f32):
    %a = extract 0 from %t: (f32, f32)
    %b = add %a: f32, %y: f32
    return %b: f32
}
"""
    check_error(
        text,
        {"f": {"t": np.zeros(2, np.float32)}},
        "constants: parameter %t of type (f32, f32) cannot be bound",
        4,
    )


def test_called_and_differentiated_functions_keep_their_parameters() -> None:
    two = np.ones(2, np.float32)
    check_error(
        CALLED,
        {"inner": {"b": two}},
        "constants: @inner keeps its parameters because @outer calls it",
        4,
    )
    check_error(
        ADJOINT,
        {"f": {"w": two}},
        "constants: @f keeps its parameters because @g differentiates it",
        4,
    )
    # the caller's own parameters can be bound
    outer = dlc.compile(CALLED, constants={"outer": {"x": two}})
    np.testing.assert_array_equal(outer.outer(), 2 * two)


def test_malformed_constants_are_type_errors() -> None:
    with pytest.raises(TypeError, match="constants: expected a mapping, got list"):
        dlc.compile(AFFINE, constants=[1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"constants\['affine'\]: expected a mapping"):
        dlc.compile(AFFINE, constants={"affine": 3})  # type: ignore[dict-item]


def test_dlc_run_binds_constants(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    x, w, b = arrays()
    source = tmp_path / "affine.dl"
    source.write_text(AFFINE)
    for name, value in (("x", x), ("w", w), ("b", b)):
        np.save(tmp_path / f"{name}.npy", value)
    files = {n: str(tmp_path / f"{n}.npy") for n in "xwb"}
    code = dlc_run(
        [str(source), "-c", f"w={files['w']}", "--constant", f"%b={files['b']}",
         "-i", f"x={files['x']}", "-O", "3"]
    )  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    bound = dlc.compile(AFFINE, opt_level=3, constants={"affine": {"w": w, "b": b}})
    assert repr(bound.affine(x)) in out
    # the bound parameters are no longer inputs
    code = dlc_run([str(source), "-c", f"w={files['w']}", "-i", f"w={files['w']}"])
    assert code == 1
    assert "--input w: no such parameter (parameters: %x, %b)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("w", "dlc-run: error: --constant expects NAME=PATH.npy, got 'w'"),
        ("w=missing.npy", "dlc-run: error: --constant w: cannot load 'missing.npy'"),
        ("v=W", "m.dl:4:6: error: constants: @affine has no parameter %v"),
    ],
)
def test_dlc_run_constant_errors(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    option: str,
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("m.dl").write_text(AFFINE)
    np.save("w.npy", arrays()[1])
    assert dlc_run(["m.dl", "-c", option.replace("=W", "=w.npy"), "--random-inputs"]) == 1
    assert message in capsys.readouterr().err


def test_dlc_run_refuses_a_constant_given_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    np.save(tmp_path / "w.npy", arrays()[1])
    source = tmp_path / "m.dl"
    source.write_text(AFFINE)
    spec = f"w={tmp_path / 'w.npy'}"
    assert dlc_run([str(source), "-c", spec, "-c", spec, "--random-inputs"]) == 1
    assert "--constant w: given twice" in capsys.readouterr().err
