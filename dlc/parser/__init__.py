"""dlc's DLVM front end: `parse_module` (text -> verified graph module) and `print_module`.

Pipeline: decode (UTF-8) -> tokenize (`lexer.py`, newline rules) -> lark LALR parse
(`grammar.lark`) -> build IR with type inference (`builder.py`) -> `verify_module`.
Every user error is one located `DiagnosticError`; no lark exception escapes.
"""

from __future__ import annotations

from collections.abc import Callable

import lark
from lark.exceptions import UnexpectedInput, UnexpectedToken
from xdsl.dialects.builtin import ModuleOp

from dlc.diagnostics import DiagnosticError, Location
from dlc.parser.lexer import DISPLAY, SourceText, decode_source, tokenize

_PARSER: lark.Lark | None = None


def _parser() -> lark.Lark:
    global _PARSER
    if _PARSER is None:
        from dlc.parser.tables import load_parser

        _PARSER = load_parser()
    return _PARSER


def prepare() -> None:
    """Load what parsing needs once per process — the parser's tables, the IR builder,
    the verifier and the dialects they import — so that a caller timing `parse_module`
    (`dlc-opt --timing`) times the parse alone."""
    from dlc.dialects.graph_verify import verify_module  # noqa: F401
    from dlc.parser.builder import ModuleBuilder  # noqa: F401

    _parser()


def parse_module(text: str | bytes, filename: str = "<string>") -> ModuleOp:
    """Parse and verify a DLVM module; raises `DiagnosticError` on any malformed input."""
    try:
        return _parse(text, filename)
    except DiagnosticError:
        raise
    except RecursionError:
        raise DiagnosticError("input nests too deeply", Location(filename, 1, 1)) from None
    except Exception as err:  # last resort: never leak an internal exception
        raise DiagnosticError(
            f"internal error: {type(err).__name__}: {err}", Location(filename, 1, 1)
        ) from err


def _parse(text: str | bytes, filename: str) -> ModuleOp:
    from dlc.dialects.graph_verify import verify_module
    from dlc.parser.builder import ModuleBuilder

    source = decode_source(text, filename)
    tokens = tokenize(source)
    if not tokens:
        raise source.error("empty file: expected 'module'", 1, 1)
    try:
        tree = _parser().parse(tokens)
    except UnexpectedInput as err:
        raise _syntax_error(source, err, tokens) from None
    module = ModuleBuilder(source).build(tree)
    verify_module(module)
    return module


def _syntax_error(
    source: SourceText, err: UnexpectedInput, tokens: list[lark.Token]
) -> DiagnosticError:
    names = _accepted(err)
    expected = sorted({DISPLAY.get(name, name) for name in names})
    want = _join(expected) if expected else "something else"
    if not isinstance(err, UnexpectedToken) or err.token.type == "$END":
        last = tokens[-1]
        end_column = (last.column or 1) + len(str(last))
        return source.error(f"expected {want}, found end of file", last.line or 1, end_column)
    tok = err.token
    line, column = tok.line or 1, tok.column or 1
    if tok.type == "BADWORD":
        if "instruction" in expected:
            return source.error(f"unknown instruction '{tok}'", line, column)
        if "data type" in expected:
            return source.error(f"unknown type '{tok}'", line, column)
        return source.error(f"expected {want}, found unknown word '{tok}'", line, column)
    found = "newline" if tok.type == "_NL" else f"'{tok}'"
    return source.error(f"expected {want}, found {found}", line, column)


def _accepted(err: UnexpectedInput) -> set[str]:
    """The terminals really acceptable here (LALR's `expected` merges lookaheads)."""
    parser = getattr(err, "interactive_parser", None)
    if parser is not None:
        try:
            return set(parser.accepts())
        except Exception:  # fall back to the table's lookahead set
            pass
    return set(getattr(err, "expected", ()) or ())


def _join(items: list[str]) -> str:
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " or " + items[-1]


def print_module(module: ModuleOp, dense: Callable[[bytes], str] | None = None) -> str:
    """DLVM text of a graph module (implemented in `dlc.parser.printer`; `dense` spells
    the payloads of dense literals, base64 by default)."""
    from dlc.parser.printer import print_module as _print_module

    return _print_module(module) if dense is None else _print_module(module, dense)


__all__ = ["parse_module", "print_module"]
