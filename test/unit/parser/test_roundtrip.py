"""The printer/parser fixpoint contract (docs/design/architecture.md, "Contracts") on every lit input.

For each `test/lit/**/*.dl` chunk (split on `// -----`) that is meant to parse, that is
every file without a `--verify-diagnostics` or `not dlc-opt` RUN line:
`print(parse(text))` must re-parse to a structurally equal module that prints the same text.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dlc.parser import parse_module
from dlc.parser.printer import print_module

LIT_ROOT = Path(__file__).resolve().parents[2] / "lit"
_EXPECTS_ERRORS = re.compile(r"//\s*RUN:.*(--verify-diagnostics|\bnot\s+dlc-opt)")


def _parsing_chunks() -> list[tuple[str, str]]:
    """(test id, source) of every chunk of every lit .dl file that is expected to parse."""
    chunks: list[tuple[str, str]] = []
    for path in sorted(LIT_ROOT.rglob("*.dl")):
        text = path.read_text()
        if _EXPECTS_ERRORS.search(text):
            continue
        for k, chunk in enumerate(re.split(r"^// -----\s*$", text, flags=re.MULTILINE)):
            chunks.append((f"{path.relative_to(LIT_ROOT)}#{k}", chunk))
    return chunks


CHUNKS = _parsing_chunks()


def test_lit_inputs_exist() -> None:
    names = {chunk_id.split("#")[0] for chunk_id, _ in CHUNKS}
    assert "dialects/graph-ops.dl" in names


@pytest.mark.parametrize(("chunk_id", "source"), CHUNKS, ids=[c for c, _ in CHUNKS])
def test_print_parse_fixpoint(chunk_id: str, source: str) -> None:
    first = parse_module(source, chunk_id)
    printed = print_module(first)
    second = parse_module(printed, chunk_id + " (printed)")
    reprinted = print_module(second)
    assert reprinted == printed
    assert second.is_structurally_equivalent(first), f"{chunk_id}: parse(print(M)) differs from M"


REWRITE_SOURCE = """module "m"
stage raw

func @f: (f32) -> f32 {
'entry(%x: f32):
    %0.0 = exp %x: f32
    %y = add %0.0: f32, 1: f32
    return %y: f32
}
"""


def test_names_stay_unique_and_positions_renumber_after_a_rewrite() -> None:
    from dlc.dialects.graph_elementwise import NegateOp

    module = parse_module(REWRITE_SOURCE)
    block = next(op for op in module.walk() if op.name == "graph.exp").parent_block()
    assert block is not None
    exp = block.first_op
    assert exp is not None
    negate = NegateOp(block.args[0])
    negate.results[0]._name = "y"  # a pass reusing a name that is already taken
    block.insert_op_before(negate, exp)
    exp.results[0].replace_all_uses_with(negate.results[0])
    block.erase_op(exp)
    printed = print_module(module)
    assert printed.splitlines()[4:8] == [
        "'entry(%x: f32):",
        "    %y = negate %x: f32",
        "    %0.1 = add %y: f32, 1: f32",
        "    return %0.1: f32",
    ]
    assert print_module(parse_module(printed)) == printed


def test_nested_literal_prints_back_to_its_source() -> None:
    lit, ty = "7: i64", "i64"
    for _ in range(45):
        ty = f"({ty})"
        lit = f"({lit}): {ty}"
    source = f"""module "deep"
stage raw

func @f: () -> {ty} {{
'entry():
    %x = literal {lit}
    return %x: {ty}
}}
"""
    assert print_module(parse_module(source)) == source
