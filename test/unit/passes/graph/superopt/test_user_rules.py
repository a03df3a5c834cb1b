"""User rewrite rules in DLVM: `dlc-prove` proves, refutes (with a counterexample the
interpreter confirms) or leaves them unknown; the superoptimizer applies proven ones only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("z3")

import dlc  # noqa: E402
from dlc.cli import dlc_prove  # noqa: E402
from dlc.passes.graph import superoptimize  # noqa: E402
from dlc.passes.graph.superopt import user_rules  # noqa: E402
from dlc.semantics.interpreter import run_function  # noqa: E402

M, K, N = "<2 x 3 x f32>", "<3 x 5 x f32>", "<2 x 5 x f32>"


def _func(name: str, params: str, result: str, body: str) -> str:
    return f"func @{name}: ({', '.join(t for _, t in _params(params))}) -> {result} {{\n'entry({params}):\n{body}}}\n"


def _params(text: str) -> list[tuple[str, str]]:
    return [tuple(p.split(": ")) for p in text.split(", ")]  # type: ignore[misc]


HEAD = 'module "rules"\nstage raw\n\n'
XYZ = f"%x: {M}, %y: {K}, %z: {K}"
FACTOR = _func(
    "factor_lhs",
    XYZ,
    N,
    f"    %0.0 = dot %x: {M}, %y: {K}\n    %0.1 = dot %x: {M}, %z: {K}\n"
    f"    %0.2 = add %0.0: {N}, %0.1: {N}\n    return %0.2: {N}\n",
) + _func(
    "factor_rhs",
    XYZ,
    N,
    f"    %0.0 = add %y: {K}, %z: {K}\n    %0.1 = dot %x: {M}, %0.0: {K}\n    return %0.1: {N}\n",
)
TRANSPOSE = _func(
    "transpose_product_lhs",
    f"%x: {M}, %y: {K}",
    "<5 x 2 x f32>",
    f"    %0.0 = dot %x: {M}, %y: {K}\n    %0.1 = transpose %0.0: {N}\n"
    "    return %0.1: <5 x 2 x f32>\n",
) + _func(
    "transpose_product_rhs",
    f"%x: {M}, %y: {K}",
    "<5 x 2 x f32>",
    "    %0.0 = transpose %y: <3 x 5 x f32>\n    %0.1 = transpose %x: <2 x 3 x f32>\n"
    "    %0.2 = dot %0.0: <5 x 3 x f32>, %0.1: <3 x 2 x f32>\n    return %0.2: <5 x 2 x f32>\n",
)
DROP = _func(  # false: drops a product (cheaper, so a search would love it)
    "drop_lhs",
    XYZ,
    N,
    f"    %0.0 = dot %x: {M}, %y: {K}\n    %0.1 = dot %x: {M}, %z: {K}\n"
    f"    %0.2 = add %0.0: {N}, %0.1: {N}\n    return %0.2: {N}\n",
) + _func("drop_rhs", XYZ, N, f"    %0.0 = dot %x: {M}, %y: {K}\n    return %0.0: {N}\n")


def _write(tmp_path: Path, text: str, name: str = "rules.dl") -> Path:
    path = tmp_path / name
    path.write_text(HEAD + text)
    return path


def _verdicts(text: str) -> dict[str, user_rules.Verdict]:
    module = dlc.parse(HEAD + text, "rules.dl")
    return {r.name: user_rules.check(r, module) for r in user_rules.read_rules(module, "rules.dl")}


def test_true_rules_are_proven() -> None:
    verdicts = _verdicts(FACTOR + TRANSPOSE)
    assert {k: v.status for k, v in verdicts.items()} == {
        "factor": "proven",
        "transpose_product": "proven",
    }


def test_a_false_rule_is_refuted_by_inputs_on_which_it_differs() -> None:
    module = dlc.parse(HEAD + DROP, "rules.dl")
    (rule,) = user_rules.read_rules(module, "rules.dl")
    args = user_rules.counterexample(rule, module)
    assert args is not None
    left = run_function(module, "drop_lhs", args)
    right = run_function(module, "drop_rhs", args)
    assert not np.allclose(left, right)
    verdict = user_rules.check(rule, module)
    assert verdict.status == "refuted"
    assert verdict.counterexample.startswith("%x = [[")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            FACTOR.replace("@factor_rhs", "@factor_other"),
            "rules.dl:4:6: error: @factor_lhs has no @factor_rhs",
        ),
        (
            FACTOR.replace("@factor_lhs", "@factor_left"),
            "@factor_left: rule functions are named @NAME_lhs and @NAME_rhs",
        ),
        (
            FACTOR.split("func @factor_rhs")[0]
            + _func(
                "factor_rhs",
                f"%x: {M}, %y: {K}",
                N,
                f"    %0.0 = dot %x: {M}, %y: {K}\n    return %0.0: {N}\n",
            ),
            "@factor_rhs has type",
        ),
        (
            _func("e_lhs", f"%x: {M}", M, f"    %0.0 = exp %x: {M}\n    return %0.0: {M}\n")
            + _func("e_rhs", f"%x: {M}", M, f"    return %x: {M}\n"),
            "rules.dl:6:12: error: 'exp' is not in the rule language",
        ),
        (
            _func(
                "sq_lhs",
                "%x: <3 x 3 x f32>",
                "<3 x 3 x f32>",
                "    %0.0 = transpose %x: <3 x 3 x f32>\n    return %0.0: <3 x 3 x f32>\n",
            )
            + _func(
                "sq_rhs", "%x: <3 x 3 x f32>", "<3 x 3 x f32>", "    return %x: <3 x 3 x f32>\n"
            ),
            None,  # a square transpose is well-typed: refuted, not an error
        ),
        (
            _func("v_lhs", "%x: <3 x f32>", "<3 x f32>", "    return %x: <3 x f32>\n")
            + _func("v_rhs", "%x: <3 x f32>", "<3 x f32>", "    return %x: <3 x f32>\n"),
            "parameter %x of type <3 x f32>: rule inputs are scalars, matrices or rank-4 tensors",
        ),
        ("", "rules.dl:1:1: error: the file defines no rule (@NAME_lhs and @NAME_rhs)"),
    ],
)
def test_malformed_rule_files_are_located_errors(text: str, expected: str | None) -> None:
    module = dlc.parse(HEAD + text, "rules.dl")
    if expected is None:
        (rule,) = user_rules.read_rules(module, "rules.dl")
        assert user_rules.check(rule, module).status == "refuted"
        return
    with pytest.raises(dlc.DiagnosticError) as info:
        user_rules.read_rules(module, "rules.dl")
    assert expected in info.value.format()


def test_dlc_prove_reports_each_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert dlc_prove.main([str(_write(tmp_path, FACTOR + TRANSPOSE))]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "factor: proven",
        "transpose_product: proven",
    ]
    assert dlc_prove.main([str(_write(tmp_path, FACTOR + DROP, "mixed.dl"))]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "factor: proven"
    assert lines[1].startswith("drop: refuted: %x = ")


def test_dlc_prove_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert dlc_prove.main([str(tmp_path / "missing.dl")]) == 1
    assert "dlc-prove: error: cannot read" in capsys.readouterr().err
    bad = _write(tmp_path, "func @f_lhs: (f32) -> f32 {\n", "bad.dl")
    assert dlc_prove.main([str(bad)]) == 1
    assert f"{bad}:" in capsys.readouterr().err


PROGRAM = f"""module "m"
stage raw

