"""The `schedule` dialect: how a `tensor.compute` nest runs, as a typed attribute.

`#schedule.nest<...>` names loops `d0, d1, ...` (output axes) and `r0, ...` (reduction
axes) and applies the primitives tile, interchange, parallel, unroll, vectorize, fma,
pack, epilogue, split and group; it is verified against its compute, printed, parsed and hashed.
A schedule changes speed, never the bits (but `fma`). Each primitive's definition:
docs/design/schedules.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict, Unpack

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

_CLAUSES = (
    "tile",
    "interchange",
    "parallel",
    "unroll",
    "fma",
    "vectorize",
    "pack",
    "group",
    "epilogue",
    "split",
)


@dataclass(frozen=True)
class Loop:
    """One loop of a scheduled nest: level `level` of axis `axis` (`d1`, `r0`)."""

    name: str  # "d1" (untiled) or "d1.0", "d1.1", ...
    axis: str
    level: int
    step: int  # the block this loop's iterations cover (1 at an axis' last level)
    block: int  # the block of its parent level (the axis extent at level 0)

    @property
    def is_reduction(self) -> bool:
        return self.axis.startswith("r")


def _axis_key(axis: str) -> tuple[int, int | str]:
    digits = axis[1:]
    return (axis[:1] == "r", int(digits) if digits.isdigit() else digits)


def axis_names(rank: int, reductions: int) -> list[str]:
    return [f"d{i}" for i in range(rank)] + [f"r{i}" for i in range(reductions)]


class ScheduleFields(TypedDict, total=False):
    """The keywords of `ScheduleAttr(...)` (and of `ScheduleAttr.replaced`)."""

    tiles: Mapping[str, Sequence[int]] | None
    order: Sequence[str]
    parallel: Sequence[str]
    unroll: Sequence[str]
    vectorize: tuple[str, int] | None
    pack: Sequence[int]
    group: tuple[int, int, bool, bool] | None
    fma: bool
    epilogue: int
    split: Mapping[str, Sequence[int]] | None


@irdl_attr_definition
class ScheduleAttr(ParametrizedAttribute):
    """`#schedule.nest<...>`: the schedule of one `tensor.compute` (module docstring)."""

    name = "schedule.nest"

    tiles: ArrayAttr[ArrayAttr[Attribute]]  # [axis, f1, ..., fk] per tiled axis
    order: ArrayAttr[StringAttr]
    parallel: ArrayAttr[StringAttr]
    unroll: ArrayAttr[StringAttr]
    vectorize: ArrayAttr[Attribute]  # [] or [loop, width]
    pack: ArrayAttr[IntAttr]
    group: ArrayAttr[IntAttr]  # [] or [id, at, feeds, internal]
    contract: IntAttr  # 1: fuse multiply-adds (fma)
    epilogue_count: IntAttr  # computes after this one evaluated at its register tile
    splits: ArrayAttr[ArrayAttr[Attribute]]  # [axis, p1, ..., pk] per split axis

    def __init__(
        self,
        *,
        tiles: Mapping[str, Sequence[int]] | None = None,
        order: Sequence[str] = (),
        parallel: Sequence[str] = (),
        unroll: Sequence[str] = (),
        vectorize: tuple[str, int] | None = None,
        pack: Sequence[int] = (),
        group: tuple[int, int, bool, bool] | None = None,
        fma: bool = False,
        epilogue: int = 0,
        split: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        def names(items: Sequence[str]) -> ArrayAttr[StringAttr]:
            return ArrayAttr([StringAttr(n) for n in items])

        def per_axis(table: Mapping[str, Sequence[int]] | None) -> ArrayAttr[ArrayAttr[Attribute]]:
            return ArrayAttr(  # in axis order (d0, ..., r0, ...): equal schedules compare equal
                [
                    ArrayAttr([StringAttr(a), *(IntAttr(f) for f in fs)])
                    for a, fs in sorted((table or {}).items(), key=lambda i: _axis_key(i[0]))
                    if fs
                ]
            )

        vec: list[Attribute] = (
            [StringAttr(vectorize[0]), IntAttr(vectorize[1])] if vectorize else []
        )
        grp = [IntAttr(int(v)) for v in group] if group is not None else []
        super().__init__(
            per_axis(tiles),
            names(order),
            names(parallel),
            names(unroll),
            ArrayAttr(vec),
            ArrayAttr([IntAttr(i) for i in pack]),
            ArrayAttr(grp),
            IntAttr(int(fma)),
            IntAttr(epilogue),
            per_axis(split),
        )

    # -- Python views -------------------------------------------------------------------

    @property
    def tile_sizes(self) -> dict[str, tuple[int, ...]]:
        return _per_axis(self.tiles)

    @property
    def split_points(self) -> dict[str, tuple[int, ...]]:
        return _per_axis(self.splits)

    @property
    def loop_order(self) -> tuple[str, ...]:
        return tuple(s.data for s in self.order.data)

    @property
    def parallel_loops(self) -> frozenset[str]:
        return frozenset(s.data for s in self.parallel.data)

    @property
    def unrolled_loops(self) -> frozenset[str]:
        return frozenset(s.data for s in self.unroll.data)

    @property
    def vector(self) -> tuple[str, int] | None:
        if not self.vectorize.data:
            return None
        loop, width = self.vectorize.data
        assert isinstance(loop, StringAttr) and isinstance(width, IntAttr), self.vectorize
        return loop.data, width.data

    @property
    def packed(self) -> tuple[int, ...]:
        return tuple(i.data for i in self.pack.data)

    @property
    def fusion(self) -> tuple[int, int, bool, bool] | None:
        """(group id, shared loops `at`, feeds, internal), or None outside groups."""
        if not self.group.data:
            return None
        gid, at, feeds, internal = (v.data for v in self.group.data)
        return gid, at, bool(feeds), bool(internal)

    @property
    def fma(self) -> bool:
        return bool(self.contract.data)

    @property
    def epilogue(self) -> int:
        """How many of the computes right after this one run at its register tile."""
        return self.epilogue_count.data

    def replaced(self, **changes: Unpack[ScheduleFields]) -> ScheduleAttr:
        """This schedule with some clauses changed (constructor keywords)."""
        fields: ScheduleFields = {
            "tiles": self.tile_sizes,
            "order": self.loop_order,
            "parallel": sorted(self.parallel_loops),
            "unroll": sorted(self.unrolled_loops),
            "vectorize": self.vector,
            "pack": self.packed,
            "group": self.fusion,
            "fma": self.fma,
            "epilogue": self.epilogue,
            "split": self.split_points,
        }
        fields.update(changes)
        return ScheduleAttr(**fields)

    def with_group(self, group: tuple[int, int, bool, bool] | None) -> ScheduleAttr:
        return self.replaced(group=group)

    # -- structure ------------------------------------------------------------------------

    def loops(self, domain: Sequence[int], reductions: Sequence[int]) -> list[Loop]:
        """The loops of a compute with output extents `domain` and reduction extents
        `reductions`, in schedule order (call `check` first)."""
        tiles = self.tile_sizes
        by_name: dict[str, Loop] = {}
        extents = [*domain, *reductions]
        for axis, extent in zip(axis_names(len(domain), len(reductions)), extents, strict=True):
            factors = tiles.get(axis, ())
            if not factors:
                by_name[axis] = Loop(axis, axis, 0, 1, extent)
                continue
            blocks = [extent, *factors]
            for level in range(len(blocks)):
                step = blocks[level + 1] if level + 1 < len(blocks) else 1
                name = f"{axis}.{level}"
                by_name[name] = Loop(name, axis, level, step, blocks[level])
        order = self.loop_order or tuple(by_name)
        return [by_name[n] for n in order]

    def check(self, domain: Sequence[int], reductions: Sequence[int]) -> str | None:
        """Why this schedule does not fit a compute of these extents, or None."""
        axes = axis_names(len(domain), len(reductions))
        tiles = self.tile_sizes
        for axis, factors in tiles.items():
            if axis not in axes:
                return f"tile: no axis {axis} (the compute has {', '.join(axes) or 'none'})"
            if any(f < 1 for f in factors):
                return f"tile: sizes of {axis} must be positive"
            if any(a % b for a, b in zip(factors, factors[1:])):
                return f"tile: each size of {axis} must divide the one before it"
        names = [
            f"{a}.{lv}" if tiles.get(a) else a
            for a in axes
            for lv in range(len(tiles.get(a, ())) + 1)
        ]
        order = self.loop_order or tuple(names)
        if sorted(order) != sorted(names):
            return f"interchange: expected a permutation of [{', '.join(names)}]"
        loops = self.loops(domain, reductions)
        for axis in axes:
            levels = [lp.level for lp in loops if lp.axis == axis]
            if levels != sorted(levels):
                return f"interchange: the loops of {axis} must keep their level order"
        reduction_order = [lp.name for lp in loops if lp.is_reduction]
        if reduction_order != [n for n in names if n.startswith("r")]:
            return "interchange: reduction loops must keep their order (it fixes the fold order)"
        return self._check_marks(loops)

    def _check_marks(self, loops: list[Loop]) -> str | None:
        by_name = {lp.name: lp for lp in loops}
        for clause, marked in (("parallel", self.parallel_loops), ("unroll", self.unrolled_loops)):
            for name in sorted(marked):
                if name not in by_name:
                    return f"{clause}: no loop {name}"
        for name in sorted(self.parallel_loops):
            if by_name[name].is_reduction:
                return f"parallel: {name} is a reduction loop"
        vector = self.vector
        if vector is not None and (vector[0] not in by_name or vector[1] < 1):
            return f"vectorize: no loop {vector[0]} or a width below 1"
        if self.fusion is not None and self.fusion[1] < 0:
            return "group: `at` must not be negative"
        if self.epilogue < 0:
            return "epilogue: the count must not be negative"
        if self.epilogue and self.fusion is not None:
            return "epilogue: not inside a fusion group"
        return self._check_splits(by_name)

    def _check_splits(self, by_name: dict[str, Loop]) -> str | None:
        marked = self.parallel_loops | self.unrolled_loops | {(self.vector or ("",))[0]}
        for axis, points in self.split_points.items():
            loop = by_name.get(axis)
            if loop is None or loop.is_reduction:
                return f"split: no untiled output loop {axis}"
            if axis in marked or self.fusion is not None:
                return f"split: {axis} is unrolled, vectorized or parallel, or in a group"
            if list(points) != sorted(set(points)) or not 0 < points[0] <= points[-1] < loop.block:
                return f"split: the points of {axis} must increase within (0, {loop.block})"
        return None

    # -- syntax ---------------------------------------------------------------------------

    def print_parameters(self, printer: Printer) -> None:
        clauses: list[str] = []
        tiles = self.tile_sizes
        if tiles:
            body = ", ".join(f"{a} = [{', '.join(map(str, fs))}]" for a, fs in tiles.items())
            clauses.append(f"tile [{body}]")
        for clause, names in (
            ("interchange", self.loop_order),
            ("parallel", sorted(self.parallel_loops)),
            ("unroll", sorted(self.unrolled_loops)),
        ):
            if names:
                clauses.append(f"{clause} [{', '.join(names)}]")
        if self.fma:
            clauses.append("fma")
        if self.vector is not None:
            clauses.append(f"vectorize {self.vector[0]} x {self.vector[1]}")
        if self.packed:
            clauses.append(f"pack [{', '.join(map(str, self.packed))}]")
        if self.fusion is not None:
            gid, at, feeds, internal = self.fusion
            clauses.append(
                f"group {gid} at {at}"
                + (" feeds" if feeds else "")
                + (" internal" if internal else "")
            )
        if self.epilogue:
            clauses.append(f"epilogue {self.epilogue}")
        splits = self.split_points
        if splits:
            body = ", ".join(f"{a} = [{', '.join(map(str, ps))}]" for a, ps in splits.items())
            clauses.append(f"split [{body}]")
        printer.print_string("<" + ", ".join(clauses) + ">")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        fields: dict[str, object] = {}
        parser.parse_punctuation("<")
        if parser.parse_optional_punctuation(">") is None:
            while True:
                clause = parser.parse_keyword_in(_CLAUSES, " in a schedule")
                if order_keyword(clause) in fields:
                    parser.raise_error(f"schedule: clause '{clause}' given twice")
                fields[order_keyword(clause)] = _parse_clause(parser, clause)
                if parser.parse_optional_punctuation(",") is None:
                    break
            parser.parse_punctuation(">")
        attr = ScheduleAttr(**fields)  # type: ignore[arg-type]
        return attr.parameters


def _parse_clause(parser: AttrParser, clause: str) -> object:
    square = parser.Delimiter.SQUARE
    if clause in ("tile", "split"):

        def entry() -> tuple[str, list[int]]:
            axis = parser.parse_identifier("an axis name (d0, r0, ...)")
            parser.parse_punctuation("=")
            sizes = parser.parse_comma_separated_list(square, lambda: parser.parse_integer(False))
            return axis, sizes

        return dict(parser.parse_comma_separated_list(square, entry))
    if clause in ("interchange", "parallel", "unroll"):
        return parser.parse_comma_separated_list(square, parser.parse_identifier)
    if clause == "fma":
        return True
    if clause == "vectorize":
        loop = parser.parse_identifier("a loop name")
        parser.parse_keyword("x")
        return loop, parser.parse_integer(False, False)
    if clause == "pack":
        return parser.parse_comma_separated_list(square, lambda: parser.parse_integer(False, False))
    if clause == "epilogue":
        return parser.parse_integer(False, False)
    gid = parser.parse_integer(False, False)
    parser.parse_keyword("at")
    at = parser.parse_integer(False, False)
    feeds = parser.parse_optional_keyword("feeds") is not None
    internal = parser.parse_optional_keyword("internal") is not None
    return gid, at, feeds, internal


def _per_axis(table: ArrayAttr[ArrayAttr[Attribute]]) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    for entry in table.data:
        axis, *values = entry.data
        out[axis.data] = tuple(v.data for v in values)  # type: ignore[attr-defined]
    return out


def order_keyword(clause: str) -> str:
    """The constructor keyword of a clause (`interchange` is the loop `order`)."""
    return {"interchange": "order", "tile": "tiles"}.get(clause, clause)


Schedule = Dialect("schedule", [], [ScheduleAttr])

__all__ = ["Loop", "Schedule", "ScheduleAttr", "VerifyException", "axis_names"]
