"""One ONNX node while it is imported: its attributes, inputs and constant inputs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from onnx import AttributeProto, NodeProto, helper
from xdsl.ir import SSAValue

from dlc.onnx.emitter import Emitter, ImportProblem, NotConstant, shape_of
from dlc.onnx.limits import DEFAULT_LIMITS, ImportLimits


@dataclass
class Node:
    """A node with its input names ("" for an omitted optional input), the constant
    value of every input that is an initializer or a `Constant`'s output, and
    `resolve`, which gives an input as a tensor (a constant becomes a literal only
    when a converter reads it as one)."""

    proto: NodeProto
    opset: int
    names: list[str]
    constants: list[np.ndarray | None]
    resolve: Callable[[str], SSAValue]
    emit: Emitter
    used: set[str] = field(default_factory=set)
    scope: Any = None
    """The `GraphImporter`, for the operators that import subgraphs or expand into
    other nodes (`subgraph.py`)."""

    @property
    def limits(self) -> ImportLimits:
        """The importer's size limits (limits.py)."""
        return getattr(self.scope, "limits", DEFAULT_LIMITS)

    @property
    def op_type(self) -> str:
        return self.proto.op_type

    def attr(self, name: str, default: Any = None) -> Any:
        """The attribute's Python value (ints, floats, strings, lists, tensors)."""
        self.used.add(name)
        for a in self.proto.attribute:
            if a.name == name:
                value = helper.get_attribute_value(a)
                if a.type == AttributeProto.STRING:
                    return value.decode()
                if a.type in (AttributeProto.INTS, AttributeProto.FLOATS):
                    return list(value)
                return value
        return default

    def ignore(self, *names: str) -> None:
        """Attributes the spec says do not apply to this node's configuration (a
        Resize's `cubic_coeff_a` in mode 'linear'): exporters write them anyway, and
        their values change nothing, so they are not refused as unsupported."""
        self.used.update(names)

    def has_attr(self, name: str) -> bool:
        return any(a.name == name for a in self.proto.attribute)

    def input(self, i: int) -> SSAValue:
        value = self.optional(i)
        if value is None:
            raise ImportProblem(f"input {i} is missing")
        return value

    def optional(self, i: int) -> SSAValue | None:
        name = self.names[i] if i < len(self.names) else ""
        return self.resolve(name) if name else None

    def constant(self, i: int, what: str) -> np.ndarray | None:
        """Input i's value, which must be known at import time (None when omitted)."""
        if i >= len(self.names) or not self.names[i]:
            return None
        value = self.constants[i]
        if value is None:
            raise NotConstant(f"{what} (input {i}) must be a constant", self.names[i])
        return value

    def derived(self, i: int, kind: str, make: Callable[[], SSAValue]) -> SSAValue:
        """`make()`, a value made from constant input i in a way `kind` names, made once
        per graph: a weight that several nodes read (layers that share weights) is
        transformed and stored once."""
        memo: dict[tuple[str, str], SSAValue] | None = getattr(self.scope, "derived", None)
        if memo is None:
            return make()
        key = (self.names[i], kind)
        if key not in memo:
            memo[key] = make()
        return memo[key]

    def axis(self, axis: int, rank: int) -> int:
        """A possibly negative axis, checked against `rank`."""
        if not -rank <= axis < rank:
            raise ImportProblem(f"axis {axis} is out of range for rank {rank}")
        return axis % rank

    def rank(self, i: int) -> int:
        return len(shape_of(self.input(i)))

    def require(self, name: str, allowed: Sequence[Any], default: Any) -> Any:
        """An attribute whose only supported values are `allowed`."""
        value = self.attr(name, default)
        if value not in allowed:
            raise ImportProblem(f"{name}={value!r} is not supported")
        return value


Result = SSAValue | np.ndarray
"""A node's output: a tensor, or a constant known at import time (a shape)."""
Converter = Callable[[Node], Sequence[Result]]
