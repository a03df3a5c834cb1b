"""The parser tables shipped as JSON (dlc/parser/tables.py): current with the grammar,
the same parse trees as a parser built from the grammar, and a stale or damaged file
is never used (the parser is built instead)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlc.parser import tables
from dlc.parser.lexer import decode_source, tokenize

ROOT = Path(__file__).resolve().parents[3]


def test_shipped_tables_are_current() -> None:
    stored = json.loads(tables.TABLES.read_text(encoding="utf-8"))
    assert stored["grammar_sha256"] == tables._fingerprint()["grammar_sha256"], (
        "grammar.lark changed: run python tools/gen_parser_tables.py"
    )


def test_loaded_tables_parse_like_the_grammar() -> None:
    loaded, built = tables.load_parser(), tables.build_parser()
    sources = sorted([*ROOT.glob("examples/*.dl"), *ROOT.glob("benchmarks/*.dl")])
    assert len(sources) >= 10
    for path in sources:
        tokens = tokenize(decode_source(path.read_text(encoding="utf-8"), str(path)))
        assert loaded.parse(list(tokens)) == built.parse(list(tokens)), path


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        json.dumps({"grammar_sha256": "0" * 64, "lark": "1.3.1", "data": {}, "memo": {}}),
        json.dumps({"data": [], "memo": 3}),
    ],
)
def test_stale_or_damaged_tables_are_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str
) -> None:
    bad = tmp_path / "grammar_tables.json"
    bad.write_text(content, encoding="utf-8")
    monkeypatch.setattr(tables, "TABLES", bad)
    built: list[bool] = []
    real_build = tables.build_parser
    monkeypatch.setattr(tables, "build_parser", lambda: built.append(True) or real_build())
    parser = tables.load_parser()
    tokens = tokenize(decode_source((ROOT / "examples" / "mlp.dl").read_text(), "mlp.dl"))
    assert built and parser.parse(list(tokens)) is not None
