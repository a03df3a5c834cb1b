"""The documentation site: it builds with warnings as errors, every op, pass option and
command-line flag is documented, and every runnable page's code runs and prints what
the page says.

A runnable page (docs/getting-started.md, docs/tutorials/*.md) is run top to bottom in
a fresh directory: a fenced block right after `<!-- file: NAME -->` is written to NAME;
a ```python block is executed (all blocks of a page share one namespace); a ```console
block right after `<!-- run -->` runs each `$ command` line with bash and checks that
the lines under it are in the command's output.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT / "tools"))

import gen_docs  # noqa: E402 -- after the path set-up

RUNNABLE = [
    DOCS / "getting-started.md",
    *sorted(p for p in (DOCS / "tutorials").glob("*.md") if p.name != "index.md"),
]
FENCE = re.compile(
    r"(?:^<!-- (?P<marker>file: \S+|run) -->\n)?^```(?P<lang>\w*)\n(?P<body>.*?)^```$",
    re.M | re.S,
)


def blocks(text: str) -> list[tuple[str, str, str]]:
    """(marker, language, body) of every fenced block of a page, in order."""
    return [(m["marker"] or "", m["lang"], m["body"]) for m in FENCE.finditer(text)]


def run_console(body: str, cwd: Path, env: dict[str, str], page: str) -> None:
    """Run each `$ command` of a console block; the lines below it must be in its output."""
    steps: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif line.strip() and steps:
            steps[-1][1].append(line.strip())
    for command, expected in steps:
        done = subprocess.run(
            ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
        )
        out = done.stdout + done.stderr
        assert done.returncode == 0, f"{page}: `{command}` failed:\n{out}"
        for line in expected:
            assert line in out, f"{page}: `{command}` did not print {line!r}:\n{out}"


def run_page(page: Path, cwd: Path) -> None:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(cwd), env.get("PYTHONPATH", "")])
    namespace: dict[str, object] = {"__name__": "__tutorial__"}
    sys.path.insert(0, str(cwd))
    here = Path.cwd()
    os.chdir(cwd)
    try:
        for marker, lang, body in blocks(page.read_text()):
            if marker.startswith("file: "):
                target = cwd / marker[len("file: ") :]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(body)
            elif marker == "run":
                assert lang == "console", f"{page.name}: <!-- run --> needs a console block"
                run_console(body, cwd, env, page.name)
            elif lang == "python":
                with contextlib.redirect_stdout(io.StringIO()):
                    exec(compile(body, str(page), "exec"), namespace)  # our own page
    finally:
        os.chdir(here)
        sys.path.remove(str(cwd))


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: p.name)
def test_runnable_page(page: Path, tmp_path: Path) -> None:
    """Each page runs in a process of its own: what a tutorial registers (a converter,
    a pass) must not leak into the tests that run after it in this worker."""
    assert any(lang == "python" or marker for marker, lang, _ in blocks(page.read_text()))
    here = Path(__file__).parent
    code = f"import sys; sys.path.insert(0, {str(here)!r}); import test_docs, pathlib; "
    code += f"test_docs.run_page(pathlib.Path({str(page)!r}), pathlib.Path({str(tmp_path)!r}))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-5000:]


def test_blocks_reads_markers_and_languages() -> None:
    text = "<!-- file: a.dl -->\n```\nx\n```\n\n```python\nprint(1)\n```\n<!-- run -->\n```console\n$ true\n```\n"
    assert blocks(text) == [
        ("file: a.dl", "", "x\n"),
        ("", "python", "print(1)\n"),
        ("run", "console", "$ true\n"),
    ]


def test_a_console_block_checks_the_output(tmp_path: Path) -> None:
    env = dict(os.environ)
    run_console("$ echo hello world\nhello\n", tmp_path, env, "page")
    with pytest.raises(AssertionError, match="did not print"):
        run_console("$ echo hello\ngoodbye\n", tmp_path, env, "page")
    with pytest.raises(AssertionError, match="failed"):
        run_console("$ false\n", tmp_path, env, "page")


def test_every_op_pass_option_and_flag_is_documented() -> None:
    assert gen_docs.undocumented() == []


def test_the_documentation_check_finds_an_undocumented_pass_option(monkeypatch) -> None:
    from dlc.passes.graph.fold_constants import FoldConstantsPass

    monkeypatch.setattr(FoldConstantsPass, "__doc__", "Folds constants.")
    assert gen_docs.undocumented_passes() == [
        "pass fold-constants: option max_elements is not named in FoldConstantsPass's docstring"
    ]


def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    for page in ("reference/passes/index.html", "reference/cli/dlc-opt/index.html"):
        assert (tmp_path / page).is_file()
