"""Kernels: loop nests that occur more than once are lowered once and called from each place.

Whole models repeat their layers: ResNet-50's 53 convolutions have 23 distinct shapes,
a BERT model is one layer twelve times. `outline_kernels` (run by `lower-loop-to-llvm`
with `outline`, before anything is lowered) finds the top-level `loop.for` nests of a
module's functions that are alike up to the buffers they use: the same ops, properties,
types and constants, the same way of referring to each other's values, and the same
pattern of buffers (by first use). Each group of two or more becomes one
`loop.func @<first caller>.kernel<k>(buffers...)` holding the first nest (moved, with
the constants it uses cloned), and every nest of the group becomes a `loop.call` of it
with its own buffers. The Python that builds LLVM IR, and LLVM itself, then see each
distinct kernel once; `lower-loop-to-llvm` makes the kernels `internal noinline`
functions, which `dlc.runtime.jit_parts` spreads over its worker processes.

A nest is outlined only when everything it uses from outside is a buffer or an
`arith.constant` (no scalar or vector values from the top level; read-only data whose
elements are all equal counts as a constant: LLVM folds loads of it), when it holds no
allocation, call or raw memory op, and when it defines no value used after it. Its
buffers become `noalias` arguments, so a nest that uses two planned buffers sharing
bytes (plan-memory's in-place reuse) stays where it is. The code of a kernel embeds
source locations only in its interrupt polls (the first nest's location) unless
bounds are checked: then each access's location is part of the key, so nests from
different places are not merged and every message names its own place.

The arithmetic of a nest is unchanged (the same ops on the same buffers), so results
are bit-identical with and without outlining.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntAttr, MemRefType, ModuleOp
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from dlc.analysis.walk import walk_ops
from dlc.diagnostics import location_prefix
from dlc.dialects import loop
from dlc.dialects import loop_memory as lm
from dlc.dialects.graph_literal import all_equal
from dlc.dialects.loop_buffer import memref_type
from dlc.dialects.loop_memory import MEMORY_OPS as RAW_MEMORY_OPS

MIN_OPS = 8
"""Nests of fewer loop-level ops stay in place: their code costs less than a call."""

_UNSAFE: tuple[type[Operation], ...] = (
    loop.AllocOp,
    loop.DeallocOp,
    loop.CallOp,
    lm.ScalarCallOp,
    lm.StackAllocOp,
)
_UNSAFE += (loop.ExternCallOp,)
_PLAIN = (loop.ForOp, loop.IfOp, loop.YieldOp)


class _Nest:
    """A top-level nest that may be outlined: its ops (walked), the buffers it receives
    (in first-use order) and the constants it recomputes."""

    def __init__(self, op: loop.ForOp, walked: list[Operation]):
        self.op, self.walked = op, walked
        self.buffers: list[SSAValue] = []
        self.constants: list[SSAValue] = []
        self.call: loop.CallOp | None = None  # the call that replaced it (_kernel)


def outline_kernels(module: ModuleOp, bounds_check: bool = False) -> set[str]:
    """Outline the nests of `module`'s `loop.func`s that occur more than once (module
    docstring); the names of the kernels made."""
    funcs = [f for f in module.body.block.ops if isinstance(f, loop.FuncOp)]
    taken = {f.sym_name.data for f in funcs}
    shapes: dict[tuple[str, ...], list[tuple[loop.FuncOp, loop.ForOp, list[Operation]]]] = {}
    for func in funcs:
        for block in func.body.blocks:
            for op in block.ops:
                if isinstance(op, loop.ForOp):
                    walked = walk_ops(op)
                    shape = tuple(inner.name for inner in walked)  # a cheap first filter
                    shapes.setdefault(shape, []).append((func, op, walked))
    groups: dict[Hashable, list[tuple[loop.FuncOp, _Nest]]] = {}
    for alike in shapes.values():
        if len(alike) < 2 or len(alike[0][2]) < MIN_OPS:
            continue
        for func, op, walked in alike:
            nest = _candidate(op, walked)
            if nest is not None:
                groups.setdefault(_key(nest, bounds_check), []).append((func, nest))
    made: set[str] = set()
    for found in groups.values():
        if len(found) < 2:
            continue
        name = _fresh(f"{found[0][0].sym_name.data}.kernel", taken)
        module.body.block.add_op(_kernel(name, found[0][1]))
        for _, nest in found:
            _replace(nest, name)
        made.add(name)
    return made


def _fresh(stem: str, taken: set[str]) -> str:
    k = 0
    while f"{stem}{k}" in taken:
        k += 1
    taken.add(f"{stem}{k}")
    return f"{stem}{k}"


def _candidate(op: loop.ForOp, walked: list[Operation]) -> _Nest | None:
    """`op` (`walked`: `walk_ops(op)`) as a nest to outline, or None (module docstring:
    what stays)."""
    if any(r.uses for r in op.res):
        return None
    inside = {id(inner) for inner in walked}
    nest = _Nest(op, walked)
    seen: set[SSAValue] = set()
    for inner in walked:
        if isinstance(inner, _UNSAFE) or type(inner) in RAW_MEMORY_OPS:
            return None
        for value in inner.operands:
            if value in seen or _defined_inside(value, inside):
                continue
            seen.add(value)
            if _splat(value) is not None:
                nest.constants.append(value)
            elif isinstance(value.type, MemRefType):
                nest.buffers.append(value)
            elif isinstance(value.owner, arith.ConstantOp):
                nest.constants.append(value)
            else:
                return None
    return None if _overlapping(nest.buffers) else nest


def _splat(value: SSAValue) -> bytes | None:
    """The one element of read-only data whose elements are all equal (a constant
    fill, as onnx's light models have), or None: LLVM folds loads of such data when it
    sees it, so kernels recompute it instead of receiving a pointer."""
    owner = value.owner
    if not isinstance(owner, loop.ConstBufferOp):
        return None
    data = owner.value.data.data
    size = loop.element_bytes(owner.res.type.element_type) or 0
    if not size or len(data) % size:
        return None
    if data and not all_equal(np.frombuffer(data, np.dtype(f"V{size}"))):  # no copy
        return None
    return data[:size]


def _defined_inside(value: SSAValue, inside: set[int]) -> bool:
    owner = value.owner
    op = owner.parent_op() if isinstance(value, BlockArgument) else owner
    return op is not None and id(op) in inside


def _overlapping(buffers: list[SSAValue]) -> bool:
    """Whether two of `buffers` are planned in the arena with bytes in common."""
    spans = []
    for buffer in buffers:
        owner = buffer.owner
        if isinstance(owner, loop.AllocOp) and loop.ARENA_OFFSET in owner.attributes:
            offset = owner.attributes[loop.ARENA_OFFSET]
            assert isinstance(offset, IntAttr), offset
            start = offset.data
            spans.append((start, start + _bytes(owner.res.type)))
    spans.sort()
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:]))


def _bytes(mtype: MemRefType) -> int:
    count = 1
    for dim in mtype.get_shape():
        count *= dim
    return max(1, count * (loop.element_bytes(mtype.element_type) or 8))


def _key(nest: _Nest, bounds_check: bool) -> Hashable:
    """The structure of `nest` up to its buffers (module docstring)."""
    tokens: dict[SSAValue, Hashable] = {}
    for i, buffer in enumerate(nest.buffers):
        tokens[buffer] = ("buffer", i, buffer.type)
    for value in nest.constants:
        owner = value.owner
        fill = owner.value if isinstance(owner, arith.ConstantOp) else _splat(value)
        tokens[value] = ("constant", fill, value.type)
    parts: list[Hashable] = []
    blocks: dict[Block, int] = {}
    for inner in nest.walked:
        operands = tuple(tokens[v] for v in inner.operands)
        if inner.successors:
            parts.append(tuple(blocks.get(b) for b in inner.successors))
        for region in inner.regions:
            for block in region.blocks:
                blocks[block] = len(blocks)
                for arg in block.args:
                    tokens[arg] = (len(tokens), arg.type)
        for result in inner.results:
            tokens[result] = len(tokens)
        located = bounds_check and not isinstance(inner, _PLAIN)
        located = located and not inner.name.startswith(("arith.", "math."))
        parts.append(
            (
                inner.name,
                operands,
                tuple(r.type for r in inner.results),
                tuple(sorted(inner.properties.items())),
                tuple(sorted(inner.attributes.items())),
                tuple(len(region.blocks) for region in inner.regions),
                location_prefix(inner) if located else "",
            )
        )
    return tuple(parts)


def _kernel(name: str, nest: _Nest) -> loop.FuncOp:
    """`loop.func @name(buffers)` holding `nest` (moved) and clones of its constants
    (and constant fills)."""
    types = [memref_type(b, "kernel argument") for b in nest.buffers]
    func = loop.FuncOp(name, types)
    body = func.body.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(nest.buffers, body.args, strict=True))
    for value in nest.constants:
        owner = value.owner
        assert isinstance(owner, Operation), "constants are op results"
        clone = owner.clone()
        body.add_op(clone)
        mapping[value] = clone.results[0]
    for inner in nest.walked:
        if any(v in mapping for v in inner.operands):
            inner.operands = [mapping.get(v, v) for v in inner.operands]
    call = loop.CallOp(name, nest.buffers)
    Rewriter.insert_op(call, InsertPoint.before(nest.op))
    nest.op.detach()
    body.add_op(nest.op)
    body.add_op(loop.ReturnOp())
    nest.call = call
    return func


def _replace(nest: _Nest, name: str) -> None:
    """`loop.call @name(buffers)` in place of `nest` (already done for the kernel's own)."""
    if nest.call is not None:
        return
    Rewriter.insert_op(loop.CallOp(name, nest.buffers), InsertPoint.before(nest.op))
    nest.op.detach()
    nest.op.erase(safe_erase=False)
