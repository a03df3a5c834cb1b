"""Project layout rules that keep the pass registry and its lit tests in step (CONTRIBUTING.md, "How the tests are shaped")."""

import re
from pathlib import Path

import pytest

from dlc.pipeline import LOWERINGS, get_all_passes

LIT_DIR = Path(__file__).resolve().parents[1] / "lit"


def _lit_test_for(pass_name: str) -> list[Path]:
    # a step down between levels (the pipeline's, or lower-graph-to-loop for symbolic
    # dimensions) is a lowering; lower-control-flow stays within its level
    down = pass_name in LOWERINGS.values() or re.fullmatch(r"lower-\w+-to-\w+", pass_name)
    area = "lowering" if down else "passes"
    return [LIT_DIR / area / f"{pass_name}{suffix}" for suffix in (".dl", ".mlir")]


@pytest.mark.parametrize("pass_name", sorted(get_all_passes()))
def test_every_pass_has_a_lit_test(pass_name: str) -> None:
    candidates = _lit_test_for(pass_name)
    assert any(p.is_file() for p in candidates), (
        f"missing lit test: one of {[str(p) for p in candidates]}"
    )


@pytest.mark.parametrize("pass_name", sorted(get_all_passes()))
def test_pass_name_matches_class(pass_name: str) -> None:
    pass_class = get_all_passes()[pass_name]()
    assert pass_class.name == pass_name


@pytest.mark.parametrize("pass_name", sorted(get_all_passes()))
def test_pass_file_is_named_after_the_pass(pass_name: str) -> None:
    module = get_all_passes()[pass_name]().__module__
    assert module.rsplit(".", 1)[-1] == pass_name.replace("-", "_")


def test_pass_classes_have_contract_docstrings() -> None:
    for name, factory in get_all_passes().items():
        doc = factory().__doc__ or ""
        assert len(doc.strip()) > 20, f"pass {name} needs a docstring stating its contract"
