"""Regression guard: random programs (tools/fuzz_gen.py) compiled in every configuration
agree with the reference interpreter (tools/fuzz.py).

DLC_FUZZ_COUNT scales the number of programs (default 3; 0 skips the test), DLC_FUZZ_SEED
moves the first seed. A failure prints the finding; `python tools/fuzz.py --seed S --count 1`
shrinks it to a reproducer.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools"
sys.path.insert(0, str(TOOLS))

import fuzz  # noqa: E402
import fuzz_gen  # noqa: E402

COUNT = int(os.environ.get("DLC_FUZZ_COUNT", "3"))
FIRST = int(os.environ.get("DLC_FUZZ_SEED", "0"))
SIZE = 8

pytestmark = pytest.mark.skipif(COUNT <= 0, reason="DLC_FUZZ_COUNT=0")


@pytest.mark.parametrize("seed", range(FIRST, FIRST + COUNT))
def test_random_program_agrees_with_reference(seed: int) -> None:
    text = fuzz_gen.generate(seed, SIZE).text()
    outcome = fuzz.check_text(text, seed)
    assert not outcome.findings, "\n".join(f.line() for f in outcome.findings) + "\n" + text


def test_generator_is_deterministic_and_parses() -> None:
    import dlc

    for seed in range(20):
        text = fuzz_gen.generate(seed, 12).text()
        assert text == fuzz_gen.generate(seed, 12).text()
        dlc.parse(text, f"fuzz{seed}.dl")


def test_checker_detects_a_wrong_result() -> None:
    got = (np.float32([1.0, 2.0]), np.int32([3]))
    assert fuzz.compare(got, got)[0]
    assert not fuzz.compare((np.float32([1.0, 2.0]), np.int32([3])), got[:1])[0]
    assert not fuzz.compare((np.float32([1.0, 2.01]), np.int32([3])), got)[0]
    assert not fuzz.compare((np.float32([1.0, 2.0]), np.int32([4])), got)[0]
    assert not fuzz.compare((np.float32([1.0, np.nan]), np.int32([3])), got)[0]


def test_shrinker_keeps_the_failure() -> None:
    """Shrink against a fake failure (any `exp`): the result is small and still has one."""
    prog = next(p for s in range(50) if "exp " in (p := fuzz_gen.generate(s, 10)).text())
    calls = []

    def fake_check(text: str, seed: int, variants: tuple[str, ...] = ()) -> fuzz.Outcome:
        calls.append(text)
        hit = [fuzz.Finding("mismatch", "default", "main", "fake")] if "exp " in text else []
        return fuzz.Outcome(hit, [])

    original = fuzz.check_text
    fuzz.check_text = fake_check
    try:
        small = fuzz.shrink(prog, 0, fuzz.Finding("mismatch", "default", "main", "fake"), 30)
    finally:
        fuzz.check_text = original
    body = [i for f in small.funcs for b in f.blocks for i in b.insts]
    assert "exp " in small.text()
    assert len(body) <= 3, small.text()
