"""What the viewer draws: nodes, edges and nested clusters, taken from a module.

`graph_picture` reads a graph-level module (one node per instruction, labelled with its
result's type; literals are not drawn), `fused_picture` a tensor-level module after
`fuse` and `schedule` (one node per `tensor.compute` and other tensor op, fusion groups as
clusters labelled with their members' schedules). Both keep the ops of each function in
program order, which `repeats.collapse` relies on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Block, Operation, SSAValue

from dlc.diagnostics import get_loc


@dataclass
class Node:
    """A box: `label` lines, `kind` op|input|output, `key` its structure for repeats."""

    label: list[str]
    kind: str
    cluster: int
    key: str = ""


@dataclass
class Cluster:
    """A frame around nodes: a function, a fusion group, or a collapsed repeat."""

    label: str
    parent: int | None
    kind: str  # func | group | repeat


@dataclass
class Picture:
    """Nodes, edges (source, target) between node indices, and clusters; `order` lists
    each function's nodes in program order (the runs `repeats.collapse` looks at)."""

    nodes: list[Node] = field(default_factory=list)
    edges: list[tuple[int, int]] = field(default_factory=list)
    clusters: list[Cluster] = field(default_factory=list)
    order: list[list[int]] = field(default_factory=list)
    hidden: set[int] = field(default_factory=set)

    def add_node(self, node: Node) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1

    def add_cluster(self, cluster: Cluster) -> int:
        self.clusters.append(cluster)
        return len(self.clusters) - 1


def type_text(t: Attribute) -> str:
    """`<1x784xf32>` for `!graph.tensor<1x784xf32>`; other types as xDSL prints them."""
    text = str(t)
    return text.removeprefix("!graph.tensor").removeprefix("!graph.")


def value_name(value: SSAValue) -> str:
    return f"%{value.name_hint}" if value.name_hint else ""


def where(op: Operation) -> str:
    """`file:line` of the op's source location, or "" without one."""
    loc = get_loc(op)
    if loc is None or loc.line <= 0:
        return ""
    return f"{loc.filename.rsplit('/', 1)[-1]}:{loc.line}"


class _Builder:
    """Adds one function's arguments and ops to a picture, with the operand keys."""

    def __init__(self, picture: Picture, cluster: int) -> None:
        self.picture, self.cluster = picture, cluster
        self.nodes: dict[SSAValue, int] = {}
        self.sequence: list[int] = []
        self.sequence_position: dict[int, int] = {}
        self.constant: set[int] = set()  # nodes computed from constants alone (weights)

    def add_args(self, block: Block, names: list[str] | None = None) -> None:
        """Input nodes for `block`'s arguments, named by `names` when given (the graph
        level's names of a tensor-level function's arguments)."""
        for arg in block.args:
            name = names[arg.index] if names else value_name(arg)
            label = [name or f"arg {arg.index}", type_text(arg.type)]
            self.nodes[arg] = self.picture.add_node(Node(label, "input", self.cluster))

    def add_op(self, op: Operation, label: list[str], key: str, cluster: int, kind: str) -> None:
        """A node for `op`; its key adds, per operand, how far back its producer is."""
        index = self.picture.add_node(Node(label, kind, cluster))
        position = len(self.sequence)
        parts = [key]
        constant = True
        for operand in op.operands:
            source = self.nodes.get(operand)
            if source is None:
                parts.append("c")  # a literal or constant: not drawn
                continue
            self.picture.edges.append((source, index))
            back = self.sequence_position.get(source)
            if back is None or source in self.constant:  # an argument, a weight
                parts.append(f"a{type_text(operand.type)}")
            else:
                parts.append(str(position - back))
            constant = constant and source in self.constant
        if constant:
            self.constant.add(index)
        self.picture.nodes[index].key = "|".join(parts)
        self.sequence_position[index] = position
        self.sequence.append(index)
        for result in op.results:
            self.nodes[result] = index


