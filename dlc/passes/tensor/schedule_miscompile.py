"""A test-only fault: the environment variable `DLC_TEST_MISCOMPILE=FILE:LINE` makes the
`schedule` pass compute the nests that came from that source line wrongly.

`dlc-bisect`'s tests plant it to check that the bisector finds the kernel by name; it is
not a feature. Each float `tensor.compute` whose location is `FILE:LINE` (the file's
base name) yields `v · (1 + 2⁻⁶) + 2⁻⁶` instead of `v`: an error of about 1.6% that no
tolerance accepts. Compiles with it set bypass the compile cache (`dlc.api`), so no
planted fault outlives the variable. It acts only where the schedule pass runs
(opt_level >= 1): at opt_level=0 the fault disappears, like a scheduling bug would.
"""

from __future__ import annotations

import os

from xdsl.dialects import arith
from xdsl.dialects.builtin import Float32Type, Float64Type, FloatAttr

from dlc.diagnostics import get_loc
from dlc.dialects import tensor

MISCOMPILE_VARIABLE = "DLC_TEST_MISCOMPILE"


def planted_line() -> str:
    """`FILE:LINE` of the nests to miscompile, or "" (the variable unset)."""
    return os.environ.get(MISCOMPILE_VARIABLE, "").strip()


def miscompile(compute: tensor.ComputeOp, where: str) -> bool:
    """Make `compute` wrong when it came from `where` (`FILE:LINE`); whether it did."""
    loc = get_loc(compute)
    if loc is None or f"{os.path.basename(loc.filename)}:{loc.line}" != where:
        return False
    yielded = compute.body.block.last_op
    if not isinstance(yielded, tensor.YieldOp):
        return False
    value = yielded.value
    if not isinstance(value.type, Float32Type | Float64Type):
        return False
    step = arith.ConstantOp(FloatAttr(2.0**-6, value.type))
    factor = arith.ConstantOp(FloatAttr(1 + 2.0**-6, value.type))
    scaled = arith.MulfOp(value, factor)
    shifted = arith.AddfOp(scaled, step)
    compute.body.block.insert_ops_before([step, factor, scaled, shifted], yielded)
    yielded.operands = [shifted.result]
    return True
