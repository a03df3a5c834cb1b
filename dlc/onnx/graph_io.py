"""The graph inputs and outputs of an imported ONNX graph: parameter types from the
declared shapes (and `input_shapes`), and the declared output types checked against
what dlc computes.

`declared_dims` is the one reading of a declared shape: a dimension without a
`dim_value`, or with a negative one (exporters such as paddle2onnx write -1 for
"unknown"), is unknown (None).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from onnx import GraphProto, NodeProto, TensorProto, TypeProto
from xdsl.ir import Block, Operation, SSAValue

from dlc.dialects import graph_dims
from dlc.dialects.graph_symbolic import first_symbol, op_problem
from dlc.dialects.graph_types import TensorType, format_type, size_error
from dlc.onnx.emitter import ELEMENT_TYPES as DTYPES
from dlc.onnx.emitter import ImportProblem
from dlc.onnx.limits import declared_dim

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import numpy as np


def declared_dims(tensor_type: TypeProto.Tensor) -> list[int | None]:
    """The dimensions of a `TypeProto.Tensor`'s shape, None where unknown (module doc)."""
    return [declared_dim(d) for d in tensor_type.shape.dim]


def dims_text(tensor_type: TypeProto.Tensor) -> str:
    """A declared shape as the model writes it: `(-1, 3, ?, height)`."""
    dims = [
        str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
        for d in tensor_type.shape.dim
    ]
    return "(" + ", ".join(dims) + ")"


SYMBOLIC_NODES = frozenset(
    "Gemm MatMul Add Sub Mul Div Max Min Relu Sigmoid Tanh Exp Log Neg Sqrt Cast Erf Pow "
    "Gather Reshape Transpose Softmax LayerNormalization Unsqueeze Squeeze Identity Concat "
    "Slice Split".split()
)
"""Operators imported with a symbolic dimension in an input (`dynamic=True`) when the
ops they become are in the symbolic subset (`graph_symbolic.op_problem` checks them)."""


def symbolic_problem(op_type: str, inputs: Sequence[SSAValue]) -> str | None:
    """Why a node `op_type` of these inputs cannot be imported with their symbolic
    dimensions yet, or None."""
    symbol = first_symbol([v.type for v in inputs])
    if symbol is None or op_type in SYMBOLIC_NODES:
        return None
    return f"{op_type}: not supported yet with symbolic dimension %{symbol}"


