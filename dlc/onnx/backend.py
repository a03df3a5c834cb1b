"""dlc as an ONNX backend (`onnx.backend.base.Backend`), so that ONNX's own backend
test suite (`onnx.backend.test.BackendTest`) runs against dlc.

>>> import dlc.onnx.backend as backend
>>> rep = backend.prepare(model, "CPU")      # imported and compiled by dlc
>>> y, = rep.run([x])                         # inputs by position, outputs in order
>>> backend.run_node(node, [a, b])            # one node, shapes from the inputs

A model goes through `dlc.onnx.load` and the same pipeline as `dlc.compile_onnx`. A
model whose inputs have dynamic dimensions is compiled on each first call with new
input shapes (the shapes of the arrays given to `run`). Graph inputs that dlc needs as
constants (Reshape's shape, the axes of a reduction, Slice's starts: what an
`OnnxImportError` lists as `wanted_constants`) are compiled in: such a model is
compiled for each new value of those inputs. What dlc cannot import raises
`dlc.onnx.OnnxImportError` from `prepare` (or from the first `run` of a dynamic
model), naming every unsupported node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, TypeProto, helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

from dlc.onnx import load
from dlc.onnx.graph_io import declared_dims
from dlc.onnx.importer import OnnxImportError

TEST_OPTIONS = ("rtol", "atol")
"""Keyword arguments `BackendTest` passes to `prepare` for its own comparison."""


def _static_shapes(model: ModelProto) -> bool:
    """Whether every graph input that is not an initializer has a fixed shape."""
    constants = {init.name for init in model.graph.initializer}
    for value in model.graph.input:
        if value.name in constants:
            continue
        if None in declared_dims(value.type.tensor_type):
            return False
    return True


def _opt_level(opt_level: object) -> int:
    """`dlc.compile`'s check of `opt_level` (the facade is not imported from here)."""
    if isinstance(opt_level, bool) or not isinstance(opt_level, int):
        raise TypeError(f"opt_level must be an int in 0..3, got {type(opt_level).__name__}")
    if not 0 <= opt_level <= 3:
        raise ValueError(f"opt_level must be in 0..3, got {opt_level}")
    return opt_level


class DlcRep(BackendRep):
    """A model prepared by dlc: compiled once per set of input shapes, and per value
    of the graph inputs dlc needs as constants (shape and axes inputs)."""

    def __init__(self, model: ModelProto, options: dict[str, Any]):
        self.model = model
        self.options = options
        constants = {init.name for init in model.graph.initializer}
        self.input_names = [v.name for v in model.graph.input if v.name not in constants]
        self.output_names = [v.name for v in model.graph.output]
        self.specialized: list[str] = []
        """Graph inputs whose values are compiled in (they must be constants)."""
        self._compiled: dict[tuple[object, ...], Any] = {}
        if _static_shapes(model):
            try:
                self._compiled[()] = self._compile(None, {})
            except OnnxImportError as err:
                if not err.wanted_constants:
                    raise
                self.specialized = list(dict.fromkeys(err.wanted_constants))

    def _compile(
        self, shapes: Mapping[str, tuple[int, ...]] | None, constants: Mapping[str, np.ndarray]
    ) -> Any:
        from dlc.api import compile_graph_module

        module = load(self.model, shapes, constant_inputs=constants)
        compiled = compile_graph_module(module, **self.options)
        (name,) = compiled.functions
        return compiled[name]

    def _function(self, arrays: Sequence[np.ndarray]) -> Any:
        """The compiled function for these inputs; it takes the inputs that are not
        specialized."""
        if () in self._compiled:
            return self._compiled[()]
        given = dict(zip(self.input_names, arrays, strict=True))
        while True:
            constants = {n: given[n] for n in self.specialized}
            key = tuple(
                (a.shape, a.dtype.str, a.tobytes() if n in constants else b"")
                for n, a in given.items()
            )
            if key in self._compiled:
                return self._compiled[key]
            shapes = {n: a.shape for n, a in given.items() if n not in constants}
            try:
                self._compiled[key] = self._compile(shapes, constants)
                return self._compiled[key]
            except OnnxImportError as err:
                new = [n for n in err.wanted_constants if n not in self.specialized]
                if not new:
                    raise
                self.specialized += dict.fromkeys(new)

    def _arrays(self, inputs: Any) -> list[np.ndarray]:
        if isinstance(inputs, Mapping):
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise ValueError(f"run: input '{missing[0]}' is not given")
            inputs = [inputs[n] for n in self.input_names]
        elif isinstance(inputs, np.ndarray):
            inputs = [inputs]
        arrays = [np.asarray(a) for a in inputs]
        if len(arrays) != len(self.input_names):
            raise ValueError(
                f"run: the model has {len(self.input_names)} inputs, got {len(arrays)}"
            )
        return arrays

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        """The outputs, in graph-output order, for `inputs` (a sequence in graph-input
        order, a mapping by input name, or one array for a one-input model)."""
        if kwargs:
            raise TypeError(f"run: unexpected keyword argument '{next(iter(kwargs))}'")
        arrays = self._arrays(inputs)
        function = self._function(arrays)
        args = [
            a for n, a in zip(self.input_names, arrays, strict=True) if n not in self.specialized
        ]
        result = function(*args)
        outputs = list(result) if len(self.output_names) > 1 else [result]
        outputs = [np.asarray(o) for o in outputs]
        return namedtupledict("Outputs", self.output_names)(*outputs)


