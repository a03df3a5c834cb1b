"""dlc's dialects, one module per level.

| level  | dialect  | module        |
|--------|----------|---------------|
| graph  | `graph`  | `graph.py` (+ `graph_*.py` op families and types) |
| tensor | `tensor` | `tensor.py` (+ `tensor_*.py` op families) |
| loop   | `loop`   | `loop.py` (+ `loop_*.py` op families) |
| llvm   | xDSL's `llvm` |           |

Name clash: xDSL also has dialects named `tensor` and `llvm`. dlc's contexts load only
the dialects returned by `get_all_dialects()`, which never include xDSL's `tensor`, so
dlc's tensor-level dialect keeps the mnemonic `tensor` (ops `tensor.compute`, ...).
xDSL's `llvm` dialect is used as is.

The tensor and loop dialects print in custom assembly formats (`tensor.compute(%x) ...`,
`loop.for %i = %lb to %ub step %s ...`; shared pieces in `formats.py`); every op also
reads and prints in MLIR's generic form (`dlc-opt --print-op-generic`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xdsl.ir import Dialect


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    """Names -> factories of every dialect a dlc context may load."""

    def graph() -> Dialect:
        from dlc.dialects.graph import make_graph_dialect

        return make_graph_dialect()

    def tensor() -> Dialect:
        from dlc.dialects.tensor import Tensor

        return Tensor

    def loop() -> Dialect:
        from dlc.dialects.loop import Loop

        return Loop

    def schedule() -> Dialect:
        from dlc.dialects.schedule import Schedule

        return Schedule

    def builtin() -> Dialect:
        from xdsl.dialects.builtin import Builtin

        return Builtin

    def arith() -> Dialect:
        from xdsl.dialects.arith import Arith

        return Arith

    def math() -> Dialect:
        from xdsl.dialects.math import Math

        return Math

    def llvm() -> Dialect:
        from dlc.dialects.llvm_lanes import LLVM  # xDSL's, with fcmp/select on vectors

        return LLVM

    return {
        "builtin": builtin,
        "graph": graph,
        "tensor": tensor,
        "loop": loop,
        "schedule": schedule,
        "arith": arith,
        "math": math,
        "llvm": llvm,
    }
