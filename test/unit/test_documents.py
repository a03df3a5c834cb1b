"""The repository is self-contained: the documents it names are in it, and no source
comment points at a file outside it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

NAMING_FILES = [
    "README.md",
    "CHANGELOG.md",
    "Makefile",
    *(str(p.relative_to(ROOT)) for p in sorted((ROOT / "tools").glob("*.py"))),
    *(str(p.relative_to(ROOT)) for p in sorted((ROOT / "examples").glob("*.dl"))),
]


@pytest.mark.parametrize("name", NAMING_FILES)
def test_named_documents_are_in_the_repository(name: str) -> None:
    text = (ROOT / name).read_text()
    for document in set(re.findall(r"(?<![\w/.])([A-Z][A-Z_]*\.md)\b", text)):
        assert (ROOT / document).is_file(), (
            f"{name} names {document}, which is not in the repository"
        )


def test_benchmarks_md_defines_the_workloads_bench_py_runs() -> None:
    benchmarks = (ROOT / "BENCHMARKS.md").read_text()
    bench = (ROOT / "tools" / "bench.py").read_text()
    for workload in sorted(set(re.findall(r'"(W\d)"', bench))):
        assert f"| {workload} |" in benchmarks


def test_no_source_cites_a_path_outside_the_repository() -> None:
    for path in [*(ROOT / "dlc").rglob("*.py"), *(ROOT / "tools").rglob("*.py")]:
        text = path.read_text()
        assert "/work/" not in text, f"{path.relative_to(ROOT)} cites a path outside the repository"


# Team notes that lived outside the repository. Spelled in pieces so that this file does
# not name them itself.
OUTSIDE_DOCUMENTS = re.compile(
    r"\b(?:"
    + "|".join(("DES" + "IGN", "DL" + "VM", "ST" + "YLE"))
    + r")\.md\b"
    + r"|(?<![\w/-])(?:\.\./)?"
    + "sha"
    + r"red/"
)
SKIPPED_DIRECTORIES = {"site", "site-generated", "build", "dist", "__pycache__", "Output"}
"""Directories of build output, never part of the repository."""


def _repository_files() -> list[Path]:
    files = []
    for directory, subdirectories, names in os.walk(ROOT):
        subdirectories[:] = [
            d
            for d in subdirectories
            if not d.startswith(".")
            and d not in SKIPPED_DIRECTORIES
            and not d.endswith(".egg-info")
        ]
        files += [Path(directory) / n for n in names]
    return files


def test_no_file_refers_to_documents_outside_the_repository() -> None:
    offenders = []
    for path in _repository_files():
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):  # binary files (PNG, object code) name nothing
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE_DOCUMENTS.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "references to documents outside the repository:\n" + "\n".join(offenders)


def test_the_reference_pattern_finds_what_it_is_for() -> None:
    design, dlvm, style, shared = "DES" + "IGN.md", "DL" + "VM.md", "ST" + "YLE.md", "sha" + "red/"
    meant = [f"see {dlvm} §1.2", f"({shared}{design})", f"../{shared}notes", f"{style} budgets"]
    innocent = ["written in the design document", "/srv/cache/dlc", "DLVM's verifier", "unshared/x"]
    assert [line for line in meant + innocent if OUTSIDE_DOCUMENTS.search(line)] == meant


def test_changelog_is_one_line_per_change() -> None:
    """Keep a Changelog form: an [Unreleased] section first, the standard groups, and
    every entry one line (longer accounts belong in docs/ or the commit message)."""
    text = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## (.*)$", text, re.M)
    assert releases[0] == "[Unreleased]"
    groups = set(re.findall(r"^### (.*)$", text, re.M))
    assert groups <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
    body = text[text.index("## [Unreleased]") :]
    for line in body.splitlines():
        assert not line.startswith(" "), f"CHANGELOG.md: an entry runs over lines: {line!r}"
        assert not line or line.startswith(("## ", "### ", "- ")), f"CHANGELOG.md: {line!r}"
