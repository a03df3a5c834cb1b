"""The type checker's contract (CONTRIBUTING.md, "Types everywhere"), checked without
running it: CI runs `mypy dlc` as its own step (.ci/run) because a cold run takes
minutes. Here: the configuration exists and checks all of `dlc/` with no module
exempt (the baseline of modules not yet clean, 82 when mypy came in, is gone), and the
`type: ignore` comments in `dlc/` stay under
their budget, each naming the error it silences.
"""

from __future__ import annotations

import io
import re
import tokenize
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DLC = ROOT / "dlc"

IGNORE_BUDGET = 50  # `type: ignore` comments in dlc/: fewer than this

IGNORE = re.compile(r"#\s*type:\s*ignore(\[[a-z, -]+\])?")


def _mypy_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]


def _exempt(config: dict | None = None) -> list[str]:
    """The modules an override exempts from type errors (`ignore_errors`)."""
    overrides = (config or _mypy_config()).get("overrides", [])
    return [m for o in overrides if o.get("ignore_errors") for m in o["module"]]


def _ignores(source: str) -> list[str]:
    """The `type: ignore` comments of a Python source (comments only, not strings)."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [
        m.group(0) for t in tokens if t.type == tokenize.COMMENT for m in IGNORE.finditer(t.string)
    ]


def _all_ignores() -> dict[str, list[str]]:
    found = {}
    for path in sorted(DLC.rglob("*.py")):
        comments = _ignores(path.read_text())
        if comments:
            found[str(path.relative_to(ROOT))] = comments
    return found


def test_mypy_checks_all_of_dlc_strictly_enough() -> None:
    config = _mypy_config()
    assert config["files"] == ["dlc"]
    for flag in ("warn_unused_ignores", "check_untyped_defs", "disallow_untyped_defs"):
        assert config.get(flag) is True, f"[tool.mypy] {flag} must stay on"
    assert "ignore-without-code" in config.get("enable_error_code", [])
    assert not config.get("ignore_errors"), "mypy must check every module of dlc/"


def test_mypy_is_pinned_and_runs_in_ci_before_pytest() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    test_extra = " ".join(project["optional-dependencies"]["test"])
    assert re.search(r"mypy>=[\d.]+,<[\d.]+", test_extra), "mypy needs a lower and an upper bound"
    pins = (ROOT / "requirements" / "ci.txt").read_text().splitlines()
    assert any(re.fullmatch(r"mypy==[\d.]+", line) for line in pins)
    steps = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert "mypy dlc" in steps and "pytest -rs" in steps
    assert steps.index("mypy dlc") < steps.index("pytest -rs")


def test_no_module_is_exempt_from_mypy() -> None:
    exempt = _exempt()
    assert not exempt, f"a module must pass mypy: fix it, don't exempt it: {exempt}"


def test_the_exemption_reader_finds_ignore_errors_overrides() -> None:
    config = {
        "overrides": [
            {"module": ["a"], "ignore_missing_imports": True},
            {"module": ["b", "c"], "ignore_errors": True},
        ]
    }
    assert _exempt(config) == ["b", "c"]


def test_type_ignores_stay_under_budget_and_name_their_error() -> None:
    found = _all_ignores()
    count = sum(len(c) for c in found.values())
    listing = "\n".join(f"{path}: {len(c)}" for path, c in found.items())
    assert count < IGNORE_BUDGET, (
        f"{count} `type: ignore` in dlc/ (budget < {IGNORE_BUDGET}):\n{listing}"
    )
    bare = [path for path, comments in found.items() if any("[" not in c for c in comments)]
    assert not bare, f"a `type: ignore` without an error code in: {bare}"


def test_the_counter_sees_comments_only() -> None:
    source = 'x = f()  # type: ignore[arg-type]\ny = "# type: ignore"\nz = g()  # type:ignore\n'
    assert _ignores(source) == ["# type: ignore[arg-type]", "# type:ignore"]
