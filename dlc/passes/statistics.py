"""Pass statistics: what a pass did, counted on the pass object itself.

A pass that mixes in `PassStatistics` calls `self.count("ops merged", n)` while it
runs; `dlc-opt --pass-statistics` prints `take_statistics()` after each pass, and the
API's pipeline collects them into the compile report (`CompiledModule.pass_statistics`).
Counts live on the pass instance (never in a process-wide table), so two compiles in
two threads never mix their numbers.
"""

from __future__ import annotations


class PassStatistics:
    """Mixin for `ModulePass` classes (frozen dataclasses included) that count events."""

    def count(self, key: str, n: int = 1) -> None:
        """Count `n` more `key` events."""
        stats = self.__dict__.get("_statistics")
        if stats is None:
            stats = {}
            object.__setattr__(self, "_statistics", stats)  # also on frozen dataclasses
        stats[key] = stats.get(key, 0) + n

    def take_statistics(self) -> dict[str, int]:
        """The counts since the last call (insertion order), then reset them."""
        return dict(self.__dict__.pop("_statistics", None) or {})
