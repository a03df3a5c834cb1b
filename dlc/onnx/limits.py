"""Size limits of the ONNX importer: a small model must not make the importer use
gigabytes or minutes (issue 28's import bombs: `ConstantOfShape [2^30]`, `Tile` with
repeats `[10^6]`, `Split(num_outputs=2^30)`, `Resize` by 1e9).

Sizes that come from a model's numbers (shape inputs, repeats, pads, scales) are checked
*before* anything of that size is allocated, evaluated or built, and a refusal is an
`OnnxImportError` naming the node. The limits are options
(`dlc.onnx.load(..., limits=ImportLimits(max_elements=1 << 32))`, `dlc.compile_onnx`
likewise); a model's own initializers are data it carries and are not limited.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dlc.onnx.emitter import ImportProblem

if TYPE_CHECKING:
    from onnx import TensorShapeProto


@dataclass(frozen=True)
class ImportLimits:
    """What one node may make at import time."""

    max_elements: int = 1 << 28
    """Elements of any tensor a node computes (2^28: 1 GiB of f32)."""
    fold_elements: int = 1 << 16
    """Elements of each input and output of import-time folding (fold.py)."""
    max_parts: int = 1 << 12
    """Outputs of one node (Split) and operands one node expands into."""
    max_opset: int = 64
    """The largest default-domain opset a model may import (ONNX is at 2x today)."""
    max_function_nodes: int = 1 << 20
    """Nodes that calls of model-local functions may expand to in all (functions that
    call others twice over grow exponentially with depth)."""


DEFAULT_LIMITS = ImportLimits()


def check_elements(shape: Sequence[int], what: str, limits: ImportLimits) -> None:
    """ImportProblem when a tensor of `shape` has a negative dimension or more than
    `limits.max_elements` elements (counted in exact integers)."""
    dims = [int(d) for d in shape]
    if any(d < 0 for d in dims):
        raise ImportProblem(f"{what}: shape {dims} has a negative dimension")
    count = math.prod(dims)
    if count > limits.max_elements:
        raise ImportProblem(
            f"{what} would have {count} elements (shape {dims}), more than the limit of "
            f"{limits.max_elements} (raise it with ImportLimits(max_elements=...))"
        )


def check_parts(count: int, what: str, limits: ImportLimits) -> None:
    if count > limits.max_parts:
        raise ImportProblem(
            f"{what}: {count} is more than the limit of {limits.max_parts} "
            "(raise it with ImportLimits(max_parts=...))"
        )


def declared_dim(dim: TensorShapeProto.Dimension) -> int | None:
    """A declared dimension of a value's type: its size, or None when unknown (a
    `dim_param`, no value, or any negative value: ONNX exporters write -1 for unknown)."""
    if not dim.HasField("dim_value"):
        return None
    value = int(dim.dim_value)
    return value if value >= 0 else None
