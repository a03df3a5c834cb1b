"""The README's worked Python example runs and prints what the README says it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_example() -> None:
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert code is not None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), "README.md", "exec"), {})  # our own file, not user input
    printed = out.getvalue()
    assert printed.startswith("[[ 2.  0.  6.]\n [ 0. 10.  0.]]\n")  # as the README's comment says
    assert "loop.func" in printed  # mod.ir("loop")
