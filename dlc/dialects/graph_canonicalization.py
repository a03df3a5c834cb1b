"""The trait that attaches canonicalization patterns to graph ops.

`GraphCanonicalization()` in an op's `traits` makes xDSL's canonicalization driver ask
`CANONICALIZATION_PATTERNS[op class]` for the op's patterns. The rules themselves live
with the graph passes (`dlc.passes.graph.canonicalization_patterns`, which folds with
the reference interpreter, a package above the dialects) and register here when that
module is imported; the `canonicalize` pass imports it before it runs. Dialects thus
never import passes (the import rules, docs/design/architecture.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from xdsl.ir import Operation
from xdsl.pattern_rewriter import RewritePattern
from xdsl.traits import HasCanonicalizationPatternsTrait

CANONICALIZATION_PATTERNS: dict[type[Operation], tuple[RewritePattern, ...]] = {}
"""op class -> its exact canonicalization patterns (filled by `register_patterns`)."""


def register_patterns(table: Mapping[type[Operation], Sequence[RewritePattern]]) -> None:
    """Attach `table[op class]` to graph ops as their canonicalization patterns."""
    for op, patterns in table.items():
        CANONICALIZATION_PATTERNS[op] = tuple(patterns)


@dataclass(frozen=True)
class GraphCanonicalization(HasCanonicalizationPatternsTrait):
    """Canonical rewrites of a graph op, looked up by op class."""

    def get_patterns(self, op: type[Operation]) -> tuple[RewritePattern, ...]:
        return CANONICALIZATION_PATTERNS.get(op, ())

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        return ()
