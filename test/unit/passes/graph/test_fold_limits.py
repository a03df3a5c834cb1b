"""How large a constant `fold-constants` makes: the default limit, the weight limit of
the folding after the superoptimizer, and no folded broadcast above the default."""

from __future__ import annotations

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

import dlc
from dlc.bind import bind_constants
from dlc.passes.graph.fold_constants import (
    DEFAULT_LIMIT,
    WEIGHT_LIMIT,
    FoldConstantsPass,
    folds_to,
)
from dlc.pipeline import SUPEROPTIMIZER, make_pass

BROADCAST = """module "b"
stage raw

func @f: (<1 x 512 x f32>, <512 x 1 x f32>, <512 x 512 x f32>) -> <512 x 512 x f32> {
'entry(%r: <1 x 512 x f32>, %c: <512 x 1 x f32>, %m: <512 x 512 x f32>):
    %s = add %c: <512 x 1 x f32>, %r: <1 x 512 x f32>
    %t = transpose %m: <512 x 512 x f32>
    %u = add %t: <512 x 512 x f32>, %s: <512 x 512 x f32>
    return %u: <512 x 512 x f32>
}
"""


def test_the_superoptimizers_folding_uses_the_weight_limit() -> None:
    assert SUPEROPTIMIZER[1] == f"fold-constants{{max-elements={WEIGHT_LIMIT}}}"
    assert make_pass(SUPEROPTIMIZER[1]).max_elements == WEIGHT_LIMIT  # type: ignore[attr-defined]
    assert FoldConstantsPass().max_elements == DEFAULT_LIMIT


def test_folds_to() -> None:
    assert folds_to(DEFAULT_LIMIT, [1], DEFAULT_LIMIT)  # a broadcast within the default
    assert not folds_to(DEFAULT_LIMIT + 1, [1], WEIGHT_LIMIT)  # a larger broadcast
    assert folds_to(4 << 20, [1 << 20] * 4, WEIGHT_LIMIT)  # four weights concatenated
    assert not folds_to(8 << 20, [4 << 20] * 2, WEIGHT_LIMIT)  # beyond the weight limit
    assert not folds_to(16, [WEIGHT_LIMIT + 1], WEIGHT_LIMIT)  # an operand beyond it


def test_large_constants_fold_under_the_weight_limit_only() -> None:
    rng = np.random.default_rng(0)
    row = rng.standard_normal((1, 512)).astype(np.float32)
    mat = rng.standard_normal((512, 512)).astype(np.float32)

    def module(text: str = BROADCAST) -> ModuleOp:
        return bind_constants(dlc.parse(text), {"f": {"r": row, "c": row.T.copy(), "m": mat}})

    folded = module()
    FoldConstantsPass().apply(Context(), folded)
    assert "= transpose" in dlc.print_module(folded)  # 262,144 elements > 2^16
    folded = module()
    make_pass(SUPEROPTIMIZER[1]).apply(Context(), folded)
    printed = dlc.print_module(folded)
    # the transpose folds; the outer sum of a column and a row (1,024 elements read,
    # 262,144 made) does not, and so neither does the sum that reads it
    assert "= transpose" not in printed and printed.count("= add") == 2
    folded = module(BROADCAST.replace("add %c: <512 x 1 x f32>", "add %m: <512 x 512 x f32>"))
    make_pass(SUPEROPTIMIZER[1]).apply(Context(), folded)
    assert "= add" not in dlc.print_module(folded)  # a row added to a matrix folds
