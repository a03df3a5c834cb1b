"""ONNX graph -> one graph-level dlc function, built in memory.

Nodes are imported in the graph's (topological) order. A node that cannot be imported
is recorded and its outputs are marked unknown; nodes that read an unknown value are
skipped without a second report, so one `OnnxImportError` names every node that is
itself unsupported. Initializers and `Constant` outputs stay NumPy arrays until an op
reads them as tensors, so shape inputs (Reshape's, the axes of reductions) never
become literals.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
from onnx import FunctionProto, ModelProto, NodeProto, TensorProto, TypeProto, helper, numpy_helper
from onnx.helper import get_attribute_value
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, Region, SSAValue

from dlc.diagnostics import DiagnosticError, Location, set_origin
from dlc.dialects.graph import FuncOp, LiteralOp, ReturnOp
from dlc.dialects.graph_literal import LiteralAttr
from dlc.dialects.graph_symbolic import first_symbol
from dlc.dialects.graph_types import FunctionType, TensorType, TupleType
from dlc.dialects.graph_verify import verify_module
from dlc.onnx import expand, fold, ops_symbolic, subgraph
from dlc.onnx.converters import CONVERTERS
from dlc.onnx.custom import CustomOps
from dlc.onnx.emitter import ELEMENT_TYPES, Emitter, ImportProblem, NotConstant
from dlc.onnx.graph_io import GraphSignature
from dlc.onnx.limits import DEFAULT_LIMITS, ImportLimits, check_elements
from dlc.onnx.node import Converter, Node

DTYPES = ELEMENT_TYPES


class OnnxImportError(DiagnosticError):
    """Everything in a model that dlc cannot import, one problem a line
    (`model.onnx: error: node 'conv1' (Conv): ceil_mode=1 is not supported`)."""

    def __init__(
        self, problems: Sequence[str], filename: str, wanted_constants: Sequence[str] = ()
    ):
        super().__init__("\n".join(problems), Location(filename, 0, 0))
        self.problems = list(problems)
        self.wanted_constants = list(wanted_constants)
        """Graph inputs that nodes need as constants (shapes, axes): importing with
        their values as `constant_inputs` gets past those problems."""

    def format(self) -> str:
        return "\n".join(f"{self.filename}: error: {p}" for p in self.problems)


class Names:
    """Unique DLVM value names from ONNX names (`[A-Za-z_][A-Za-z0-9_.]*`)."""

    def __init__(self) -> None:
        self.taken: set[str] = set()

    def __call__(self, name: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_.]", "_", name) or "v"
        if not re.match(r"[A-Za-z_]", base) or re.fullmatch(r"_+\d*", base):
            base = "v" + base  # xDSL reads `_5` as name "" with suffix 5
        candidate, k = base, 0
        while candidate in self.taken:
            k += 1
            candidate = f"{base}_{k}"
        self.taken.add(candidate)
        return candidate


def node_label(node: NodeProto, index: int) -> str:
    name = f"'{node.name}'" if node.name else f"#{index}"
    return f"node {name} ({node.op_type})"


def default_opset(model: ModelProto) -> int | None:
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return entry.version
    return None


class GraphImporter(GraphSignature):
    """Imports one `GraphProto` into a function named after the graph."""

    def __init__(
        self,
        model: ModelProto,
        filename: str,
        input_shapes: Mapping[str, Sequence[int]],
        constant_inputs: Mapping[str, np.ndarray],
        limits: ImportLimits = DEFAULT_LIMITS,
        custom_ops: CustomOps | None = None,
        initializers: dict[str, np.ndarray] | None = None,
        dynamic: bool = False,
    ):
        self.model, self.graph, self.filename = model, model.graph, filename
        self.dynamic = dynamic  # dim_params become symbolic dimensions
        self.custom = custom_ops or CustomOps({})
        self.local_functions = {
            (f.domain, f.name, getattr(f, "overload", "")): f for f in model.functions
        }
        self.expanding: list[tuple[str, str, str]] = []  # model-local functions being imported
        self.expanded_nodes = 0
        self.limits = limits
        self.initializers = initializers  # taken out of the model already (`detached`)
        self.input_shapes = dict(input_shapes)
        self.constant_inputs = dict(constant_inputs)
        self.problems: list[str] = []
        self.wanted: list[str] = []
        self.names = Names()
        self.values: dict[str, SSAValue] = {}
        self.derived: dict[tuple[str, str], SSAValue] = {}  # `Node.derived`
        self.constants: dict[str, np.ndarray] = {}
        self.unknown: set[str] = set()
        self.block = Block()
        self.region = Region([self.block])  # control flow adds blocks (subgraph.py)
        self.emit = Emitter(self.block)
        self.producers: dict[str, list[str]] = {}

    def run(self) -> ModuleOp:
        opset = default_opset(self.model)
        if opset is None:
            raise OnnxImportError(
                ["the model imports no default-domain (ai.onnx) opset"], self.filename
            )
        if not 1 <= opset <= self.limits.max_opset:
            raise OnnxImportError(
                [
                    f"opset {opset} of the default domain is not a valid opset (1 to "
                    f"{self.limits.max_opset}; raise it with ImportLimits(max_opset=...))"
                ],
                self.filename,
            )
        graph = self.graph
        if self.initializers is not None:
            self.constants.update(self.initializers)
            self.initializers = None
        for init in graph.initializer:
            self.constants[init.name] = initializer_array(init, self.filename)
        inputs = {v.name for v in graph.input}
        for name, value in self.constant_inputs.items():
            if name not in inputs:
                self.problems.append(f"constant_inputs names '{name}', which is not a graph input")
            self.constants[name] = np.asarray(value)
        params = self._parameters(graph)
        for index, proto in enumerate(graph.node):
            self.import_node(proto, index, opset)
        results = [self._output(o.name, o.type) for o in graph.output]
        if self.problems:
            raise OnnxImportError(self.problems, self.filename, self.wanted)
        return self._module(params, [r for r in results if r is not None])

    def _module(self, params: list[TensorType], results: list[SSAValue]) -> ModuleOp:
        if len(results) == 1:
            out, out_type = results[0], results[0].type
        else:
            out_type = TupleType([r.type for r in results])
            tree = ("tuple", tuple(("operand", k) for k in range(len(results))))
            literal = LiteralOp(LiteralAttr(tree), out_type, results)
            self.emit.block.add_op(literal)
            out = literal.result
        self.emit.block.add_op(ReturnOp(out))
        self.block._name = "entry"
        name = Names()(self.graph.name or "main")
        func = FuncOp(name, FunctionType(params, out_type), self.region)
        module = ModuleOp([*self.custom.funcs, func])
        module.attributes["dlc.name"] = StringAttr(self.graph.name or "main")
        module.attributes["dlc.stage"] = StringAttr("raw")
        if self.custom.funcs:  # the graph is the entry, custom operators' functions are not
            module.attributes["dlc.entry"] = StringAttr(name)
        verify_module(module)
        return module

    # ---- nodes ----------------------------------------------------------------------

    def _value(self, name: str) -> SSAValue:
        """The tensor `name`; a constant becomes a literal when first read as one."""
        if name not in self.values:
            value = self.emit.constant(self.constants[name])
            value._name = self.names(name)
            self.values[name] = value
        return self.values[name]

    def import_node(self, proto: NodeProto, index: int, opset: int) -> None:
        label = node_label(proto, index)
        inputs = [*proto.input, *subgraph.outer_names(proto)]
        # Shape and Size read only the (static) type of their input, never its values
        sources = [] if proto.op_type in ("Shape", "Size") else inputs
        for name in proto.output:
            self.producers[name] = sources
        if any(name in self.unknown for name in inputs):
            self.unknown.update(proto.output)  # the cause is reported already
            return
        last = self.emit.block.last_op
        try:
            self.check_symbolic(proto)
            self._convert(proto, opset)
            op = last.next_op if last is not None else self.emit.block.first_op
            while op is not None:  # what the profiler names its kernels after
                set_origin(op, label)
                self.check_symbolic_op(op)
                op = op.next_op
        except ImportProblem as err:
            self.problems.append(f"{label}: {err}")
            self.unknown.update(proto.output)
            if isinstance(err, NotConstant):
                self.wanted += subgraph.inputs_behind(err.name, self.producers, self.graph_inputs)
        except (ValueError, TypeError, KeyError, IndexError) as err:  # a malformed node
            self.problems.append(f"{label}: malformed node: {type(err).__name__}: {err}")
            self.unknown.update(proto.output)

    def _convert(self, proto: NodeProto, opset: int) -> None:
        custom = self.custom.lookup(proto)
        if custom is not None:
            self._results(proto, self.custom.call(proto, custom, self._inputs(proto), self.emit))
            return
        local = self.local_functions.get(
            (proto.domain, proto.op_type, getattr(proto, "overload", ""))
        )
        if local is not None and proto.domain not in ("", "ai.onnx"):
            self._local_function(proto, local, opset)
            return
        if proto.domain not in ("", "ai.onnx"):
            raise ImportProblem(
                f"operator domain '{proto.domain}' is not supported "
                f"(map {proto.domain}::{proto.op_type} to a DLVM function with custom_ops=)"
            )
        if proto.op_type == "Constant":
            self._constant(proto)
            return
        missing = [n for n in proto.input if n and n not in self.values and n not in self.constants]
        if missing:
            raise ImportProblem(f"input '{missing[0]}' is not defined before the node")
        constants = [self.constants.get(n) if n else None for n in proto.input]
        if fold.foldable(proto, constants, self.limits.fold_elements):
            try:
                self._results(proto, fold.fold(proto, constants, opset, self.limits.fold_elements))
                return
            except ValueError:
                pass  # too large, or the reference rejects it: the converter decides
        convert = self._converter(proto)
        if convert is None:
            self._function_body(proto, opset)
            return
        names = list(proto.input)
        node = Node(proto, opset, names, constants, self._value, self.emit, scope=self)
        results = convert(node)
        unused = [a.name for a in proto.attribute if a.name not in node.used]
        if unused:
            raise ImportProblem(f"attribute '{unused[0]}' is not supported")
        self._results(proto, results)

    def _converter(self, proto: NodeProto) -> Converter | None:
        """The node's converter: with a symbolic input, `ops_symbolic`'s if it has one."""
        types = [self.values[n].type for n in proto.input if n in self.values]
        symbolic = self.dynamic and first_symbol(types) is not None
        extra = ops_symbolic.CONVERTERS if symbolic else {}
        return extra.get(proto.op_type, CONVERTERS.get(proto.op_type))

    def _inputs(self, proto: NodeProto) -> list[SSAValue]:
        """The node's inputs as tensors, all present and defined."""
        if any(not n for n in proto.input):
            raise ImportProblem("an omitted optional input is not supported here")
        missing = [n for n in proto.input if n not in self.values and n not in self.constants]
        if missing:
            raise ImportProblem(f"input '{missing[0]}' is not defined before the node")
        return [self._value(n) for n in proto.input]

    def _local_function(self, proto: NodeProto, function: FunctionProto, opset: int) -> None:
        """Import a call of a model-local function (the model's `functions`) as its body,
        nodes substituted as for a standard operator's body."""
        key = (function.domain, function.name, getattr(function, "overload", ""))
        what = f"model-local function {function.domain}::{function.name}"
        if key in self.expanding:
            raise ImportProblem(f"{what} calls itself (ONNX functions may not recurse)")
        prefix = f"{proto.output[0] if proto.output else proto.op_type}."
        nodes = expand.local_body(proto, function, prefix)
        self.expanded_nodes += len(nodes)
        if self.expanded_nodes > self.limits.max_function_nodes:
            raise ImportProblem(
                f"{what}: calls of model-local functions expand to more than "
                f"{self.limits.max_function_nodes} nodes "
                "(raise it with ImportLimits(max_function_nodes=...))"
            )
        body_opset = next(
            (o.version for o in function.opset_import if o.domain in ("", "ai.onnx")), opset
        )
        self.expanding.append(key)
        try:
            subgraph.expand(self, nodes, body_opset, what)
        finally:
            self.expanding.pop()

    def _function_body(self, proto: NodeProto, opset: int) -> None:
        """Import an operator dlc has no converter for as its ONNX function body; the
        problems of the body's nodes become one problem of this node."""
        types = [self._type_proto(name) for name in proto.input]
        prefix = f"{proto.output[0] if proto.output else proto.op_type}."
        body = expand.function_body(proto, opset, types, prefix)
        if body is None:
            raise ImportProblem(f"operator {proto.op_type} is not supported")
        nodes, body_opset = body
        inner_problems = subgraph.import_nodes(self, nodes, body_opset)
        if inner_problems:
            details = "; ".join(inner_problems[:3])
            raise ImportProblem(f"operator {proto.op_type} (its function body: {details})")

    def _type_proto(self, name: str) -> TypeProto:
        """An input's type for a context-dependent function body."""
        if not name:
            return TypeProto()
        if name in self.constants:
            value = self.constants[name]
            elem = helper.np_dtype_to_tensor_dtype(value.dtype)
            return helper.make_tensor_type_proto(elem, value.shape)
        t = self.values[name].type
        assert isinstance(t, TensorType)
        code = next(k for k, v in ELEMENT_TYPES.items() if v == t.dt)
        return helper.make_tensor_type_proto(code, t.dims)

    def _results(self, proto: NodeProto, results: Sequence[SSAValue | np.ndarray]) -> None:
        """Record a node's outputs: tensors, or constants known at import time; none
        may exceed the element limit (a last check: converters check sizes computed
        from the model's numbers before they build anything that large)."""
        for name, value in zip(proto.output, results, strict=False):
            if not name:
                continue
            if isinstance(value, np.ndarray):
                self.constants[name] = value
                continue
            t = value.type
            if isinstance(t, TensorType) and not t.is_dynamic:  # symbolic: sized per call
                check_elements(t.dims, f"output '{name}'", self.limits)
            if value._name is None:
                value._name = self.names(name)
            self.values[name] = value

    def _constant(self, proto: NodeProto) -> None:
        attrs = {a.name: a for a in proto.attribute}
        if len(attrs) != 1:
            raise ImportProblem("needs exactly one value attribute")
        name, attr = next(iter(attrs.items()))
        value = get_attribute_value(attr)
        if name == "value":
            array = numpy_helper.to_array(value)
        elif name in ("value_float", "value_floats"):
            array = np.asarray(value, np.float32)
        elif name in ("value_int", "value_ints"):
            array = np.asarray(value, np.int64)
        else:
            raise ImportProblem(f"attribute '{name}' is not supported")
        self.constants[proto.output[0]] = array