def graph_picture(module: ModuleOp) -> Picture:
    """The graph level: each defined function a cluster, each instruction a node."""
    from dlc.dialects.graph import FuncOp, LiteralOp, ReturnOp

    picture = Picture()
    for func in module.body.block.ops:
        if not isinstance(func, FuncOp) or not func.body.blocks:
            continue
        cluster = picture.add_cluster(Cluster(f"@{func.sym_name.data}", None, "func"))
        builder = _Builder(picture, cluster)
        for block in func.body.blocks:
            builder.add_args(block)
        for block in func.body.blocks:
            for op in block.ops:
                if isinstance(op, LiteralOp):
                    continue
                opcode = op.name.removeprefix("graph.")
                if isinstance(op, ReturnOp):
                    builder.add_op(op, ["return"], "return", cluster, "output")
                    continue
                types = [type_text(r.type) for r in op.results]
                name = ", ".join(filter(None, map(value_name, op.results)))
                label = [f"{name} = {opcode}" if name else opcode, *types]
                builder.add_op(op, label, "|".join([opcode, *types]), cluster, "op")
        picture.order.append(builder.sequence)
    return picture


def argument_names(module: ModuleOp) -> dict[str, list[str]]:
    """The `%names` of each graph-level function's arguments."""
    from dlc.dialects.graph import FuncOp

    return {
        f.sym_name.data: [value_name(a) for a in f.body.blocks[0].args]
        for f in module.body.block.ops
        if isinstance(f, FuncOp) and f.body.blocks
    }


def fused_picture(module: ModuleOp, names: dict[str, list[str]] | None = None) -> Picture:
    """The tensor level after fusion and scheduling: fusion groups as clusters;
    `names`: the graph level's argument names per function (`argument_names`)."""
    from xdsl.dialects import arith

    from dlc.dialects.tensor_compute import ConstantOp
    from dlc.dialects.tensor_control import FuncOp

    picture = Picture()
    for func in module.body.block.ops:
        if not isinstance(func, FuncOp) or not func.body.blocks:
            continue
        cluster = picture.add_cluster(Cluster(f"@{func.sym_name.data}", None, "func"))
        builder = _Builder(picture, cluster)
        entry = func.body.blocks[0]
        given = (names or {}).get(func.sym_name.data)
        builder.add_args(entry, given if given and len(given) == len(entry.args) else None)
        groups: dict[int, int] = {}
        previous_group: int | None = None
        for block in func.body.blocks:
            for op in block.ops:
                if isinstance(op, arith.ConstantOp | ConstantOp):  # weights, like literals
                    continue
                if _reshapes_a_constant(op, builder.nodes):  # a weight's view: a weight
                    continue
                label, key, group = _fused_node(op, previous_group)
                node_cluster = cluster
                if group is not None:
                    if group not in groups:
                        groups[group] = picture.add_cluster(
                            Cluster(f"group {group}", cluster, "group")
                        )
                    node_cluster = groups[group]
                kind = "output" if op.name == "tensor.return" else "op"
                builder.add_op(op, label, key, node_cluster, kind)
                previous_group = group
        picture.order.append(builder.sequence)
    return picture


def _reshapes_a_constant(op: Operation, drawn: dict[SSAValue, int]) -> bool:
    """A tensor op other than a compute (a bitcast, a view) of undrawn values only."""
    from dlc.dialects.tensor_compute import ComputeOp

    if isinstance(op, ComputeOp) or not op.operands or op.name == "tensor.return":
        return False
    return all(o not in drawn for o in op.operands)


def _fused_node(op: Operation, previous_group: int | None) -> tuple[list[str], str, int | None]:
    """The label, structural key and fusion group of one tensor-level op."""
    from dlc.dialects.tensor_compute import ComputeOp

    types = [type_text(r.type) for r in op.results]
    if not isinstance(op, ComputeOp):
        opcode = op.name.removeprefix("tensor.")
        return [opcode, *types], "|".join([opcode, *types]), None
    what = "compute"
    if op.reduction is not None:
        what += f" reduce by {op.combinator.data if op.combinator else '?'}"
    label = [f"{what}  {where(op)}".strip(), *types]
    schedule = op.schedule
    group = None
    if schedule is not None:
        group = schedule.fusion[0] if schedule.fusion is not None else None
        text = str(schedule).removeprefix("#schedule.nest<").removesuffix(">")
        if text:
            label.append(text if len(text) <= 60 else text[:57] + "...")
    same = group is not None and group == previous_group
    shape = re.sub(r"group \d+", "group", label[-1]) if schedule else ""  # ids differ per repeat
    key = "|".join([what, *types, shape, "g" if same else ""])
    return label, key, group
