"""Subgraphs (If's branches, Loop's and Scan's bodies) and node expansions, imported
into the importer's one function.

A subgraph becomes blocks of the same function, so outer-scope values are read directly
(no closure conversion) and loops are DLVM's CFG loops; `scope` gives a body copies of
the importer's name tables, restored afterwards. Why: docs/guide/onnx.md.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from onnx import AttributeProto, GraphProto, NodeProto, numpy_helper
from xdsl.ir import Attribute, Block, SSAValue

from dlc.onnx.emitter import Emitter, ImportProblem
from dlc.onnx.node import Result

MAX_NESTING = 32
"""Subgraphs nested deeper than this are refused (the importer recurses per level)."""


@contextmanager
def scope(importer: Any) -> Iterator[None]:
    """Names defined inside stay inside: the importer's tables are copies meanwhile."""
    saved = importer.values, importer.constants, importer.unknown
    importer.values, importer.constants = dict(saved[0]), dict(saved[1])
    importer.unknown = set(saved[2])
    importer.depth = getattr(importer, "depth", 0) + 1
    try:
        if importer.depth > MAX_NESTING:
            raise ImportProblem(f"subgraphs nest deeper than {MAX_NESTING} levels")
        yield
    finally:
        importer.values, importer.constants, importer.unknown = saved
        importer.depth -= 1


def bind(importer: Any, name: str, value: Result) -> None:
    """Make `name` mean `value` (a tensor or a constant) in the current scope."""
    importer.unknown.discard(name)
    if isinstance(value, np.ndarray):
        importer.constants[name] = value
        importer.values.pop(name, None)
    else:
        importer.values[name] = value
        importer.constants.pop(name, None)


def lookup(importer: Any, name: str, where: str) -> Result:
    """A value of the current scope: its constant when known at import time."""
    if name in importer.constants:
        return importer.constants[name]
    if name in importer.values:
        return importer.values[name]
    raise ImportProblem(f"{where}: '{name}' is not computed")


def import_nodes(importer: Any, nodes: Sequence[NodeProto], opset: int) -> list[str]:
    """Import `nodes` in order; their problems are returned (to become one problem of
    the node they stand for), not recorded."""
    before = len(importer.problems)
    for index, inner in enumerate(nodes):
        importer.import_node(inner, index, opset)
    problems = importer.problems[before:]
    del importer.problems[before:]
    return problems


def expand(importer: Any, nodes: Sequence[NodeProto], opset: int, where: str) -> None:
    """Import `nodes` in the node's place; their problems become one of the node."""
    problems = import_nodes(importer, nodes, opset)
    if problems:
        raise ImportProblem(f"{where}: " + "; ".join(problems[:3]))


def import_graph(
    importer: Any, graph: GraphProto, bindings: Sequence[Result], opset: int
) -> list[Result]:
    """The outputs of `graph`, imported where the emitter stands, its inputs bound to
    `bindings` in order."""
    where = f"graph '{graph.name}'"
    if len(bindings) != len(graph.input):
        raise ImportProblem(f"{where} has {len(graph.input)} inputs, expected {len(bindings)}")
    if graph.sparse_initializer:
        raise ImportProblem(f"{where}: sparse initializers are not supported")
    with scope(importer):
        for init in graph.initializer:
            bind(importer, init.name, numpy_helper.to_array(init))
        for value, binding in zip(graph.input, bindings, strict=True):
            bind(importer, value.name, binding)
        expand(importer, graph.node, opset, where)
        return [lookup(importer, o.name, where) for o in graph.output]


def as_tensor(emit: Emitter, value: Result) -> SSAValue:
    """A constant becomes a literal where the emitter stands."""
    return emit.constant(value) if isinstance(value, np.ndarray) else value


def new_block(emit: Emitter, names: Any, name: str, types: Sequence[Attribute] = ()) -> Block:
    """An empty block named after `name`, appended to the function being built."""
    block = Block(arg_types=list(types))
    block._name = names(name)
    region = emit.block.parent
    assert region is not None
    region.add_block(block)
    return block


# ---- which graph inputs a value depends on -------------------------------------------


def subgraphs(proto: NodeProto) -> list[GraphProto]:
    """The graphs among `proto`'s attributes."""
    graphs = [a.g for a in proto.attribute if a.type == AttributeProto.GRAPH]
    return graphs + [
        g for a in proto.attribute if a.type == AttributeProto.GRAPHS for g in a.graphs
    ]


def outer_names(proto: NodeProto) -> list[str]:
    """Names `proto`'s subgraphs (at any depth) read but do not define."""
    used: list[str] = []
    defined: set[str] = set()
    stack = subgraphs(proto)
    while stack:
        graph = stack.pop()
        defined.update(v.name for v in graph.input)
        defined.update(i.name for i in graph.initializer)
        for inner in graph.node:
            used.extend(inner.input)
            defined.update(inner.output)
            stack.extend(subgraphs(inner))
    return [n for n in dict.fromkeys(used) if n and n not in defined]


def inputs_behind(
    name: str, producers: Mapping[str, Sequence[str]], graph_inputs: set[str]
) -> list[str]:
    """The graph inputs `name` is computed from: given as constants, they make it one
    (a Loop's trip count computed from a Range's inputs, ...)."""
    found: list[str] = []
    seen = {name}
    queue = deque([name])
    while queue:
        current = queue.popleft()
        if current in graph_inputs:
            found.append(current)
        for source in producers.get(current, ()):
            if source and source not in seen:
                seen.add(source)
                queue.append(source)
    return found
