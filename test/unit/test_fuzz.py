"""Fuzzing as a habit: a fixed-seed, fixed-size slice of both fuzzers runs with the
suite (the long runs are `python tools/fuzz_mutate.py --count 100000` and
`python tools/fuzz.py --count 1000`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

import fuzz  # noqa: E402
import fuzz_mutate  # noqa: E402


def test_mutated_sources_only_ever_give_diagnostics(tmp_path: Path) -> None:
    """200 mutants of the repository's `.dl` files through parse, compile and run (in a
    worker process, so a crash or a hang is caught): no other exception, no signal."""
    counts = fuzz_mutate.run(seed=20261124, count=200, timeout=120.0, out=tmp_path, log=False)
    findings = {k: n for k, n in counts.items() if not k.startswith(("ok", "allowed", "alarm"))}
    details = [p.read_text()[:2000] for p in sorted(tmp_path.glob("*.txt"))]
    assert not findings, "\n\n".join(details)
    assert counts["ok"] > 0 and counts["allowed:DiagnosticError"] > 0  # it did get through


def test_mutations_are_reproducible() -> None:
    import numpy as np

    texts = fuzz_mutate.corpus()
    pool = ["%x", "f32", "1"]
    a = fuzz_mutate.mutate(texts[0], np.random.default_rng(5), pool)
    b = fuzz_mutate.mutate(texts[0], np.random.default_rng(5), pool)
    assert a == b and len(texts) > 50


@pytest.mark.parametrize("seed", range(8))
def test_random_programs_match_the_reference(seed: int) -> None:
    """Differential: generated programs, compiled in every configuration, against the
    reference interpreter."""
    _, outcome = fuzz.fuzz_one(seed, 12, ("default", "O0", "nofuse", "passes"))
    assert not outcome.findings, "\n".join(f.line() for f in outcome.findings)
