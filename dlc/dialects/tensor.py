"""The `tensor` dialect: tensors defined element by element (TVM `compute` style).

Values are whole tensors of type `!graph.tensor<...>` (rank 0 = scalar). The core op is
`tensor.compute`: an iteration domain (the result shape), optional reduction axes, and a
scalar body that reads its operands only through `tensor.read` at index expressions.
That keeps every compute fusion-ready: inlining a producer into a consumer replaces a
`tensor.read` of the producer by the producer's body with its index variables bound to
the read's index expressions.

Body conventions: the block arguments are `i64` index variables (output dimensions,
then reduction dimensions); scalars are builtin types (`f32`, `f64`, `i8`..`i64`, `i1`
for bool); arithmetic is xDSL `arith`/`math`; the block ends with `tensor.yield`.

    tensor.func @transpose_sum(%x: !graph.tensor<3x2xf32>) -> !graph.tensor<2xf32> {
      %t = tensor.compute(%x) {
      ^bb0(%i: i64, %j: i64):
        %v = tensor.read %x[%j, %i] : !graph.tensor<3x2xf32>
        tensor.yield %v : f32
      } : (!graph.tensor<3x2xf32>) -> !graph.tensor<2x3xf32>
      %s = tensor.compute(%t) reduce [3] by "add" init 0.000000e+00 : f32
               schedule #schedule.nest<parallel [d0]> {
      ^bb0(%i: i64, %k: i64):
        %v = tensor.read %t[%i, %k] : !graph.tensor<2x3xf32>
        tensor.yield %v : f32
      } : (!graph.tensor<2x3xf32>) -> !graph.tensor<2xf32>
      tensor.return %s : !graph.tensor<2xf32>
    }

With a reduction (`reduce [extents] by "combinator"`), the body yields one element per
reduction point and the result element is `fold(init, elements...)` in increasing
row-major order of the reduction indices; `init` is the `init` operand (a rank-0 tensor,
`init %c : !graph.tensor<f32>`) or the `init_value` property (an `IntegerAttr` or
`FloatAttr` of the element type, `init 0.0 : f32`). Combinators are DLVM binary opcodes
(`add`, `multiply`, `min`, `max`, `and`, `or`, ...) or functions (`"@f"`).

The ops live by family in `tensor_control.py` (functions and control flow),
`tensor_compute.py` (computes, reads, constants, scans) and `tensor_memory.py`; this
module re-exports them. Its mnemonic is `tensor`; dlc never loads xDSL's `tensor`
dialect.
"""

from __future__ import annotations

from xdsl.ir import Dialect

from dlc.dialects.tensor_compute import ComputeOp, ConstantOp, ReadOp, ScanOp, YieldOp
from dlc.dialects.tensor_control import BrOp, CallOp, CondBrOp, FuncOp, ReturnOp, TrapOp
from dlc.dialects.tensor_memory import MEMORY_OPS
from dlc.dialects.tensor_types import SUPPORTED_DTYPES, OpVerifyException, scalar_type

Tensor = Dialect(
    "tensor",
    [
        FuncOp,
        ReturnOp,
        BrOp,
        CondBrOp,
        CallOp,
        TrapOp,
        ConstantOp,
        ComputeOp,
        ReadOp,
        ScanOp,
        YieldOp,
        *MEMORY_OPS,
    ],
    [],
)

__all__ = [
    "BrOp",
    "CallOp",
    "CondBrOp",
    "ComputeOp",
    "ConstantOp",
    "FuncOp",
    "OpVerifyException",
    "ReadOp",
    "ReturnOp",
    "SUPPORTED_DTYPES",
    "ScanOp",
    "Tensor",
    "TrapOp",
    "YieldOp",
    "scalar_type",
]
