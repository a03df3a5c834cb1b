"""What a loop nest was made from, for the profiler (`dlc.compile(..., profile=True)`).

Two side tables that follow ops down the levels as source locations do
(`dlc.diagnostics`), so that no IR changes for them: the `schedule` pass marks the
computes whose schedule a tuning record gave (`mark_tuned`), and `lower-tensor-to-loop`
records for each top-level op it emits the schedules of the computes it came from and
whether a record applied (`record_nest`). `lower-loop-to-llvm{profile=true}` reads them
(`nest_origin`). Entries vanish with their ops (weak keys).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from xdsl.ir import Operation


@dataclass(frozen=True)
class NestOrigin:
    """The schedules (printed, one per compute) a nest ran with and whether a tuning
    record gave any of them."""

    schedules: tuple[str, ...]
    tuned: bool


_TUNED: weakref.WeakSet[Operation] = weakref.WeakSet()
_NESTS: weakref.WeakKeyDictionary[Operation, NestOrigin] = weakref.WeakKeyDictionary()


def mark_tuned(compute: Operation) -> None:
    """`compute`'s schedule came from a tuning record."""
    _TUNED.add(compute)


def is_tuned(compute: Operation) -> bool:
    return compute in _TUNED


def record_nest(nest: Operation, origin: NestOrigin) -> None:
    _NESTS[nest] = origin


def nest_origin(nest: Operation) -> NestOrigin | None:
    return _NESTS.get(nest)
