"""dlc-bisect and `dlc.bisector`: a planted wrong kernel is found by name, correct
programs report nothing, the error measures, and every user error is a diagnostic."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx_models import make, node

import dlc
from dlc.bisector import bisect, errors
from dlc.cli import dlc_bisect
from dlc.passes.tensor.schedule_miscompile import MISCOMPILE_VARIABLE

CHAIN = """module "chain"
stage raw

func @chain: (<32 x 48 x f32>, <48 x 64 x f32>, <1 x 64 x f32>, <64 x 16 x f32>) -> <32 x 16 x f32> {
'entry(%x: <32 x 48 x f32>, %w: <48 x 64 x f32>, %b: <1 x 64 x f32>, %v: <64 x 16 x f32>):
    %xw = dot %x: <32 x 48 x f32>, %w: <48 x 64 x f32>
    %z = add %xw: <32 x 64 x f32>, %b: <1 x 64 x f32>
    %h = tanh %z: <32 x 64 x f32>
    %y = dot %h: <32 x 64 x f32>, %v: <64 x 16 x f32>
    %s = multiply %y: <32 x 16 x f32>, 0.5: f32
    return %s: <32 x 16 x f32>
}
"""

BRANCHES = """module "b"
stage raw

func @pick: (bool, <4 x f32>) -> <4 x f32> {
'entry(%c: bool, %x: <4 x f32>):
    conditional %c: bool then 'yes() else 'no()
'yes():
    return %x: <4 x f32>
'no():
    %y = negate %x: <4 x f32>
    return %y: <4 x f32>
}
"""


def _bisect(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = dlc_bisect.main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    path = tmp_path / "chain.dl"
    path.write_text(CHAIN)
    return path


def test_a_correct_program_reports_nothing(chain: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _bisect([str(chain)], capsys)
    assert (code, err) == (0, "")
    assert re.match(r"@chain at -O2, seed 0: [1-9]\d* values of [1-9]\d* kernels checked\n", out)
    assert "no kernel exceeds the tolerance (64 ULPs and relative error 0.0001)" in out


def test_a_planted_wrong_nest_is_found_by_name(
    chain: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MISCOMPILE_VARIABLE, "chain.dl:9")  # %y = dot, fused with %s
    code, out, err = _bisect([str(chain)], capsys)
    assert (code, err) == (dlc_bisect.FOUND, "")
    lines = out.splitlines()
    assert lines[1].startswith("first kernel over the tolerance (64 ULPs and relative error")
    # %y is checked through its own value, or through %s when the host's schedule
    # fuses it into %s's group; either way the kernel lists the planted nest by line.
    value = next(line for line in lines if line.startswith("  value:"))
    assert value.endswith((f"%y = dot at {chain}:9:10", f"%s = multiply at {chain}:10:10"))
    assert f"%y = dot at {chain}:9:10: #schedule.nest<" in out
    at_opt0 = next(line for line in lines if "at -O0:" in line)
    assert "within tolerance: the optimizations of -O2" in at_opt0
    assert "still over the tolerance" in next(line for line in lines if "fma off:" in line)


def test_an_early_fault_is_reported_before_what_it_spoils(
    chain: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MISCOMPILE_VARIABLE, "chain.dl:6")  # %xw = dot: every later value is off
    module = dlc.parse(CHAIN, str(chain))
    rng = np.random.default_rng(1)
    shapes = [(32, 48), (48, 64), (1, 64), (64, 16)]
    result = bisect(module, "chain", [rng.standard_normal(s).astype(np.float32) for s in shapes])
    assert result.first_bad is not None
    assert [c.value for c in result.checks if c.bad][0] == result.first_bad.value
    assert any(name == "%xw = dot" for name, _, _ in result.first_bad.kernel.members)
    assert sum(c.bad for c in result.checks) > 1


def test_the_planted_fault_is_never_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    program = CHAIN.replace("chain", "cached")
    monkeypatch.setenv(MISCOMPILE_VARIABLE, "<string>:9")
    args = [np.ones((32, 48), np.float32) / 8, np.ones((48, 64), np.float32) / 8]
    args += [np.zeros((1, 64), np.float32), np.ones((64, 16), np.float32)]
    wrong = dlc.compile(program).cached(*args)
    monkeypatch.delenv(MISCOMPILE_VARIABLE)
    right = dlc.compile(program).cached(*args)
    expected = 0.5 * np.tanh(np.full((32, 64), 0.75, np.float32)).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(right, np.broadcast_to(expected, (32, 16)), rtol=1e-5)
    assert not np.allclose(wrong, right, rtol=1e-3)


def test_an_onnx_model_by_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32)
    nodes = [node("MatMul", ["x", "w"], ["xw"]), node("Relu", ["xw"], ["r"])]
    path = tmp_path / "model.bin"
    onnx.save(make(nodes, {"x": [8, 16]}, {"r": [8, 4]}, {"w": w}), str(path))
    code, out, _ = _bisect([str(path), "--onnx", "--seed", "3"], capsys)
    assert code == 0 and "@g at -O2, seed 3" in out and "no kernel exceeds" in out
    code, _, err = _bisect([str(path)], capsys)  # without --onnx: DLVM text
    assert code == 1 and err.startswith(f"{path}:1:")


def test_inputs_from_files(chain: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Given every input, the random seed changes nothing but the header."""
    shapes = {"x": (32, 48), "w": (48, 64), "b": (1, 64), "v": (64, 16)}
    for name, shape in shapes.items():
        np.save(tmp_path / f"{name}.npy", np.full(shape, 0.25, np.float32))
    given = [f"--input={name}={tmp_path / name}.npy" for name in shapes]
    outs = [_bisect([str(chain), *given, "--seed", seed], capsys) for seed in ("0", "5")]
    assert [code for code, _, _ in outs] == [0, 0]
    assert outs[0][1].splitlines()[1:] == outs[1][1].splitlines()[1:]
    # `v` not given: drawn at random, and the run completes (its report may equal the
    # given one's where every kernel is exact, as on AVX2 hosts)
    assert _bisect([str(chain), *given[:3]], capsys)[0] == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.dl"], "missing.dl: error: cannot read 'missing.dl': no such file"),
        (
            ["CHAIN", "--entry", "g"],
            "CHAIN: error: no function @g is defined (defined functions: @chain)",
        ),
        (["CHAIN", "--input", "q=x.npy"], "CHAIN: error: --input q: no such parameter"),
        (["CHAIN", "--input", "x"], "CHAIN: error: --input expects NAME=PATH.npy, got 'x'"),
        (
            ["CHAIN", "--input", "x=BAD"],
            "CHAIN: error: --input x: expected <32 x 48 x f32>, got float64 array of shape (2, 2)",
        ),
        (["CHAIN", "--input", "x=NONE"], "CHAIN: error: --input x: cannot load"),
        (
            ["CHAIN", "--input-shape", "x=2"],
            "CHAIN: error: --input-shape applies to ONNX models only",
        ),
        (["CHAIN", "--rtol", "-1"], "dlc-bisect: error: --rtol must be a number >= 0, got -1.0"),
        (["CHAIN", "--ulps", "nan"], "dlc-bisect: error: --ulps must be a number >= 0, got nan"),
        (["CHAIN", "-O", "7"], "dlc-bisect: error: argument --opt-level/-O: invalid choice: 7"),
        (["BRANCHES"], "error: dlc-bisect checks straight-line functions; @pick has 3 blocks"),
        (["TWO"], "error: choose a function with --entry (defined functions: @chain, @pick)"),
    ],
)
def test_user_errors(
    args: list[str], message: str, chain: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "branches.dl").write_text(BRANCHES)
    (tmp_path / "two.dl").write_text(CHAIN + BRANCHES.split("stage raw\n", 1)[1])
    np.save(tmp_path / "bad.npy", np.zeros((2, 2)))
    names = {"CHAIN": str(chain), "BRANCHES": str(tmp_path / "branches.dl")}
    names |= {"TWO": str(tmp_path / "two.dl"), "x=BAD": f"x={tmp_path / 'bad.npy'}"}
    names["x=NONE"] = f"x={tmp_path / 'none.npy'}"
    args = [names.get(a, a) for a in args]
    message = message.replace("CHAIN", str(chain))
    code, out, err = _bisect(args, capsys)
    assert code == 1 and out == ""
    assert message in err and "Traceback" not in err


def test_the_branching_function_error_is_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "b.dl").write_text(BRANCHES)
    _, _, err = _bisect([str(tmp_path / "b.dl")], capsys)
    assert err.startswith(f"{tmp_path / 'b.dl'}:4:6: error: dlc-bisect checks straight-line")


def test_errors_in_ulps_and_relative_error() -> None:
    one = np.float32(1.0)
    assert errors(np.array([one]), np.array([np.nextafter(one, np.float32(2))])) == (
        1.0,
        pytest.approx(2**-23),
    )
    assert errors(np.array([-0.0]), np.array([0.0])) == (0.0, 0.0)
    assert errors(np.array([np.float32(-1e-45)]), np.array([np.float32(1e-45)]))[0] == 2.0
    assert errors(np.array([np.nan]), np.array([1.0])) == (float("inf"), float("inf"))
    assert errors(np.array([np.nan]), np.array([np.nan])) == (0.0, 0.0)
    assert errors(np.array([3, 5]), np.array([3, 7])) == (2.0, 2 / 7)
    assert errors(np.zeros(2), np.zeros(3))[0] == float("inf")
