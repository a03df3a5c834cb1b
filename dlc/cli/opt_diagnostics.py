"""dlc-opt's diagnostics: a chunk's error as one diagnostic located in the whole file
(`as_diagnostic`), and `--verify-diagnostics` with MLIR's `expected-error` convention.

A comment `// expected-error {{message}}` in the input says that the chunk it is in
(`--split-input-file`) reports an error on the comment's line whose message contains
`message`. A designator moves the line: `@+N` / `@-N` (relative to the comment's line),
`@above` (the closest line above that holds no expectation), `@below` (the closest line
below that holds none), `@unknown` (an error without a location, such as a pass run at
the wrong level). Every error a chunk reports must match an expectation, and every
expectation must be matched: otherwise dlc-opt reports `expected error "..." was not
produced` at the comment or `unexpected error: ...` at the error, and exits 1. dlc
reports errors only, and only the first of a chunk: `expected-warning`, `-note`,
`-remark` and the `-re` forms are refused as unsupported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from xdsl.utils.exceptions import DiagnosticException, ParseError

from dlc.cli.targets import UsageError
from dlc.diagnostics import DiagnosticError, Location

_DESIGNATOR = re.compile(
    r"expected-(?P<kind>error|warning|note|remark)(?P<regex>-re)?[ \t]*"
    r"(?:@(?P<where>[+-]\d+|above|below|unknown))?[ \t]*\{\{(?P<message>.*)\}\}"
)


class IRVerifyError(Exception):
    """The IR failed xDSL's structural verifier: a one-line diagnostic."""


@dataclass
class Expectation:
    """`expected-error {{message}}` at `comment`, for `line` (None: an unlocated error)."""

    message: str
    line: int | None
    comment: Location
    matched: bool = False


def has_expectations(text: bytes) -> bool:
    """Whether `text` holds any `expected-*` designator (then dlc-opt checks them)."""
    return _DESIGNATOR.search(text.decode("utf-8", "replace")) is not None


def parse_expectations(
    text: str, filename: str, line_offset: int
) -> tuple[list[Expectation], list[DiagnosticError]]:
    """The expectations of a chunk whose first line is line `line_offset + 1` of the
    file, and an error for each unsupported designator."""
    expectations: list[Expectation] = []
    errors: list[DiagnosticError] = []
    waiting_below: list[Expectation] = []
    last_plain_line = 0
    for number, source in enumerate(text.splitlines(), start=line_offset + 1):
        found = list(_DESIGNATOR.finditer(source))
        if not found:
            for expectation in waiting_below:
                expectation.line = number
            waiting_below.clear()
            last_plain_line = number
            continue
        for match in found:
            comment = Location(filename, number, match.start() + 1, source)
            designator = f"expected-{match['kind']}{match['regex'] or ''}"
            if designator != "expected-error":
                message = (
                    f"{designator} is not supported: dlc reports errors only (use expected-error)"
                )
                errors.append(DiagnosticError(message, comment))
                continue
            expectation = Expectation(match["message"].strip(), number, comment)
            where = match["where"]
            if where == "unknown":
                expectation.line = None
            elif where == "above":
                expectation.line = last_plain_line
            elif where == "below":
                waiting_below.append(expectation)
            elif where is not None:
                expectation.line = number + int(where)
            expectations.append(expectation)
    for expectation in waiting_below:  # no line below: it cannot match
        expectation.line = -1
    return expectations, errors


def differences(
    text: bytes, filename: str, line_offset: int, produced: DiagnosticError | None
) -> list[DiagnosticError]:
    """The differences between the error a chunk reported and its expectations."""
    expected, errors = parse_expectations(text.decode("utf-8", "replace"), filename, line_offset)
    return errors + check(expected, produced)


def check(
    expectations: list[Expectation], produced: DiagnosticError | None
) -> list[DiagnosticError]:
    """The mismatches between a chunk's expectations and the error it reported."""
    errors: list[DiagnosticError] = []
    if produced is not None:
        line = produced.location.line if produced.location is not None else None
        for expectation in expectations:
            if expectation.line == line and expectation.message in produced.message:
                expectation.matched = True
                break
        else:
            errors.append(
                DiagnosticError(f"unexpected error: {produced.message}", produced.location)
            )
    for expectation in expectations:
        if not expectation.matched:
            message = f'expected error "{expectation.message}" was not produced'
            errors.append(DiagnosticError(message, expectation.comment))
    return errors


def as_diagnostic(e: Exception, line_offset: int) -> DiagnosticError | None:
    """A user error in a chunk as a diagnostic located in the whole file (None: not a
    user error but an internal error of dlc)."""
    if isinstance(e, DiagnosticError):
        return shifted(e, line_offset)
    if isinstance(e, ParseError):
        return from_parse_error(e, line_offset)
    if isinstance(e, IRVerifyError | UsageError):
        return DiagnosticError(str(e))
    if isinstance(e, DiagnosticException):
        return DiagnosticError(first_line(e))
    return None


def format_diagnostic(e: DiagnosticError) -> str:
    """A located diagnostic with its source line, else `dlc-opt: error: MESSAGE`."""
    return e.format() if e.location is not None else f"dlc-opt: error: {e.message}"


def first_line(e: BaseException) -> str:
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return lines[0] if lines else type(e).__name__


def from_parse_error(e: ParseError, line_offset: int) -> DiagnosticError:
    """xDSL's MLIR parse error as a dlc diagnostic, its line counted in the whole file."""
    span = e.span
    where = span.get_location()
    start = span.input.get_start_of_line(span.start)
    source = span.input.content[start : span.input.get_end_of_line(span.start)]
    if isinstance(source, bytes):
        source = source.decode("utf-8", "replace")
    message = " ".join(e.msg.split())
    return DiagnosticError(
        message, Location(where.file, where.line + line_offset, where.col, source)
    )


def shifted(e: DiagnosticError, line_offset: int) -> DiagnosticError:
    """`e` with its line counted from the start of the whole file, not of its chunk."""
    loc = e.location
    if loc is None or line_offset == 0 or loc.line <= 0:
        return e
    moved = Location(loc.filename, loc.line + line_offset, loc.column, loc.source_line)
    return DiagnosticError(e.message, moved)
