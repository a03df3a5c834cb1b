"""Located diagnostics: `FILE:LINE:COL: error: MESSAGE`, the source line and a caret.

Every user error in dlc, from the parser, the verifier, a pass, the code generator or
the runtime, is a `DiagnosticError`. Ops remember where they came from through
`set_loc` / `get_loc` (a side table, so IR printing stays clean), blocks through
`set_block_loc` / `block_location`; passes that create ops copy the location of the op
they replace with `copy_loc`.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from xdsl.ir import Block, Operation

OpT = TypeVar("OpT", bound="Operation")


@dataclass(frozen=True)
class Location:
    """A point in a source file; `line` and `column` are 1-based."""

    filename: str
    line: int
    column: int
    source_line: str = ""


class TrapError(RuntimeError):
    """A program stopped at run time: it executed `trap`, ran out of memory or of
    stack, or did something its language leaves undefined. Raised by compiled calls
    and by the reference interpreter (`dlc.semantics`); the message is located."""


class DiagnosticError(Exception):
    """A user error with a location; `str()` gives the full three-line diagnostic."""

    def __init__(self, message: str, location: Location | None = None):
        super().__init__(message)
        self.message = message
        self.location = location

    @property
    def filename(self) -> str:
        return self.location.filename if self.location else "<unknown>"

    @property
    def line(self) -> int:
        return self.location.line if self.location else 0

    @property
    def column(self) -> int:
        return self.location.column if self.location else 0

    def format(self) -> str:
        loc = self.location
        if loc is None:
            return f"error: {self.message}"
        if loc.line <= 0:
            # A whole-file error (e.g. the file cannot be read) has no line to show.
            return f"{loc.filename}: error: {self.message}"
        text = f"{loc.filename}:{loc.line}:{loc.column}: error: {self.message}"
        if loc.source_line:
            # Tabs keep their width so the caret lines up under the column.
            prefix = "".join("\t" if c == "\t" else " " for c in loc.source_line[: loc.column - 1])
            text += f"\n{loc.source_line}\n{prefix}^"
        return text

    def __str__(self) -> str:
        return self.format()


_LOCATIONS: weakref.WeakKeyDictionary[Operation, Location] = weakref.WeakKeyDictionary()
_BLOCK_LOCATIONS: weakref.WeakKeyDictionary[Block, Location] = weakref.WeakKeyDictionary()


def set_loc(op: Operation, loc: Location | None) -> None:
    if loc is not None:
        _LOCATIONS[op] = loc


def own_location(op: Operation) -> Location | None:
    """The location recorded for `op` itself (none inherited from its ancestors)."""
    return _LOCATIONS.get(op)


def get_loc(op: Operation | None) -> Location | None:
    """The location of `op`, or of its closest located ancestor."""
    while op is not None:
        loc = _LOCATIONS.get(op)
        if loc is not None:
            return loc
        op = op.parent_op()
    return None


def copy_loc(source: Operation, *targets: Operation) -> None:
    """Hand `source`'s location (and origin, `set_origin`) on to `targets`."""
    loc = _LOCATIONS.get(source)
    if loc is not None:
        for target in targets:
            _LOCATIONS[target] = loc
    origin = _ORIGINS.get(source)
    if origin is not None:
        for target in targets:
            _ORIGINS[target] = origin


_ORIGINS: weakref.WeakKeyDictionary[Operation, str] = weakref.WeakKeyDictionary()


def set_origin(op: Operation, origin: str) -> None:
    """Name what `op` was imported from where it has no source line (an ONNX node:
    `node 'conv1' (Conv)`); it follows the op down the levels as its location does
    (`copy_loc`), for the profiler to name the nodes a kernel came from."""
    _ORIGINS[op] = origin


def get_origin(op: Operation | None) -> str | None:
    """The origin of `op`, or of its closest ancestor with one."""
    while op is not None:
        origin = _ORIGINS.get(op)
        if origin is not None:
            return origin
        op = op.parent_op()
    return None


def set_block_loc(block: Block, loc: Location) -> None:
    """Remember where a block's label was written (for block-level diagnostics)."""
    _BLOCK_LOCATIONS[block] = loc


def block_location(block: Block) -> Location | None:
    return _BLOCK_LOCATIONS.get(block)


def clone_located(op: OpT) -> OpT:
    """A clone of `op` (e.g. a module) that keeps what xDSL's `clone` drops: the source
    locations of its ops and blocks, the names of its blocks, and value names exactly
    (xDSL's name hints lose a `_1` suffix). Passes that work on a copy still raise
    located diagnostics and print the names the source gave."""
    copy = op.clone()
    for original, cloned in zip(op.walk(), copy.walk(), strict=True):
        copy_loc(original, cloned)
        for old, new in zip(original.results, cloned.results, strict=True):
            new._name = old._name
        for old_region, new_region in zip(original.regions, cloned.regions, strict=True):
            for old_block, new_block in zip(old_region.blocks, new_region.blocks, strict=True):
                new_block._name = old_block._name
                for old_arg, new_arg in zip(old_block.args, new_block.args, strict=True):
                    new_arg._name = old_arg._name
                loc = _BLOCK_LOCATIONS.get(old_block)
                if loc is not None:
                    _BLOCK_LOCATIONS[new_block] = loc
    return copy


def location_prefix(op: Operation | None) -> str:
    """`FILE:LINE:COL: ` of `op` (or of its closest located ancestor), or "" when none:
    the prefix of run-time messages (traps, bounds checks) baked into compiled code."""
    loc = get_loc(op)
    return f"{loc.filename}:{loc.line}:{loc.column}: " if loc is not None else ""


def error_at(op: Operation | None, message: str) -> DiagnosticError:
    """A diagnostic located at `op` (or its closest located ancestor)."""
    return DiagnosticError(message, get_loc(op))


def verify_located(module: Operation) -> None:
    """xDSL's verifier, op by op, raising a `DiagnosticError` located at the op that
    fails (or the op an error names, `err.op`) when that op has a recorded location
    (a pass's new op may have none: then the error has none either)."""
    from xdsl.utils.exceptions import DiagnosticException

    for op in module.walk():
        try:
            op.verify(verify_nested_ops=False)
        except (DiagnosticException, ValueError) as err:
            lines = [line.strip() for line in str(err).splitlines() if line.strip()]
            message = lines[0] if lines else type(err).__name__
            culprit = getattr(err, "op", None) or op
            raise DiagnosticError(message, own_location(culprit)) from None


def location_in(text: str, filename: str, line: int, column: int) -> Location:
    """A location with its source line taken from `text`."""
    lines = text.splitlines()
    source = lines[line - 1] if 0 < line <= len(lines) else ""
    return Location(filename, line, column, source)
