"""The README's worked Python example runs and prints what the README says it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def _run_example() -> str:
    """What the README's Python example prints."""
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert code is not None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), "README.md", "exec"), {})  # our own file, not user input
    return out.getvalue()


def test_readme_python_example() -> None:
    printed = _run_example()
    assert printed.startswith("[[ 2.  0.  6.]\n [ 0. 10.  0.]]\n")  # as the README's comment says
    assert "loop.func" in printed  # mod.ir("loop")


def test_readme_loop_level_listing() -> None:
    """The README's listing of the loop level is what its example prints."""
    listing = re.search(r"```mlir\n(.*?)```", README.read_text(), re.S)
    assert listing is not None
    assert listing.group(1) in _run_example()