def import_model(
    model: ModelProto,
    filename: str,
    input_shapes: Mapping[str, Sequence[int]] | None,
    constant_inputs: Mapping[str, np.ndarray] | None = None,
    limits: ImportLimits = DEFAULT_LIMITS,
    custom_ops: CustomOps | None = None,
    initializers: dict[str, np.ndarray] | None = None,
    dynamic: bool = False,
) -> ModuleOp:
    """The verified graph-level module of `model` (its main graph's `initializers`
    given apart when `detached`; `dynamic`: dim_params stay symbolic); raises
    `OnnxImportError`."""
    shapes, constants = input_shapes or {}, constant_inputs or {}
    args = (limits, custom_ops, initializers, dynamic)
    return GraphImporter(model, filename, shapes, constants, *args).run()


def detached(model: ModelProto, filename: str) -> tuple[ModelProto, dict[str, np.ndarray]]:
    """A model without its main graph's initializers, and their values: for a model
    dlc read itself, so the proto that held the weights is freed before the import
    begins (alive during it, it doubled the weights in memory)."""
    arrays = {init.name: initializer_array(init, filename) for init in model.graph.initializer}
    model.graph.ClearField("initializer")
    return ModelProto.FromString(model.SerializeToString()), arrays


def initializer_array(init: TensorProto, filename: str) -> np.ndarray:
    """An initializer's values; dims that do not match its data are an
    `OnnxImportError` naming it (NumPy's bare ValueError before)."""
    try:
        return numpy_helper.to_array(init)
    except (ValueError, TypeError) as err:
        raise OnnxImportError(
            [
                f"initializer '{init.name}': its data does not match its dims {list(init.dims)} "
                f"and type ({err})"
            ],
            filename,
        ) from None
