"""The `loop` dialect: explicit loop nests over buffers (builtin `memref`).

Buffers have static shapes; all index arithmetic is `i64` (no `index` type). Scalar work
uses xDSL's `arith` and `math` dialects. A `loop.func` takes its inputs and then its
outputs as memref block arguments (the caller allocates outputs) and returns nothing.

    loop.func @add(%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>) {
      %c0 = arith.constant 0 : i64
      %c4 = arith.constant 4 : i64
      %c1 = arith.constant 1 : i64
      loop.for %i = %c0 to %c4 step %c1 parallel {
        %a = loop.load %x[%i] : memref<4xf32>
        %b = loop.load %y[%i] : memref<4xf32>
        %s = arith.addf %a, %b : f32
        loop.store %s, %out[%i] : memref<4xf32>
      }
      loop.return
    }

The ops live by family in `loop_func.py` (functions, branches, calls),
`loop_control.py` (`loop.for`, `loop.if`), `loop_buffer.py` (loads, stores, buffers),
`loop_scalar.py` and `loop_memory.py` (raw addresses); this module re-exports them and
holds the dialect.
"""

from __future__ import annotations

from xdsl.ir import Attribute, Dialect

from dlc.dialects.graph_types import NATIVE_DTYPES, dtype_bytes
from dlc.dialects.loop_buffer import (
    BUFFER_OPS,
    AllocOp,
    AllocSizedOp,
    ConstBufferOp,
    ConstCopyOp,
    CopyOp,
    DeallocOp,
    LoadOp,
    StoreOp,
)
from dlc.dialects.loop_control import CONTROL_OPS, ForOp, IfOp, YieldOp
from dlc.dialects.loop_func import (
    FUNC_OPS,
    BrOp,
    CallOp,
    CondBrOp,
    ExternCallOp,
    FuncOp,
    ReturnOp,
    TrapOp,
)
from dlc.dialects.loop_memory import MEMORY_OPS
from dlc.dialects.loop_scalar import SCALAR_OPS, ErfcOp, RemFOp
from dlc.dialects.loop_vector import (
    CMPF_PREDICATES,
    VECTOR_OPS,
    BroadcastOp,
    ShuffleOp,
    VCmpfOp,
    VLoadOp,
    VSelectOp,
    VStoreOp,
)
from dlc.dialects.tensor import scalar_type


def element_bytes(t: Attribute) -> int | None:
    """Bytes of one buffer element of scalar type `t` (f16..f64, i8..i64), else None
    (bool tensors are i8 buffers)."""
    return _ELEMENT_BYTES.get(str(t))


_ELEMENT_BYTES = {str(scalar_type(dt)): dtype_bytes(dt) for dt in NATIVE_DTYPES if dt != "bool"}

ARENA_ALIGN = 64
"""Byte alignment of arena offsets and of every buffer (plan-memory and the lowering)."""
ARENA_OFFSET = "arena_offset"
"""`loop.alloc` attribute set by plan-memory: the buffer's byte offset in the arena."""
ARENA_BYTES = "dlc.arena_bytes"
"""`loop.func` attribute set by plan-memory: the size of the function's arena."""
MIN_LIVE_BYTES = "dlc.min_live_bytes"
"""`loop.func` attribute set by plan-memory: the peak bytes of live intermediates."""

Loop = Dialect(
    "loop", [*MEMORY_OPS, *FUNC_OPS, *CONTROL_OPS, *BUFFER_OPS, *SCALAR_OPS, *VECTOR_OPS], []
)

__all__ = [
    "ARENA_ALIGN",
    "ARENA_BYTES",
    "ARENA_OFFSET",
    "AllocOp",
    "AllocSizedOp",
    "BrOp",
    "BroadcastOp",
    "CallOp",
    "CondBrOp",
    "ConstBufferOp",
    "ConstCopyOp",
    "CopyOp",
    "DeallocOp",
    "ErfcOp",
    "ExternCallOp",
    "ForOp",
    "FuncOp",
    "IfOp",
    "LoadOp",
    "Loop",
    "MIN_LIVE_BYTES",
    "RemFOp",
    "ReturnOp",
    "ShuffleOp",
    "StoreOp",
    "TrapOp",
    "CMPF_PREDICATES",
    "VCmpfOp",
    "VLoadOp",
    "VSelectOp",
    "VStoreOp",
    "YieldOp",
    "element_bytes",
]
