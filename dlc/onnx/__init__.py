"""dlc's ONNX front end: an ONNX model -> a verified graph-level dlc module.

>>> module = dlc.onnx.load("model.onnx", input_shapes={"x": (1, 3, 224, 224)})
>>> mod = dlc.compile_onnx("model.onnx")   # compiled; mod.main_graph(x) or mod["..."]

The module holds one function named after the graph, with one parameter per graph
input (named after it, characters outside `[A-Za-z0-9_.]` replaced by `_`) and the
graph outputs as its result (a tuple when there are several). Initializers become
literals. Needs the optional dependency `onnx` (`pip install 'dlc[onnx]'`).

The importer is `dlc/onnx/` (not under a `frontends/` package) so that its public name
is `dlc.onnx`, like `dlc.semantics`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from dlc.diagnostics import DiagnosticError, Location
from dlc.onnx.limits import ImportLimits

if TYPE_CHECKING:
    from onnx import ModelProto
    from xdsl.dialects.builtin import ModuleOp

__all__ = ["CustomNode", "ImportLimits", "load", "read_model"]


def read_model(
    path_or_model: object,
    filename: str | None = None,
    external_data_dir: str | os.PathLike[str] | None = None,
) -> tuple[ModelProto, str]:
    """The model, with its external data read in (dlc/onnx/external.py), and the file
    name diagnostics name: the path, else `filename`, else `<model>` (a `ModelProto`, or
    the bytes of a serialized model). External data is read from `external_data_dir`,
    else from a model file's own directory; bytes and protos without it refuse it."""
    try:
        import onnx
    except ImportError:
        raise DiagnosticError(
            "the ONNX front end needs the onnx package: pip install 'dlc[onnx]'"
        ) from None
    from dlc.onnx.external import load_external_data

    base = None if external_data_dir is None else os.fspath(external_data_dir)
    if isinstance(path_or_model, onnx.ModelProto):
        name = filename or "<model>"
        return load_external_data(path_or_model, base, name), name
    if isinstance(path_or_model, bytes):
        name = filename or "<model>"
        try:
            model = onnx.load_model_from_string(path_or_model)
        except Exception as e:  # protobuf's DecodeError and friends
            raise DiagnosticError(f"not an ONNX model: {e}", Location(name, 0, 0)) from None
        return load_external_data(model, base, name), name
    if not isinstance(path_or_model, str | os.PathLike):
        raise TypeError(
            f"expected an onnx.ModelProto or a path, got {type(path_or_model).__name__}"
        )
    filename = os.fspath(path_or_model)
    try:
        model = onnx.load(filename, load_external_data=False)
    except OSError as e:
        reason = e.strerror or str(e)
        raise DiagnosticError(
            f"cannot read '{filename}': {reason}", Location(filename, 0, 0)
        ) from None
    except Exception as e:  # protobuf's DecodeError and friends
        raise DiagnosticError(
            f"cannot read '{filename}' as an ONNX model: {e}", Location(filename, 0, 0)
        ) from None
    if base is None:
        base = os.path.dirname(os.path.abspath(filename))
    return load_external_data(model, base, filename), filename


def load(
    path_or_model: object,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    *,
    filename: str | None = None,
    constant_inputs: Mapping[str, object] | None = None,
    external_data_dir: str | os.PathLike[str] | None = None,
    limits: ImportLimits | None = None,
    custom_ops: Mapping[tuple[str, str], object] | None = None,
    dynamic: bool = False,
) -> ModuleOp:
    """Import an ONNX model (a `ModelProto`, a file path or a serialized model's bytes)
    as a verified graph-level module. `input_shapes` gives the shapes of inputs with
    dynamic dimensions; `filename` names a model that is not a path in diagnostics;
    `constant_inputs` gives graph inputs values known at import time (arrays by input
    name: they become constants, not parameters, which shape and axes inputs must be);
    `external_data_dir` is the only directory external tensor data is read from (default:
    a model file's own directory; a model given as bytes or a `ModelProto` refuses
    external data without it). Locations are plain relative paths below it, through no
    symlink. `limits` (an `ImportLimits`) bounds the sizes a node may make at import
    time (default: `ImportLimits()`; see dlc/onnx/limits.py). `custom_ops` maps
    (domain, op_type) pairs to DLVM text, or to callables of a `dlc.onnx.CustomNode`
    that return it: those nodes become calls of the text's function (see
    dlc/onnx/custom.py); model-local functions need no mapping. `dynamic`: dim_params
    not in `input_shapes` stay symbolic (`<%batch x 8 x f32>`, `compile_onnx`).

    Raises `dlc.onnx.OnnxImportError` (a `DiagnosticError`) naming every unsupported
    node, attribute and dynamic input at once."""
    from dlc.onnx.custom import CustomOps, normalize
    from dlc.onnx.importer import detached, import_model

    custom = CustomOps(normalize(custom_ops))
    model, filename = read_model(path_or_model, filename, external_data_dir)
    initializers = None
    if model is not path_or_model:  # read here: its weights' proto can go (`detached`)
        model, initializers = detached(model, filename)
    constants = _checked(input_shapes, constant_inputs)
    limits = limits or ImportLimits()
    args = (constants, limits, custom, initializers, dynamic)
    return import_model(model, filename, input_shapes, *args)


def _checked(input_shapes: object, constant_inputs: object) -> dict[str, np.ndarray]:
    """The constant inputs as arrays, both mappings checked (TypeError otherwise)."""
    for name, value in (("input_shapes", input_shapes), ("constant_inputs", constant_inputs)):
        if value is not None and not isinstance(value, Mapping):
            raise TypeError(f"{name}: expected a mapping, got {type(value).__name__}")
    return {k: np.asarray(v) for k, v in (constant_inputs or {}).items()}  # type: ignore[attr-defined]


def __getattr__(name: str) -> object:
    if name == "OnnxImportError":
        from dlc.onnx.importer import OnnxImportError

        return OnnxImportError
    if name == "CustomNode":
        from dlc.onnx.custom import CustomNode

        return CustomNode
    raise AttributeError(f"module 'dlc.onnx' has no attribute '{name}'")
