"""The reference-count half of `FunctionLowering`: retains and releases of indirect enum
boxes at ops, branches and returns (the rules are in ownership.py), and the enum ops
on boxes (a case literal makes a box, `branchEnum` reads one).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.builder import Builder, InsertPoint
from xdsl.ir import Block, Operation, SSAValue

from dlc.dialects import graph, tensor
from dlc.dialects import graph_memory as gm
from dlc.dialects.graph import Symbols
from dlc.dialects.graph_literal import LitTree
from dlc.dialects.graph_types import NominalType
from dlc.dialects.layout import is_indirect
from dlc.dialects.recursive_types import enum_tag
from dlc.lowering.graph_to_tensor.boxes import Boxes
from dlc.lowering.graph_to_tensor.compute_builder import (
    Lowered,
    build_compute,
    lowered_type,
    tag_is,
)
from dlc.lowering.graph_to_tensor.memory import MemoryRules, flatten
from dlc.lowering.graph_to_tensor.ops import UnsupportedOp
from dlc.lowering.graph_to_tensor.ownership import Ownership

FRESH = (gm.ApplyOp, graph.LiteralOp)  # results own new references (literals: see below)
UNCOUNTED = (gm.CopyOp, gm.PushOp, gm.PopOp)  # would duplicate references behind our back


class OwnedLowering:
    """Mixed into FunctionLowering (which provides these attributes)."""

    values: dict[SSAValue, Lowered]
    blocks: dict[Block, Block]
    types: Symbols
    boxes: Boxes
    memory: MemoryRules
    own: Ownership

    def edge(self, b: Builder, args: Sequence[SSAValue]) -> list[SSAValue]:
        raise NotImplementedError

    def check_counted(self, op: Operation) -> None:
        if isinstance(op, UNCOUNTED) and any(self.own.counted(v) for v in op.operands):
            raise UnsupportedOp(f"{getattr(op, 'OPCODE', op.name)} of recursive enum values")

    def after_op(self, b: Builder, block: Block, op: Operation) -> None:
        """Retain what `op`'s result copies; release what dies at `op`."""
        if not self.own.active:
            return
        if isinstance(op, graph.LiteralOp):
            for index in _operand_uses(op.value.data):
                operand = op.operands[index]
                if self.own.counted(operand):
                    self.boxes.retain(b, operand.type, self.values[operand])
        elif isinstance(op, gm.StoreOp) and self.own.counted(op.value):
            self.boxes.retain(b, op.value.type, self.values[op.value])
        for r in op.results:
            if self.own.counted(r) and not isinstance(op, FRESH):
                self.boxes.retain(b, r.type, self.values[r])
        for v in self.own.dying_after(block, op):
            self.boxes.release(b, v.type, self.values[v])

    def release_unused_args(self, b: Builder, block: Block) -> None:
        for v in self.own.dying_before_args(block):
            self.boxes.release(b, v.type, self.values[v])

    def old_contents(self, b: Builder, op: Operation) -> Lowered | None:
        """Before a `store` over counted values: what the memory held (released after)."""
        if not (isinstance(op, gm.StoreOp) and self.own.counted(op.value)):
            return None
        pointer = self.values[op.pointer]
        assert isinstance(pointer, list), pointer
        return self.memory.read(b, op.value.type, pointer)

    # ---- terminators -------------------------------------------------------------------

    def lower_counted_terminator(self, b: Builder, block: Block, op: Operation) -> bool:
        """Lower a terminator of a function with counted values (False: not one)."""
        if not self.own.active:
            return False
        if isinstance(op, graph.ReturnOp):
            dying = self.own.alive_at_end(block)
            if op.value is not None and self.own.counted(op.value):
                self.hand_over(b, [op.value], dying)
            for v in dying:
                self.boxes.release(b, v.type, self.values[v])
            leaves = flatten(self.values[op.value]) if op.value is not None else []
            b.insert(tensor.ReturnOp(*(_materialize(b, v) for v in leaves)))
            return True
        if isinstance(op, graph.BranchOp):
            self.jump(b, block, op.dest, list(op.args), self.edge(b, op.args))
            return True
        if isinstance(op, graph.ConditionalOp):
            cond = _materialize(b, self.values[op.cond])
            then_args, else_args = self.edge(b, op.then_args), self.edge(b, op.else_args)
            then_edge, else_edge = self.new_block(b), self.new_block(b)
            b.insert(tensor.CondBrOp(cond, then_edge, [], else_edge, []))
            self.jump(_at(then_edge), block, op.then_block, list(op.then_args), then_args)
            self.jump(_at(else_edge), block, op.else_block, list(op.else_args), else_args)
            return True
        if isinstance(op, graph.BranchEnumOp):
            self.branch_enum_counted(b, block, op)
            return True
        return False

    def jump(
        self,
        b: Builder,
        block: Block,
        dest: Block,
        graph_args: list[SSAValue],
        args: list[SSAValue],
    ) -> None:
        """Hand the block arguments over, release what dies on the edge, branch."""
        dying = self.own.dying_on_edge(block, dest)
        self.hand_over(b, [a for a in graph_args if self.own.counted(a)], dying)
        for v in dying:
            self.boxes.release(b, v.type, self.values[v])
        b.insert(tensor.BrOp(self.blocks[dest], args))

    def hand_over(self, b: Builder, values: list[SSAValue], dying: list[SSAValue]) -> None:
        """Give one reference per value to the receiver (a block argument, the caller):
        a value dying here passes its own (removed from `dying`), others are retained."""
        for v in values:
            if v in dying:
                dying.remove(v)
            else:
                self.boxes.retain(b, v.type, self.values[v])

    def branch_enum_counted(self, b: Builder, block: Block, op: graph.BranchEnumOp) -> None:
        """A chain of tag tests; each case's edge block retains the case's values."""
        t = op.value.type
        assert isinstance(t, NominalType)
        value = self.enum_body(b, t, self.values[op.value])
        assert isinstance(value, list)
        names = [c for c, _ in self.types.enums[t.ident]]
        targets = list(zip([c.data for c in op.cases], op.dests, strict=True))
        for k, (case, dest) in enumerate(targets):
            edge = self.new_block(b)
            index = names.index(case)
            if k == len(targets) - 1:
                b.insert(tensor.BrOp(edge, []))
                nxt = None
            else:
                hit = tag_is(b, value[0], enum_tag(t, case, self.types))
                nxt = self.new_block(b)
                b.insert(tensor.CondBrOp(hit, edge, [], nxt, []))
            e = _at(edge)
            payload = value[1 + index]
            for arg, part in zip(dest.args, _parts(payload, len(dest.args)), strict=True):
                if self.own.counted(arg):
                    self.boxes.retain(e, arg.type, part)
            for v in self.own.dying_on_edge(block, dest):
                self.boxes.release(e, v.type, self.values[v])
            e.insert(tensor.BrOp(self.blocks[dest], [_materialize(e, v) for v in flatten(payload)]))
            if nxt is not None:
                b.insertion_point = InsertPoint.at_end(nxt)

    def enum_body(self, b: Builder, t: NominalType, value: Lowered) -> Lowered:
        """[tag, values of each case]: the value itself, or read from its box."""
        if is_indirect(t, self.types):
            return self.boxes.read_body(b, t, value)
        return value

    def new_block(self, b: Builder) -> Block:
        block = Block()
        region = b.insertion_point.block.parent
        assert region is not None, "the builder inserts into a function body"
        region.add_block(block)
        return block


def _at(block: Block) -> Builder:
    return Builder(InsertPoint.at_end(block))


def _parts(payload: Lowered, count: int) -> list[Lowered]:
    assert isinstance(payload, list) and len(payload) == count
    return payload


def _materialize(b: Builder, value: Lowered) -> SSAValue:
    if isinstance(value, SSAValue):
        return value
    return build_compute(b, lowered_type(value), lambda s, i, _: s.read(value, i)).result


def _operand_uses(tree: LitTree) -> list[int]:
    """The operand indices a literal tree copies, once per occurrence."""
    out: list[int] = []
    stack: list[object] = [tree]
    while stack:
        node = stack.pop()
        if not isinstance(node, tuple | list):
            continue
        if len(node) == 2 and node[0] == "operand" and isinstance(node[1], int):
            out.append(node[1])
            continue
        stack.extend(node)
    return out
