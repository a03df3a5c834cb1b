"""The repository is self-contained: the documents it names are in it, and no source
comment points at a file outside it."""

from __future__ import annotations

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
