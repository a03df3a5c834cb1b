"""The LALR parser of `grammar.lark`, loaded from `grammar_tables.json` when that file
was made from this grammar by this lark version (`tools/gen_parser_tables.py`), else
built from the grammar. Building takes ~100 ms per process, loading ~30 ms. The file
is JSON (lark's own `memo_serialize` form, the custom lexer class left out): reading
it runs no code, unlike lark's pickle cache, which dlc does not use."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import lark

from dlc.parser.lexer import DLVMLexer

GRAMMAR = Path(__file__).with_name("grammar.lark")
TABLES = Path(__file__).with_name("grammar_tables.json")


def _fingerprint() -> dict[str, str]:
    return {
        "grammar_sha256": hashlib.sha256(GRAMMAR.read_bytes()).hexdigest(),
        "lark": lark.__version__,
    }


def build_parser() -> lark.Lark:
    with open(GRAMMAR, encoding="utf-8") as grammar:
        return lark.Lark(grammar, parser="lalr", lexer=DLVMLexer, propagate_positions=True)


def serialized_tables() -> str:
    """The tables of a freshly built parser as JSON text (stable: sorted keys)."""
    data, memo = build_parser().memo_serialize([lark.lexer.TerminalDef, lark.grammar.Rule])
    data["parser"]["lexer_conf"]["lexer_type"] = "DLVMLexer"
    data["options"]["lexer"] = "DLVMLexer"
    return json.dumps({**_fingerprint(), "data": data, "memo": memo}, sort_keys=True) + "\n"


def _int_keys(pairs: list[tuple[str, object]]) -> dict[object, object]:
    """JSON made the integer keys of lark's tables strings; make them integers again
    (a `json.loads` hook: one pass in the decoder, no second walk)."""
    return {(int(k) if k.lstrip("-").isdigit() else k): v for k, v in pairs}


def load_parser() -> lark.Lark:
    """The parser from `grammar_tables.json` when it is current, else built."""
    try:
        stored = json.loads(TABLES.read_text(encoding="utf-8"), object_pairs_hook=_int_keys)
        if {k: stored.get(k) for k in ("grammar_sha256", "lark")} != _fingerprint():
            return build_parser()
        data, memo = stored["data"], stored["memo"]
        data["parser"]["lexer_conf"]["lexer_type"] = DLVMLexer
        data["options"]["lexer"] = DLVMLexer
        return lark.Lark._load_from_dict(data, memo)  # noqa: SLF001 -- lark's JSON loader
    except (OSError, ValueError, KeyError, TypeError, lark.exceptions.LarkError):
        return build_parser()
