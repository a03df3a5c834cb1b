"""Regenerate `dlc/parser/grammar_tables.json`, the LALR tables of `grammar.lark` as
JSON, which `dlc.parser` loads in ~12 ms instead of building them (~100 ms) in every
new process:

    python tools/gen_parser_tables.py

The file records the SHA-256 of the grammar and lark's version; `dlc.parser` ignores
it when either differs (and builds the tables itself), and `test_parser_tables.py`
fails until it is regenerated. JSON, not pickle: loading it runs no code.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dlc.parser.tables import TABLES, serialized_tables  # noqa: E402


def main() -> None:
    TABLES.write_text(serialized_tables(), encoding="utf-8")
    print(f"wrote {TABLES} ({TABLES.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
