"""Transposes read through for `lower-graph-to-loop{optimize=true}`: a permutation other
than a reversal (ONNX's `Transpose` with `perm` [0, 2, 1, 3]) arrives as a `transpose`,
a `shape_cast` that splits its result's axes, and a second `transpose`. The first two
are not materialized when the second then copies rows of the first's operand (its last
axis, unsplit, becomes the result's last): one copy of rows instead of two strided
ones. (A strided read through, such as a key transpose's [0, 1, 3, 2], measured slower
than the two blocked copies, and is left to them.)

With `y = transpose(x)` and `z = shapeCast(y)` splitting each axis `a` of `y` into the
axes `groups[a]` of `z`, element `z[i]` is `y[j]` with `j[a]` the row-major index of
`i` over `groups[a]`, and `y[j]` is `x[reversed j]`: sums and products of indices, no
division. The view is used only where `y` and `z` have no other use.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.ir import Block, SSAValue

from dlc.dialects import graph_dims
from dlc.dialects.graph_tensor import ShapeCastOp, TransposeOp
from dlc.dialects.graph_types import TensorType
from dlc.lowering.graph_to_loop.nests import NestEmitter


@dataclass(frozen=True)
class View:
    """`z` read through: the tensor read (`x`) and, for each axis of `y`, the axes of
    `z` it was split into (module docstring)."""

    source: SSAValue
    groups: tuple[tuple[int, ...], ...]

    def walks_rows(self, z: TensorType) -> bool:
        """Whether `z`'s first axis is the source's last, unsplit: a transpose of `z`
        then reads the source's rows along its own last axis, one after the other."""
        first = self.groups[0] if self.groups else ()
        return first[:1] == (0,) and z.dims[0] != 1 and all(z.dims[a] == 1 for a in first[1:])


def transposed_views(block: Block) -> tuple[dict[SSAValue, View], set[SSAValue]]:
    """The operands of `block`'s transposes read through (`View`s), and the values
    neither materialized nor read (the first transposes' results)."""
    views: dict[SSAValue, View] = {}
    hidden: set[SSAValue] = set()
    for op in block.ops:
        if not isinstance(op, TransposeOp) or not op.operand.has_one_use():
            continue
        z = op.operand
        cast = z.owner if isinstance(z.owner, ShapeCastOp) else None
        y = cast.operand if cast is not None else z
        first = y.owner
        if not isinstance(first, TransposeOp) or not y.has_one_use():
            continue
        yt, zt = y.type, z.type
        assert isinstance(yt, TensorType) and isinstance(zt, TensorType)
        groups = split_axes(yt.dims, zt.dims)
        if groups is None or not View(first.operand, groups).walks_rows(zt):
            continue
        views[z] = View(first.operand, groups)
        if cast is not None:
            hidden.add(y)
    return views, hidden


def split_axes(
    merged: tuple[int | str, ...], split: tuple[int | str, ...]
) -> tuple[tuple[int, ...], ...] | None:
    """For each axis of `merged`, the consecutive axes of `split` whose extents multiply
    to its extent (extents of 1 go with the axis after them; none for an extent of 1),
    or None when `split` does not only split `merged`'s axes."""
    groups: list[tuple[int, ...]] = []
    at = 0
    for d in merged:
        group: list[int] = []
        if d != 1:
            while at < len(split) and graph_dims.multiply([split[a] for a in group]) != d:
                group.append(at)
                at += 1
            if graph_dims.multiply([split[a] for a in group]) != d:
                return None
        groups.append(tuple(group))
    if any(split[a] != 1 for a in range(at, len(split))):
        return None
    return tuple(groups)


def source_indices(
    nest: NestEmitter, view: View, dims: tuple[int | str, ...], ivs: list[SSAValue]
) -> list[SSAValue]:
    """The indices in `view.source` of the element of `z` (dimensions `dims`) at `ivs`."""
    merged: list[SSAValue] = []
    for group in view.groups:
        index = ivs[group[0]] if group else nest.zero
        for a in group[1:]:
            index = nest.emit(arith.MuliOp(index, nest.extent(dims[a])))
            index = nest.emit(arith.AddiOp(index, ivs[a]))
        merged.append(index)
    return merged[::-1]
