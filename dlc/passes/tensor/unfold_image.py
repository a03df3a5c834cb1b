"""The image of an unfolded convolution (dlc/passes/tensor/unfold_convolutions.py) whose
product's rows are the output channels: `flat[n, o, p]` holds the image's bytes
(`p = oh·OW + ow`), so the image is `flat` seen as (N, O, OH, OW), a `tensor.bitcast`,
not a copy. The element-wise computes after it (bias, folded batch norm, activation,
a residual add) are then computed over the product's own domain (N, O, OH·OW): each
reads the image (or a tensor of its shape that is itself such a view) at its own
point, and the rest (a per-channel bias, a literal) at indices without `oh`, `ow`.
Their chain then fuses into one compute reading `flat` at the product's point, which
the `schedule` pass makes the product's epilogue (dlc/passes/tensor/schedule_epilogue.py):
computed on the register tile's accumulators, vectorized along the pixels, instead of
a nest of its own over the image's short rows.

The same scalar expressions run in the same order on the same values: the results
are bit-identical.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

from xdsl.builder import Builder, InsertPoint
from xdsl.dialects.builtin import i64
from xdsl.ir import Block, Operation, SSAValue

from dlc.diagnostics import copy_loc
from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType
from dlc.dialects.tensor_groups import uses_of
from dlc.dialects.tensor_memory import BitCastOp


def _flat_view(value: SSAValue, dims: tuple[int, ...]) -> SSAValue | None:
    """The (N, O, P) tensor `value` (of the image's shape) is a bitcast of, else None."""
    owner = value.owner
    if not isinstance(owner, BitCastOp):
        return None
    source = owner.source.type
    return owner.source if isinstance(source, TensorType) and source.dims == dims else None


def _at_pixel(read: tensor.ReadOp, args: Sequence[SSAValue], known: Container[SSAValue]) -> bool:
    """`read` is of a 4-D tensor at (i, j, oh, ow) with i, j known without oh, ow
    (the batch and channel, or a constant 0 where the extent is 1)."""
    indices = list(read.indices)
    return (
        len(indices) == 4 and indices[2:] == list(args[2:]) and all(i in known for i in indices[:2])
    )


def _flattens(op: tensor.ComputeOp, flat: tuple[int, ...]) -> bool:
    """Whether `op`'s body can run over (n, o, p): `oh` and `ow` only as the last
    indices of reads at the pixel of tensors viewing an (N, O, P) one."""
    args = op.body.block.args
    known: set[SSAValue] = set(args[:2])
    for inner in op.body.block.ops:
        if isinstance(inner, tensor.ReadOp) and _at_pixel(inner, args, known):
            if _flat_view(inner.tensor, flat) is None:
                return False
        elif any(v not in known and v.owner is op.body.block for v in inner.operands):
            return False  # an index or value from `oh` or `ow`
        known.update(inner.results)
    return True


def _flat_body(op: tensor.ComputeOp, flat: tuple[int, ...]) -> tuple[Block, list[SSAValue]]:
    """`op`'s body over (n, o, p) (`_flattens`), and the tensors it reads."""
    old = op.body.block.args
    block = Block(arg_types=[i64] * 3)
    b = Builder(InsertPoint.at_end(block))
    mapping: dict[SSAValue, SSAValue] = {old[0]: block.args[0], old[1]: block.args[1]}
    inputs: list[SSAValue] = []
    for inner in op.body.block.ops:
        new: Operation
        if isinstance(inner, tensor.ReadOp) and _at_pixel(inner, old, mapping):
            source = _flat_view(inner.tensor, flat)
            assert source is not None, "checked by _flattens"
            n, o = (mapping[i] for i in inner.indices[:2])
            new = tensor.ReadOp(source, [n, o, block.args[2]])
        else:
            new = inner.clone(value_mapper=mapping)
        if isinstance(new, tensor.ReadOp) and new.tensor not in inputs:
            inputs.append(new.tensor)
        b.insert(new)
        mapping.update(zip(inner.results, new.results, strict=True))
    return block, inputs


def flatten_image(image: BitCastOp) -> None:
    """Compute the element-wise computes after the image `image` (a bitcast of the
    product's (N, O, P) result) over (N, O, P) (module docstring), and those after
    each of them in turn, as far as each qualifies: every read of its at the pixel is
    of such a view (a SiLU's `x * sigmoid(x)` reads the image and the sigmoid's view)."""
    work = [image]
    while work:
        image = work.pop()
        uses = uses_of(image.result)
        if uses.blocked:
            continue
        for op in list(uses.reads):
            if op.parent is not None and _qualifies(op, image):
                work.append(_flatten(op, image))


def _qualifies(op: tensor.ComputeOp, image: BitCastOp) -> bool:
    """`op` is element-wise over the image's shape and `_flattens`."""
    image_type, flat_type = image.result.type, image.source.type
    assert isinstance(image_type, TensorType) and isinstance(flat_type, TensorType)
    if op.combinator is not None or op.result.type != image_type:
        return False
    return op.domain == image_type.dims and _flattens(op, flat_type.dims)


def _flatten(op: tensor.ComputeOp, image: BitCastOp) -> BitCastOp:
    """Replace `op` by its compute over (N, O, P) and a view of that as the image."""
    flat_type = image.source.type
    assert isinstance(flat_type, TensorType)
    block, inputs = _flat_body(op, flat_type.dims)
    b = Builder(InsertPoint.before(op))
    flat = b.insert(tensor.ComputeOp(inputs, flat_type, block))
    view = b.insert(BitCastOp(flat.result, image.result.type))
    copy_loc(op, flat, view)
    op.result.replace_all_uses_with(view.result)
    views = {r.tensor.owner for r in op.body.block.ops if isinstance(r, tensor.ReadOp)}
    op.detach()
    op.erase()
    for old in views:  # the views it read through, when nothing else reads them
        if isinstance(old, BitCastOp) and not old.result.uses:
            old.detach()
            old.erase()
    return view
