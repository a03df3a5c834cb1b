"""ONNX operators defined by a function body: the body, to import in the node's place.

Many ONNX operators (LayerNormalization, Attention, the losses, ...) are defined in
their schema as a function of other operators, some (context-dependent functions)
built for the node's attributes and input types. An operator dlc has no converter for
is imported as that body: its nodes, with the node's inputs, outputs and attributes
substituted and every internal value renamed under a prefix unique to the node (its
first output's name: names stay the same from one import to the next).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import onnx
from onnx import AttributeProto, FunctionProto, NodeProto, TypeProto, helper


@runtime_checkable
class _VersionedBodies(Protocol):
    """The members of `onnx.defs.OpSchema` this module reads that onnx 1.23 has but its
    type stubs do not declare (checked with `isinstance` where the schema is read)."""

    @property
    def function_opset_versions(self) -> list[int]: ...
    @property
    def context_dependent_function_opset_versions(self) -> list[int]: ...
    def get_function_with_opset_version(self, opset: int) -> bytes: ...
    def get_context_dependent_function_with_opset_version(
        self, opset: int, node: bytes, input_types: list[bytes]
    ) -> bytes: ...


def function_body(
    proto: NodeProto, opset: int, input_types: list[TypeProto], prefix: str
) -> tuple[list[NodeProto], int] | None:
    """The nodes of `proto`'s function body at `opset` (internal values and nodes
    named under `prefix`) and the default-domain opset they are written in; None when
    the operator has no function body."""
    try:
        schema = onnx.defs.get_schema(proto.op_type, opset, proto.domain)
    except onnx.defs.SchemaError:
        return None
    node = _with_defaults(proto, schema)
    assert isinstance(schema, _VersionedBodies), "onnx's OpSchema lost its function bodies"
    function = FunctionProto()
    plain = [v for v in schema.function_opset_versions if v <= opset]
    dependent = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
    if plain:
        function.ParseFromString(schema.get_function_with_opset_version(max(plain)))
    elif dependent:
        text = schema.get_context_dependent_function_with_opset_version(
            max(dependent), node.SerializeToString(), [t.SerializeToString() for t in input_types]
        )
        if not text:
            return None
        function.ParseFromString(text)
    else:
        return None
    body_opset = next(
        (o.version for o in function.opset_import if o.domain in ("", "ai.onnx")), opset
    )
    return _substituted(node, function, prefix), body_opset


def local_body(proto: NodeProto, function: FunctionProto, prefix: str) -> list[NodeProto]:
    """The nodes of a call `proto` of the model-local `function`, internal values named
    under `prefix`; attributes the call leaves out take the function's defaults."""
    node = NodeProto()
    node.CopyFrom(proto)
    present = {a.name for a in node.attribute}
    node.attribute.extend(a for a in function.attribute_proto if a.name not in present)
    return _substituted(node, function, prefix)


def _with_defaults(proto: NodeProto, schema: onnx.defs.OpSchema) -> NodeProto:
    """`proto` with the schema's default values of the attributes it does not set."""
    node = NodeProto()
    node.CopyFrom(proto)
    present = {a.name for a in node.attribute}
    for name, attr in schema.attributes.items():
        if name not in present and attr.default_value.type != AttributeProto.UNDEFINED:
            node.attribute.append(attr.default_value)
    return node


def _substituted(node: NodeProto, function: FunctionProto, prefix: str) -> list[NodeProto]:
    names = {
        formal: (node.input[i] if i < len(node.input) else "")
        for i, formal in enumerate(function.input)
    }
    for i, formal in enumerate(function.output):
        if i < len(node.output) and node.output[i]:
            names[formal] = node.output[i]
    attributes = {a.name: a for a in node.attribute}

    def rename(name: str) -> str:
        if name in names:
            return names[name]
        return prefix + name if name else ""

    nodes = []
    for k, inner in enumerate(function.node):
        new = helper.make_node(
            inner.op_type,
            [rename(n) for n in inner.input],
            [rename(n) for n in inner.output],
            name=f"{prefix}{k}.{inner.op_type}",
            domain=inner.domain,
        )
        for attr in inner.attribute:
            if attr.ref_attr_name:
                if attr.ref_attr_name not in attributes:
                    continue  # an optional attribute the node does not set
                value = AttributeProto()
                value.CopyFrom(attributes[attr.ref_attr_name])
                value.name = attr.name
                new.attribute.append(value)
            else:
                new.attribute.append(_renamed_graphs(attr, rename))
        nodes.append(new)
    return nodes


def _renamed_graphs(attr: AttributeProto, rename: Callable[[str], str]) -> AttributeProto:
    """`attr` with every name in its subgraphs (at any depth) renamed as the body's
    names are: a subgraph reads the body's values by those names, and renaming the
    names it defines the same way keeps its shadowing as it was."""
    if attr.type not in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
        return attr
    copy = AttributeProto()
    copy.CopyFrom(attr)
    stack = [copy.g] if attr.type == AttributeProto.GRAPH else list(copy.graphs)
    while stack:
        graph = stack.pop()
        for value in [*graph.input, *graph.output, *graph.value_info, *graph.initializer]:
            value.name = rename(value.name)
        for inner in graph.node:
            inner.input[:] = [rename(n) for n in inner.input]
            inner.output[:] = [rename(n) for n in inner.output]
            stack.extend(a.g for a in inner.attribute if a.type == AttributeProto.GRAPH)
            stack.extend(g for a in inner.attribute for g in a.graphs)
    return copy
