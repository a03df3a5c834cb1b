"""The tree passes the project's linters (ruff check and ruff format, as `make lint`)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ["dlc", "tools", "test"]


def _ruff() -> list[str]:
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed (it comes with the test extra)")
    return [sys.executable, "-m", "ruff"]


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]])
def test_ruff(command: list[str]) -> None:
    result = subprocess.run(
        [*_ruff(), *command, *TARGETS], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
