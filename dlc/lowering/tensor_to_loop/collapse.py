"""Short rows run as one loop: an element-wise nest whose last two loops cover rows of
fewer than `MAX_ROW` elements, `MIN_POINTS` or more in all (a 7 x 7 or 14 x 14 feature
map), runs them as one loop over rows x columns, the row and column of each point its
quotient and remainder by the row length. Only in scheduled nests (opt_level >= 1).

Every read of such a nest indexes its last two dimensions by exactly the row and the
column of the point, over rows of the same length (or reads neither), so each address
is `base + row * columns + column`, the flat index itself: LLVM folds the quotient and
remainder away and vectorizes the one loop at the full vector width, where a row of 7
took a 4-, a 2- and a 1-lane piece. Rows of a power of two keep their loops: the
quotient and remainder become a shift and a mask whose addresses LLVM does not fold
back into the flat index, so the one loop stayed scalar (SiLU over 256 x 16 x 16:
0.17 ms per call, 15x onnxruntime's, on one Zen 5 core; whole rows of 8 or 16 lanes
vectorize as they are). The points, their values and their order are
those of the two loops: results are bit for bit the same.
"""

from __future__ import annotations

from collections.abc import Sequence, Set

from xdsl.ir import SSAValue

from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType
from dlc.dialects.schedule import Loop

MAX_ROW = 32
"""Rows this long or longer vectorize well as they are."""
MIN_POINTS = 16
"""Fewer points than this (less than one AVX-512 vector) LLVM unrolls whole anyway."""


def collapsed_position(
    op: tensor.ComputeOp, loops: Sequence[Loop], kept: Set[str], grouped: bool
) -> int | None:
    """The position in `loops` of the first of the two loops that run as one, or None:
    `kept` names the loops that must stay (unrolled, split, parallel, vector lanes);
    `grouped`: the nest is part of a fusion group or an epilogue."""
    n = len(op.domain)
    if op.schedule is None:  # not scheduled (opt_level 0): the loops as written
        return None
    if op.combinator is not None or grouped or n < 2 or len(loops) < 2:
        return None
    outer, inner = loops[-2], loops[-1]
    if (outer.name, inner.name) != (f"d{n - 2}", f"d{n - 1}") or {outer.name, inner.name} & kept:
        return None
    rows, columns = op.domain[-2], op.domain[-1]
    if rows < 2 or not 2 <= columns < MAX_ROW or rows * columns < MIN_POINTS:
        return None
    if columns & (columns - 1) == 0:
        return None  # a power of two: LLVM keeps `q & -W` and `q & (W - 1)` apart (scalar)
    args = op.body.block.args
    if not _rows_read_whole(args[n - 2], args[n - 1], (rows, columns)):
        return None
    return len(loops) - 2


def _rows_read_whole(row: SSAValue, column: SSAValue, extents: tuple[int, int]) -> bool:
    """Every use of `row` and `column` is a read whose last two indices are exactly
    (`row`, `column`), of a tensor whose last two extents are `extents`."""
    for use in (*row.uses, *column.uses):
        read = use.operation
        if not isinstance(read, tensor.ReadOp) or len(read.indices) < 2:
            return False
        if read.indices[-2] is not row or read.indices[-1] is not column:
            return False
        t = read.tensor.type
        if not isinstance(t, TensorType) or tuple(t.dims[-2:]) != extents:
            return False
    return True
