"""NumPy's type promotion for the importer: onnx's reference implementation computes
with NumPy, so where an ONNX operator mixes types (an i32 accumulator times an f32
scale) the importer casts to the type NumPy would compute in."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import SSAValue

from dlc.dialects.graph_elementwise import DataTypeCastOp
from dlc.dtypes import NATIVE_DTYPES, numpy_dtype
from dlc.onnx.emitter import Emitter, ImportProblem, tensor_type

_BY_NUMPY = {numpy_dtype(dt): dt for dt in NATIVE_DTYPES}


def cast(e: Emitter, x: SSAValue, dt: str) -> SSAValue:
    """x as `dt` (x itself when it has that type)."""
    if tensor_type(x).dt == dt:
        return x
    return e.op(DataTypeCastOp, [x], dtype=StringAttr(dt))


def promoted(*dts: str, divide: bool = False) -> str:
    """NumPy's result type of an operation on arrays of `dts` (true division of
    integers: f64)."""
    try:
        result = np.result_type(*(numpy_dtype(dt) for dt in dts))
    except TypeError:
        raise ImportProblem(f"no common type of {', '.join(dts)} (as NumPy)") from None
    if divide and result.kind in "iu":
        result = np.dtype(np.float64)
    return _BY_NUMPY[result]