class DlcBackend(Backend):
    """`onnx.backend.base.Backend` for dlc (CPU only)."""

    @classmethod
    def prepare(cls, model: ModelProto, device: str = "CPU", **kwargs: Any) -> DlcRep:
        """Import and compile `model` with `dlc.compile`'s keyword options."""
        if not cls.supports_device(device):
            raise ValueError(f"dlc runs on the CPU only, not on '{device}'")
        if not isinstance(model, ModelProto):
            raise TypeError(f"prepare: expected an onnx.ModelProto, got {type(model).__name__}")
        options = {k: v for k, v in kwargs.items() if k not in TEST_OPTIONS}
        if "opt_level" in options:
            options["opt_level"] = _opt_level(options["opt_level"])
        return DlcRep(model, options)

    @classmethod
    def run_model(
        cls, model: ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any
    ) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(
        cls,
        node: NodeProto,
        inputs: Any,
        device: str = "CPU",
        outputs_info: Sequence[tuple[np.dtype, tuple[int, ...]]] | None = None,
        **kwargs: Any,
    ) -> tuple[Any, ...]:
        """Run one node on `inputs` (arrays, in the node's input order; shapes and
        element types come from them). `opset_version` selects the default-domain
        opset (default: the newest onnx knows)."""
        opset = kwargs.pop("opset_version", onnx.defs.onnx_opset_version())
        arrays = [
            np.asarray(a) for a in (inputs.values() if isinstance(inputs, Mapping) else inputs)
        ]
        names = [n for n in node.input if n]
        if len(names) != len(arrays):
            raise ValueError(f"run_node: the node has {len(names)} inputs, got {len(arrays)}")
        graph_inputs = [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in zip(names, arrays, strict=True)
        ]
        graph_outputs = [helper.make_value_info(n, TypeProto()) for n in node.output if n]
        if outputs_info is not None:
            graph_outputs = [
                helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.dtype(dt)), s)
                for n, (dt, s) in zip(node.output, outputs_info, strict=False)
            ]
        graph = helper.make_graph([node], "run_node", graph_inputs, graph_outputs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        return cls.run_model(model, arrays, device, **kwargs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        try:
            return Device(device).type == DeviceType.CPU
        except (AttributeError, ValueError):
            return False


prepare = DlcBackend.prepare
run_model = DlcBackend.run_model
run_node = DlcBackend.run_node
supports_device = DlcBackend.supports_device
is_compatible = DlcBackend.is_compatible