def symbol_name(dim_param: str) -> str:
    """A `dim_param` as a DLVM symbolic dimension name (`batch size` -> `batch_size`)."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", dim_param)
    return name if re.match(r"[A-Za-z_]", name) else "d_" + name


_EXPRESSION = re.compile(r"[A-Za-z0-9_]+(?:[+*][A-Za-z0-9_]+)+")


def is_expression(dim_param: str) -> bool:
    """Whether a `dim_param` reads as a sum or product (`past_sequence_length + 1`)."""
    return _EXPRESSION.fullmatch(re.sub(r"\s+", "", dim_param)) is not None


def dim_expression(dim_param: str, names: set[str]) -> str | None:
    """A `dim_param` that is a sum of products of other dimensions' names and integers
    (`past_sequence_length + 1`, as transformers' exports name a grown cache) as that
    dimension expression (`past_sequence_length+1`), when every name in it is among
    `names` (the inputs' other `dim_param`s); None otherwise (the text is one name)."""
    if not is_expression(dim_param):
        return None
    pieces = re.split(r"([+*])", re.sub(r"\s+", "", dim_param))
    factors = [p if p in "+*" or p.isdigit() else symbol_name(p) for p in pieces]
    symbols = [f for f in factors if f not in "+*" and not f.isdigit()]
    if not symbols or any(f not in names for f in symbols):
        return None
    return str(graph_dims.normalize("".join(factors)))


class GraphSignature:
    """The graph input and output handling of `GraphImporter` (importer.py)."""

    input_shapes: dict
    dynamic: bool
    plain_dims: set[str]
    constants: dict[str, np.ndarray]
    problems: list[str]
    unknown: set[str]
    values: dict[str, SSAValue]
    graph_inputs: set[str]
    block: Block
    names: Callable[[str], str]
    _value: Callable[[str], SSAValue]

    def _parameters(self, graph: GraphProto) -> list[TensorType]:
        types: list[TensorType] = []
        names: list[str] = []
        self.plain_dims = {
            symbol_name(d.dim_param)
            for v in graph.input
            for d in v.type.tensor_type.shape.dim
            if d.dim_param and not is_expression(d.dim_param)
        }
        for value in graph.input:
            if value.name in self.constants:
                continue  # an initializer listed as an input (IR version < 4)
            t = self._input_type(value.name, value.type)
            if t is None:
                self.unknown.add(value.name)
            else:
                types.append(t)
                names.append(value.name)
        for name in self.input_shapes:
            if name not in {v.name for v in graph.input} - self.constants.keys():
                self.problems.append(f"input_shapes names '{name}', which is not a graph input")
        self.graph_inputs = set(names)
        for name, t in zip(names, types, strict=True):
            arg = self.block.insert_arg(t, len(self.block.args))
            arg._name = self.names(name)
            self.values[name] = arg
        return types

    def _input_type(self, name: str, type_proto: TypeProto) -> TensorType | None:
        tensor = type_proto.tensor_type
        dt = DTYPES.get(tensor.elem_type)
        if dt is None:
            kind = TensorProto.DataType.Name(tensor.elem_type)
            self.problems.append(
                f"input '{name}': element type {kind} is not supported "
                "(f16, bf16, f32, f64, i8-i64, u8-u64, bool)"
            )
            return None
        declared = declared_dims(tensor)
        given = self.input_shapes.get(name)
        if given is None and self.dynamic and None in declared:
            return self._symbolic(name, tensor, dt)
        if given is None:
            static = [d for d in declared if d is not None]
            if len(static) < len(declared):
                self.problems.append(
                    f"input '{name}': dynamic shape {dims_text(tensor)}; give its shape "
                    f"with input_shapes={{'{name}': (...)}} (dlc-run: --input-shape {name}=...)"
                )
                return None
            return self._sized(name, TensorType(static, dt))
        given = [int(d) for d in given]
        clash = len(given) != len(declared) or any(
            d is not None and d != g for d, g in zip(declared, given, strict=False)
        )
        if clash or min(given, default=0) < 0:
            self.problems.append(
                f"input '{name}': input_shapes gives {tuple(given)}, the model declares "
                f"{dims_text(tensor)}"
            )
            return None
        return self._sized(name, TensorType(given, dt))

    def check_symbolic(self, proto: NodeProto) -> None:
        """ImportProblem for a node outside the symbolic subset with a symbolic input."""
        known = [self.values[n] for n in proto.input if n in self.values]
        if self.dynamic and (message := symbolic_problem(proto.op_type, known)) is not None:
            raise ImportProblem(message)

    def check_symbolic_op(self, op: Operation) -> None:
        """ImportProblem for an op a node became that cannot take its symbolic dims."""
        if self.dynamic and (message := op_problem(op)) is not None:
            raise ImportProblem(message)

    def _symbolic(self, name: str, tensor: TypeProto.Tensor, dt: str) -> TensorType | None:
        """The type of input `name` with its `dim_param`s as symbolic dimensions (equal
        names, equal sizes); a dimension with neither value nor name is a problem."""
        dims: list[int | str] = []
        for d, known in zip(tensor.shape.dim, declared_dims(tensor), strict=True):
            if known is not None:
                dims.append(known)
            elif d.dim_param:
                expression = dim_expression(d.dim_param, self.plain_dims)
                dims.append(expression or symbol_name(d.dim_param))
            else:
                self.problems.append(
                    f"input '{name}': shape {dims_text(tensor)} has an unnamed dynamic "
                    f"dimension; give its shape with input_shapes={{'{name}': (...)}}"
                )
                return None
        return self._sized(name, TensorType(dims, dt))

    def _sized(self, name: str, t: TensorType) -> TensorType | None:
        message = size_error(t)
        if message is None:
            return t
        self.problems.append(f"input '{name}': {message}")
        return None

    def _output(self, name: str, type_proto: TypeProto) -> SSAValue | None:
        if name in self.unknown:
            return None
        if name not in self.values and name not in self.constants:
            self.problems.append(f"output '{name}' is not computed by any node")
            return None
        try:
            value = self._value(name)
        except ImportProblem as err:
            self.problems.append(f"output '{name}': {err}")
            return None
        tensor = type_proto.tensor_type
        declared = declared_dims(tensor)
        t = value.type
        assert isinstance(t, TensorType)
        if tensor.elem_type and DTYPES.get(tensor.elem_type) != t.dt:
            kind = TensorProto.DataType.Name(tensor.elem_type)
            self.problems.append(
                f"output '{name}': dlc computes {format_type(t)}, the model declares {kind}"
            )
            return value
        if tensor.HasField("shape") and (
            len(declared) != t.rank
            or any(d not in (None, a) for d, a in zip(declared, t.dims, strict=False))
        ):
            self.problems.append(
                f"output '{name}': dlc computes {format_type(t)}, the model declares "
                f"{dims_text(tensor)}"
            )
        return value
