"""Search spaces: the schedule knobs of one tunable nest, and the schedule of a point.

A contraction's space is a product of knobs (register tile, K and column blocks, loop
order, vector width, fma, parallel loop, pack, epilogue; for convolutions channels x rows
x columns); `Space.schedule(point)` writes its `#schedule.nest`, and impossible points are
excluded up front. The knobs: docs/design/tuner.md.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType, dtype_bytes
from dlc.dialects.schedule import ScheduleAttr
from dlc.passes.tensor.schedule_conv import conv_schedule, conv_tiles
from dlc.passes.tensor.schedule_epilogue import epilogue_run
from dlc.passes.tensor.schedule_policy import depends_on, float_sum, packed_operand
from dlc.passes.tensor.schedule_records import nest_summary, workload_key
from dlc.target import Target

MAX_TILE_POINTS = 256  # unrolled scalar points of a register tile (code size)
Point = tuple[int, ...]  # one index per knob


@dataclass(frozen=True)
class NestInfo:
    """What features and the report need of a nest, as plain data: its key, a summary,
    extents, element size and, per operand read, the axes each index depends on."""

    key: str
    summary: str
    domain: tuple[int, ...]
    reductions: tuple[int, ...]
    element_bytes: int
    reads: tuple[tuple[tuple[int, ...], ...], ...]

    @property
    def flops(self) -> int:
        """Two per multiply-add."""
        return 2 * math.prod(self.domain) * math.prod(self.reductions)


def nest_info(op: tensor.ComputeOp) -> NestInfo:
    t = op.result.type
    assert isinstance(t, TensorType)
    args = op.body.block.args
    reads = []
    for read in op.body.block.ops:
        if isinstance(read, tensor.ReadOp):
            reads.append(
                tuple(
                    tuple(a for a, arg in enumerate(args) if depends_on(i, {arg}))
                    for i in read.indices
                )
            )
    return NestInfo(
        workload_key(op),
        nest_summary(op),
        tuple(op.domain),
        tuple(op.reduction_extents),
        dtype_bytes(t.dt),
        tuple(reads),
    )


def tunable(op: tensor.ComputeOp) -> bool:
    """A contraction (module docstring) with at least two output points."""
    return float_sum(op) and bool(op.reduction_extents) and math.prod(op.domain) >= 2


@dataclass
class Space:
    """The knobs of one nest and how a point becomes a schedule."""

    info: NestInfo
    kind: str  # "dot" or "conv"
    knobs: dict[str, list[Any]]
    target: Target
    conv: Any = None  # the policy's ConvTiles (channel and row axes) of a convolution
    packed: int | None = None  # the input `pack` packs (B of a matrix product)
    cache: dict[Point, ScheduleAttr | None] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.knobs.values())

    def values(self, point: Point) -> dict[str, Any]:
        return {k: vs[i] for (k, vs), i in zip(self.knobs.items(), point, strict=True)}

    def random_point(self, rng: random.Random) -> Point:
        return tuple(rng.randrange(len(vs)) for vs in self.knobs.values())

    def neighbour(self, point: Point, rng: random.Random) -> Point:
        """`point` with one knob (of more than one value) changed."""
        choices = [i for i, vs in enumerate(self.knobs.values()) if len(vs) > 1]
        if not choices:
            return point
        i = rng.choice(choices)
        n = len(list(self.knobs.values())[i])
        new = list(point)
        new[i] = (point[i] + rng.randrange(1, n)) % n
        return tuple(new)

    @property
    def feature_count(self) -> int:
        from dlc.tuner.features import FEATURE_COUNT

        return FEATURE_COUNT

    def features(self, schedule: Any) -> list[float]:
        """The cost model's features of `schedule` (`features.py`)."""
        from dlc.tuner.features import features

        return features(self.info, schedule)

    def parse(self, text: str) -> Any:
        """The schedule of a record's text (as `schedule` returns them)."""
        from dlc.passes.tensor.schedule_tuned import parse_schedule

        return parse_schedule(text)

    def schedule(self, point: Point) -> ScheduleAttr | None:
        """The schedule of `point`, or None when it is excluded up front."""
        if point not in self.cache:
            self.cache[point] = self._build(self.values(point))
        return self.cache[point]

    def _build(self, v: dict[str, Any]) -> ScheduleAttr | None:
        lanes = v["lanes"]
        pieces = -(-v["nr"] // lanes) if lanes else v["nr"]
        rows = v.get("rows", 1)
        if v["mr"] * v["nr"] * rows > MAX_TILE_POINTS:
            return None
        if lanes and v["mr"] * pieces * rows > self.target.vector_registers - 4:
            return None
        schedule = self._conv(v) if self.kind == "conv" else self._dot(v)
        if schedule is None or schedule.check(self.info.domain, self.info.reductions):
            return None
        schedule = schedule.replaced(fma=v["fma"], epilogue=v.get("epilogue", 0))
        return self._parallel(schedule, v["parallel"])

    def _dot(self, v: dict[str, Any]) -> ScheduleAttr | None:
        domain, k = self.info.domain, self.info.reductions[0]
        rank = len(domain)
        j = f"d{rank - 1}"
        nr, nc = v["nr"], v["nc"] // v["nr"] * v["nr"]
        if nc and nc <= nr:
            return None
        batch = [f"d{a}" for a in range(max(0, rank - 2))]
        blocks = [f"{j}.0"] if nc else []
        panel, lane = (f"{j}.1", f"{j}.2") if nc else (f"{j}.0", f"{j}.1")
        sizes: dict[str, list[int]] = {j: [nc, nr] if nc else [nr]}
        outer, inner = [panel], [lane]
        if rank >= 2:
            i = f"d{rank - 2}"
            sizes[i] = [v["mr"]]
            inner = [f"{i}.1", lane]
            outer = [f"{i}.0", panel] if v["rows_outer"] else [panel, f"{i}.0"]
        elif v["mr"] != 1:
            return None
        k_outer, k_inner = (["r0.0"], "r0.1") if v["kc"] < k else ([], "r0")
        if v["kc"] < k:
            sizes["r0"] = [v["kc"]]
        order = [*batch, *blocks, *k_outer, *outer, k_inner, *inner]
        vector = (lane, v["lanes"]) if v["lanes"] else None
        pack = [self.packed] if v.get("pack") and self.packed is not None else []
        return ScheduleAttr(tiles=sizes, order=order, unroll=inner, vectorize=vector, pack=pack)

    def _conv(self, v: dict[str, Any]) -> ScheduleAttr | None:
        tiles = self.conv
        if v["rows"] > 1 and tiles.row == tiles.channel:
            return None
        changed = type(tiles)(
            tiles.channel, v["mr"], tiles.row, v["rows"], v["nr"], v["lanes"] or 1
        )
        return _conv_schedule(self.info, changed)

    def _parallel(self, schedule: ScheduleAttr, choice: int) -> ScheduleAttr | None:
        loops = schedule.loops(self.info.domain, self.info.reductions)
        candidates = [
            lp.name
            for lp in loops
            if not lp.is_reduction
            and lp.name not in schedule.unrolled_loops
            and -(-lp.block // lp.step) >= 2
        ]
        if choice < 0:
            return schedule.replaced(parallel=[])
        if choice >= len(candidates):
            return None
        return schedule.replaced(parallel=[candidates[choice]])


class _Shape:
    """The little of a ComputeOp that `conv_schedule` reads (rank and reductions)."""

    def __init__(self, info: NestInfo) -> None:
        self.domain = info.domain
        self.reduction_extents = info.reductions


def _conv_schedule(info: NestInfo, tiles: Any) -> ScheduleAttr:
    return conv_schedule(_Shape(info), tiles)  # type: ignore[arg-type]


def make_space(op: tensor.ComputeOp, target: Target) -> Space | None:
    """The search space of a tunable nest (module docstring), or None."""
    if not tunable(op):
        return None
    info = nest_info(op)
    lanes = target.vector_bytes // info.element_bytes
    width = info.domain[-1]
    common: dict[str, list[Any]] = {
        "lanes": [lanes, lanes // 2, 0] if lanes >= 4 else [0],
        "fma": [True, False] if target.fma else [False],
        "parallel": [0, 1, 2, -1],
    }
    if epilogue_run(op):
        common["epilogue"] = [len(epilogue_run(op)), 0]
    columns = sorted(
        {c for c in (lanes // 2, lanes, 2 * lanes, 3 * lanes, 4 * lanes) if c <= width}
    )
    if width <= 4 * lanes:
        columns = sorted({*columns, width})
    columns = columns or [width]
    if len(info.reductions) == 1:
        m = info.domain[-2] if len(info.domain) >= 2 else 1
        k = info.reductions[0]
        knobs: dict[str, list[Any]] = {
            "mr": [r for r in (1, 2, 3, 4, 6, 8, 12, 16) if r <= m] or [1],
            "nr": columns,
            "kc": [k, *(c for c in (64, 128, 256, 512) if c < k)],
            "nc": [0, *(c for c in (128, 256, 512, 1024) if c < width)],
            "rows_outer": [True, False],
            **common,
        }
        packed = packed_operand(op)
        if packed is not None:
            knobs["pack"] = [False, True]
        return Space(info, "dot", knobs, target, packed=packed)
    conv = conv_tiles(op, target)
    if conv is None:
        return None
    channels = info.domain[conv.channel]
    knobs = {
        "mr": [r for r in (1, 2, 3, 4, 6, 8, 12, 16) if r <= channels] or [1],
        "nr": columns,
        "rows": [r for r in (1, 2, 4) if r <= info.domain[conv.row]],
        **common,
    }
    return Space(info, "conv", knobs, target, conv)
