"""MLIR text (any level of dlc's IR) with source locations: every parsed op remembers
where it was written, so verifier errors and code-generator diagnostics on `.mlir`
input are located like those on `.dl` input.

xDSL parses nested regions, attributes and types by recursion: input that nests deeper
than Python's recursion limit allows (about 140 nested modules, 90 nested dialect
types) is the located error "input nests too deeply" at the point the parser reached,
like `.dl` input that exhausts the stack (`dlc.parser.parse_module`). An integer
literal longer than Python converts (4300 digits) is a located error too.
"""

from __future__ import annotations

import sys

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.lexer import Span

from dlc.diagnostics import DiagnosticError, Location, location_in, set_loc


def span_location(span: Span, line_offset: int = 0) -> Location:
    """The location of `span`'s start, its line counted from `line_offset`."""
    where = span.get_location()
    start = span.input.get_start_of_line(span.start)
    source = span.input.content[start : span.input.get_end_of_line(span.start)]
    if isinstance(source, bytes):
        source = source.decode("utf-8", "replace")
    return Location(where.file, where.line + line_offset, where.col, source)


class LocatedParser(Parser):
    """xDSL's parser that records each op's location (`dlc.diagnostics.set_loc`)."""

    def __init__(self, ctx: Context, text: str, name: str, line_offset: int = 0) -> None:
        super().__init__(ctx, text, name)
        self.line_offset = line_offset
        self.open_ops: list[int] = []  # where the ops being parsed start (innermost last)

    def parse_operation(self) -> Operation:
        start = self._current_token.span
        self.open_ops.append(start.start)
        op = super().parse_operation()
        self.open_ops.pop()  # left in place on an error: the op the error is in
        set_loc(op, span_location(start, self.line_offset))
        return op


def parse_mlir(
    ctx: Context, text: str, name: str, *, line_offset: int = 0, implicit_module: bool = True
) -> ModuleOp:
    """A module parsed from MLIR text, its ops located (xDSL's `ParseError` on syntax
    errors; a `DiagnosticError` when the input nests too deeply or an attribute does
    not verify)."""
    parser = LocatedParser(ctx, text, name, line_offset)
    try:
        return parser.parse_module(implicit_module)
    except RecursionError:
        raise DiagnosticError("input nests too deeply", _at(text, name, parser.pos)) from None
    except ValueError as err:  # int() of a literal over Python's digit limit
        if "integer string conversion" not in str(err):
            raise
        limit = sys.get_int_max_str_digits()
        message = f"integer literal with more than {limit} digits"
        start = parser.pos  # the parser stands past the literal: point at its start
        while start > 0 and not text[start - 1].isdigit():
            start -= 1
        while start > 0 and text[start - 1].isdigit():
            start -= 1
        raise DiagnosticError(message, _at(text, name, start)) from None
    except VerifyException as err:  # an attribute or type that does not verify
        message = " ".join(line.strip() for line in str(err).splitlines() if line.strip())
        where = parser.open_ops[-1] if parser.open_ops else parser.pos
        raise DiagnosticError(message, _at(text, name, where)) from None


def _at(text: str, name: str, pos: int) -> Location:
    """The location of offset `pos` in `text`."""
    before = text[:pos]
    line = before.count("\n") + 1
    return location_in(text, name, line, len(before) - (before.rfind("\n") + 1) + 1)
