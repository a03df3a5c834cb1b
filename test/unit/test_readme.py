"""The README is a landing page: at most 150 lines, its links lead to files of the
repository, and its Python examples run and print what the README says they print."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PYTHON_GUIDE = ROOT / "docs" / "guide" / "python.md"


def _run(code: str, name: str) -> str:
    """What `code` prints."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, name, "exec"), {})  # our own file, not user input
    return out.getvalue()


def _shown_output(code: str) -> list[str]:
    """The outputs a block shows: the `# ...` comment lines right below each `print(`."""
    shown, lines = [], code.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("print("):
            comments = []
            for following in lines[i + 1 :]:
                if not following.startswith("# "):
                    break
                comments.append(following[2:])
            if comments:
                shown.append("\n".join(comments))
    return shown


def test_readme_is_a_landing_page() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move reference material to docs/"
    assert lines[:4] == [
        "```",
        "pip install . && dlc-run examples/mlp.dl --entry mlp --random-inputs --seed 0 --time",
        "pip install '.[test]' && pytest",
        "```",
    ]


def test_readme_links_lead_to_files() -> None:
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text()):
        if not re.match(r"https?://", target):
            assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"


def test_readme_python_examples_print_what_they_show() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 2  # a DLVM program and an ONNX model
    for code in blocks:
        printed = _run(code, "README.md")
        shown = _shown_output(code)
        assert shown
        for output in shown:
            assert output in printed, (
                f"README.md shows\n{output}\nbut the example prints\n{printed}"
            )


def test_shown_output_reads_the_comments_below_a_print() -> None:
    code = "x = 1\nprint(x)\n# 1\n# 2\ny = 2  # not output\nprint(y)\n"
    assert _shown_output(code) == ["1\n2"]


def test_python_guide_loop_level_listing() -> None:
    """The Python guide's listing of the loop level is what its example prints."""
    text = PYTHON_GUIDE.read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S)
    listing = re.search(r"```mlir\n(.*?)```", text, re.S)
    assert code is not None and listing is not None
    printed = _run(code.group(1), "docs/guide/python.md")
    assert printed.startswith("[[ 2.  0.  6.]\n [ 0. 10.  0.]]\n")  # as the guide's comment says
    assert listing.group(1) in printed