func @f: ({M}, {K}, {K}) -> {N} {{
'entry(%x: {M}, %y: {K}, %z: {K}):
    %0.0 = dot %x: {M}, %y: {K}
    %0.1 = dot %x: {M}, %z: {K}
    %0.2 = add %0.0: {N}, %0.1: {N}
    return %0.2: {N}
}}
"""


def test_the_superoptimizer_applies_proven_user_rules_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(superoptimize, "shipped", lambda: ())  # user rules alone
    path = str(_write(tmp_path, DROP + FACTOR))
    module = dlc.parse(PROGRAM, "m.dl")
    pass_ = superoptimize.SuperoptimizePass(rules=path, budget=5.0)
    pass_.apply(None, module)  # type: ignore[arg-type]
    stats = pass_.take_statistics()
    assert stats["user rules proven"] == 1
    assert stats["user rules not proven"] == 1
    assert "fired user.drop" not in stats and "fired user.drop'" not in stats
    assert stats.get("fired user.factor", 0) + stats.get("fired user.factor'", 0) >= 1

    compiled = dlc.compile(PROGRAM, opt_level=3, rules=path)
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((2, 3), (3, 5), (3, 5))]
    want = run_function(dlc.parse(PROGRAM, "m.dl"), "f", args)
    np.testing.assert_allclose(compiled.f(*args), want, rtol=1e-5, atol=1e-5)


def test_rules_option_is_checked() -> None:
    with pytest.raises(TypeError, match="rules must be None or a path, got int"):
        dlc.compile(PROGRAM, opt_level=3, rules=3)
