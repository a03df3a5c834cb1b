"""DLVM's data types as plain strings (`f32`, `i8`, `u8`, `bf16`, `bool`, ...): predicates,
widths and their NumPy dtypes. No xDSL here: the warm start of a compiled module (`dlc.runtime.quick`)
uses these without loading the IR classes; `dlc.dialects.graph_types` re-exports them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np

_DTYPE_RE = re.compile(r"f16|f32|f64|bf16|bool|i[1-9][0-9]*|u8|u16|u32|u64")


def is_dtype(name: str) -> bool:
    return _DTYPE_RE.fullmatch(name) is not None


def dtype_is_float(dtype: str) -> bool:
    return dtype in ("f16", "f32", "f64")


def dtype_holds_floats(dtype: str) -> bool:
    """The float types and bf16: their literals are (rounded) real numbers."""
    return dtype_is_float(dtype) or dtype == "bf16"


def dtype_is_int(dtype: str) -> bool:
    """Signed (`iN`) or unsigned (`uN`) integers."""
    return dtype[0] in "iu"


def dtype_is_unsigned(dtype: str) -> bool:
    return dtype[0] == "u"


def dtype_is_bool(dtype: str) -> bool:
    return dtype == "bool"


def dtype_is_numeric(dtype: str) -> bool:
    """Data types arithmetic accepts: not bool, not the storage type bf16."""
    return not dtype_is_bool(dtype) and dtype != "bf16"


def dtype_bits(dtype: str) -> int:
    """Bit width of a data type (bool is 1 bit wide but stored in one byte)."""
    if dtype == "bool":
        return 1
    return int(dtype.lstrip("bfiu"))


def dtype_bytes(dtype: str) -> int:
    """Storage size in bytes: bool takes 1, iN takes the next power of two ≥ N bits."""
    bits = max(8, dtype_bits(dtype))
    size = 1
    while size * 8 < bits:
        size *= 2
    return size


NATIVE_DTYPES = (
    "f16", "f32", "f64", "bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bf16",
)  # fmt: skip
"""The data types code generation supports (tensors of other widths stay interpreted)."""


def numpy_dtype(dtype: str) -> np.dtype:
    """The NumPy dtype of a data type: `iN` (`uN`: `uintN`) takes the narrowest width >= N bits (so
    arithmetic wraps at that width); ValueError above 64 bits."""
    if dtype == "bool":
        return np.dtype(np.bool_)
    if dtype == "bf16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    if dtype_is_float(dtype):
        return np.dtype(f"float{dtype[1:]}")
    bits = dtype_bits(dtype)
    kind = "uint" if dtype_is_unsigned(dtype) else "int"
    for width in (8, 16, 32, 64):
        if bits <= width:
            return np.dtype(f"{kind}{width}")
    raise ValueError(f"{dtype} data type is wider than 64 bits")


class _NumpyDtypes(dict[str, np.dtype]):
    """`numpy_dtype` of each native data type, made on first use: bf16's imports
    ml_dtypes, which takes seconds, so only code that meets a bf16 value pays for it."""

    def __missing__(self, dtype: str) -> np.dtype:
        if dtype not in NATIVE_DTYPES:
            raise KeyError(dtype)
        self[dtype] = value = numpy_dtype(dtype)
        return value


NUMPY_DTYPES: dict[str, np.dtype] = _NumpyDtypes()
"""The NumPy dtype of each of `NATIVE_DTYPES` (test membership on `NATIVE_DTYPES`: this
mapping fills as it is read)."""


def random_values(params: Iterable[tuple[str, Sequence[int]]], seed: int) -> list[np.ndarray]:
    """Seeded random arrays of each (data type, shape) of `params`: standard normal
    floats, integers in [-10, 10], booleans 0 or 1 (the inputs dlc-tune checks and the
    superoptimizer's guard times with)."""
    rng = np.random.default_rng(seed)
    out = []
    for dt, dims in params:
        dtype = numpy_dtype(dt)
        if dtype.kind == "f":
            out.append(np.asarray(rng.standard_normal(dims, dtype=np.float32)).astype(dtype))
        elif dtype.kind == "b":
            out.append(rng.integers(0, 2, size=dims).astype(dtype))
        else:
            out.append(np.asarray(rng.integers(-10, 11, size=dims)).astype(dtype))
    return out


def dtype_base(dtype: str) -> str:
    """'float', 'int' or 'bool': casts stay within one base (DLVM canCast)."""
    if dtype_is_float(dtype) or dtype == "bf16":
        return "float"
    if dtype_is_bool(dtype):
        return "bool"
    return "int"
