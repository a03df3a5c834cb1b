"""Loop-nest features of a scheduled nest, the cost model's input (AutoTVM's itervar
and touched-bytes features, in a fixed-length vector).

Plain floats stored with each record (so a model trains without the IR); format-1
records get the clause features appended by `training_features`. The feature list:
docs/design/tuner.md.
"""

from __future__ import annotations

import math

from dlc.dialects.schedule import Loop, ScheduleAttr, axis_names
from dlc.passes.tensor.schedule_records import DEFAULT_SCHEDULE, Record
from dlc.tuner.space import NestInfo

LEVELS = 6
READS = 3


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else -1.0


def _iterations(lp: Loop) -> int:
    return -(-lp.block // lp.step)


def _footprint(read: tuple[tuple[int, ...], ...], covered: list[int]) -> int:
    """Elements of one read touched when the axes cover `covered`."""
    elements = 1
    for axes in read:
        elements *= 1 + sum(covered[a] - 1 for a in axes)
    return elements


def features(info: NestInfo, schedule: ScheduleAttr) -> list[float]:
    """The feature vector of `info` run with `schedule` (module docstring)."""
    loops = schedule.loops(info.domain, info.reductions)
    axes = axis_names(len(info.domain), len(info.reductions))
    position = {name: i for i, name in enumerate(axes)}
    unrolled = schedule.unrolled_loops
    vector = schedule.vector
    tile = [lp for lp in loops if lp.name in unrolled]
    parallel = [lp for lp in loops if lp.name in schedule.parallel_loops]
    k_blocks = math.prod(_iterations(lp) for lp in loops if lp.is_reduction and lp.level == 0)
    out = [
        _log2(info.flops),
        _log2(math.prod(info.domain)),
        _log2(math.prod(info.reductions)),
        _log2(math.prod(_iterations(lp) for lp in tile)),
        float(vector[1] if vector else 0),
        float(schedule.fma),
        _log2(_iterations(parallel[0])) if parallel else 0.0,
        _log2(k_blocks if any(lp.level > 0 and lp.is_reduction for lp in loops) else 1),
    ]
    for depth in range(LEVELS):
        if depth >= len(loops):
            out += [0.0] * 5
            continue
        lp = loops[-1 - depth]
        out += [
            _log2(_iterations(lp)),
            float(lp.is_reduction),
            float(lp.name in unrolled),
            float(lp.name in schedule.parallel_loops),
            float(vector is not None and vector[0] == lp.name),
        ]
    out += _level_features(info, loops, position)
    out += _read_features(info, loops, tile, position)
    return out + clause_features(schedule)


def clause_features(schedule: ScheduleAttr) -> list[float]:
    """`pack` and `epilogue` (module docstring)."""
    return [float(bool(schedule.packed)), float(schedule.epilogue)]


def _covered_axes(loops: list[Loop], start: int, position: dict[str, int]) -> list[int]:
    """Per axis, the range the loops from `start` inwards cover (1: none of them)."""
    covered = [1] * len(position)
    for lp in loops[start:]:
        a = position[lp.axis]
        covered[a] = max(covered[a], lp.block)
    return covered


def _level_features(info: NestInfo, loops: list[Loop], position: dict[str, int]) -> list[float]:
    out: list[float] = []
    output_read = tuple((a,) for a in range(len(info.domain)))
    for depth in range(LEVELS):
        start = max(0, len(loops) - 1 - depth)
        covered = _covered_axes(loops, start, position)
        touched = sum(_footprint(r, covered) for r in (*info.reads, output_read))
        points = math.prod(covered)
        out += [_log2(touched * info.element_bytes), _log2(2 * points / max(1, touched))]
    return out


def _read_features(
    info: NestInfo, loops: list[Loop], tile: list[Loop], position: dict[str, int]
) -> list[float]:
    out: list[float] = []
    inner = next((lp for lp in reversed(loops) if lp.name not in {t.name for t in tile}), None)
    first_tile = min((loops.index(t) for t in tile), default=len(loops) - 1)
    covered = _covered_axes(loops, first_tile, position)
    for n in range(READS):
        if n >= len(info.reads) or inner is None:
            out += [0.0] * 3
            continue
        read = info.reads[n]
        a = position[inner.axis]
        contiguous = bool(read) and a in read[-1]
        moved = sum(a in axes for axes in read)
        reuse = math.prod(covered) / max(1, _footprint(read, covered))
        out += [float(contiguous), float(moved), _log2(reuse)]
    return out


FORMAT1_FEATURE_COUNT = 8 + 5 * LEVELS + 2 * LEVELS + 3 * READS
FEATURE_COUNT = FORMAT1_FEATURE_COUNT + 2


def training_features(record: Record) -> list[float] | None:
    """The features a model trains on for `record` (a format-1 nest record's extended,
    module docstring), or None when it has none to offer."""
    if not record.features or record.schedule == DEFAULT_SCHEDULE:
        return None
    if record.format >= 2 or len(record.features) != FORMAT1_FEATURE_COUNT:
        return record.features
    from dlc.passes.tensor.schedule_tuned import parse_schedule

    try:
        return [*record.features, *clause_features(parse_schedule(record.schedule))]
    except ValueError:
        return None
