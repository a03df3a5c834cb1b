"""The trait that attaches canonicalization patterns to graph ops.

`GraphCanonicalization()` in an op's `traits` makes xDSL's canonicalization driver ask
`dlc.passes.canonicalization_patterns.PATTERNS[op class]` for the op's patterns (loaded
lazily: the patterns import the op classes).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation
from xdsl.pattern_rewriter import RewritePattern
from xdsl.traits import HasCanonicalizationPatternsTrait


@dataclass(frozen=True)
class GraphCanonicalization(HasCanonicalizationPatternsTrait):
    """Canonical rewrites of a graph op, looked up by op class."""

    def get_patterns(self, op: type[Operation]) -> tuple[RewritePattern, ...]:
        from dlc.passes.canonicalization_patterns import PATTERNS

        return PATTERNS.get(op, ())

    @classmethod
    def get_canonicalization_patterns(cls) -> tuple[RewritePattern, ...]:
        return ()
