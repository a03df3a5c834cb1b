"""ONNX operators the user maps to DLVM functions: `custom_ops=`.

`dlc.onnx.load(path, custom_ops={("my.domain", "Op"): mapping})` imports each node of
that domain and type as a call (`apply`) of a DLVM function. `mapping` is DLVM text, or
a callable that receives the node (`CustomNode`: its input shapes and element types,
attributes and output count) and returns DLVM text, for operators whose function
depends on shapes or attributes. The text defines the function named after the operator
(`@Op`), or exactly one function; it may define helper functions and declare `[extern]`
C functions, which stay a capability: compiling needs them allowed (`externs=`).

The function's parameters must be the node's input types, its result the node's output
(a tuple for several). Each distinct (text, input types) is imported once, under a name
of its own (`custom.<domain>.<Op>`, numbered when taken), so a model with many instances
of an operator compiles one function. Problems (a parse error in the text, a signature
that does not match, a callable that fails) are import problems naming the node.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from onnx import NodeProto, numpy_helper
from onnx.helper import get_attribute_value
from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import SSAValue

from dlc.diagnostics import DiagnosticError
from dlc.dialects.graph import FuncOp, GlobalRefOp
from dlc.dialects.graph_aggregate import ApplyOp, ExtractOp
from dlc.dialects.graph_types import FunctionType, TensorType, TupleType, format_type
from dlc.onnx.emitter import Emitter, ImportProblem

CustomOp = str | Callable[["CustomNode"], str]
"""DLVM text, or a function of the node that returns DLVM text."""


@dataclass(frozen=True)
class CustomNode:
    """What a `custom_ops` callable knows of the node it maps."""

    domain: str
    op_type: str
    name: str
    input_shapes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    """DLVM element types (`f32`, `i64`, ...)."""
    outputs: int
    attributes: dict[str, Any] = field(default_factory=dict)
    """Attribute values as onnx.helper.get_attribute_value gives them, tensors as arrays."""


def normalize(custom_ops: object) -> dict[tuple[str, str], CustomOp]:
    """`custom_ops` checked: a mapping of (domain, op_type) pairs of strings to DLVM
    text or callables; the default domain may be spelled "" or "ai.onnx"."""
    if custom_ops is None:
        return {}
    if not isinstance(custom_ops, Mapping):
        raise TypeError(f"custom_ops: expected a mapping, got {type(custom_ops).__name__}")
    out: dict[tuple[str, str], CustomOp] = {}
    for key, mapping in custom_ops.items():
        if not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, str) for k in key)):
            raise TypeError(f"custom_ops: keys are (domain, op_type) pairs of str, got {key!r}")
        if not (isinstance(mapping, str) or callable(mapping)):
            raise TypeError(
                f"custom_ops[{key!r}]: expected DLVM text or a callable, "
                f"got {type(mapping).__name__}"
            )
        out[(_domain(key[0]), key[1])] = mapping
    return out


def _domain(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


class CustomOps:
    """The mappings of one import and the functions they have added to the module."""

    def __init__(self, mapping: Mapping[tuple[str, str], CustomOp]) -> None:
        self.mapping = dict(mapping)
        self.funcs: list[FuncOp] = []
        self._imported: dict[tuple[str, tuple[str, ...]], tuple[str, FunctionType]] = {}
        self._externs: dict[str, FunctionType] = {}
        self._taken: set[str] = set()

    def lookup(self, proto: NodeProto) -> CustomOp | None:
        return self.mapping.get((_domain(proto.domain), proto.op_type))

    def call(
        self, proto: NodeProto, mapping: CustomOp, args: list[SSAValue], emit: Emitter
    ) -> list[SSAValue]:
        """The node's outputs: a call of its mapped function on `args`."""
        types = [a.type for a in args]
        if not all(isinstance(t, TensorType) for t in types):
            raise ImportProblem("custom operators take tensors")
        text = mapping if isinstance(mapping, str) else self._text(proto, mapping, types)
        key = (text, tuple(format_type(t) for t in types))
        if key not in self._imported:
            self._imported[key] = self._import(proto, text, types)
        name, fn = self._imported[key]
        outputs = list(proto.output)
        results = fn.output.types if isinstance(fn.output, TupleType) else (fn.output,)
        if len(results) != len(outputs):
            raise ImportProblem(
                f"the mapped function returns {len(results)} values for {len(outputs)} outputs"
            )
        value = emit.op(ApplyOp, args, callee=StringAttr(name), callee_type=fn)
        if not isinstance(fn.output, TupleType):
            return [value]
        return [
            emit.op(ExtractOp, [value], keys=ArrayAttr([IntAttr(i)])) for i in range(len(results))
        ]

    def _text(self, proto: NodeProto, mapping: Callable[[CustomNode], str], types: list) -> str:
        node = CustomNode(
            domain=proto.domain,
            op_type=proto.op_type,
            name=proto.name,
            input_shapes=tuple(tuple(t.dims) for t in types),
            input_dtypes=tuple(t.dt for t in types),
            outputs=len(proto.output),
            attributes={a.name: _attribute(a) for a in proto.attribute},
        )
        try:
            text = mapping(node)
        except Exception as err:  # noqa: BLE001 -- the user's function: reported, never a traceback
            raise ImportProblem(
                f"its custom_ops function raised {type(err).__name__}: {err}"
            ) from None
        if not isinstance(text, str):
            raise ImportProblem(
                f"its custom_ops function returned {type(text).__name__}, not DLVM text"
            )
        return text

    def _import(self, proto: NodeProto, text: str, types: list) -> tuple[str, FunctionType]:
        from dlc.parser import parse_module

        filename = f"<custom_ops {proto.domain or 'ai.onnx'}::{proto.op_type}>"
        try:
            module = parse_module(text, filename)
        except DiagnosticError as err:
            raise ImportProblem(f"its DLVM text: {_located(err)}") from None
        funcs: list[FuncOp] = []
        for op in module.body.block.ops:
            if not isinstance(op, FuncOp):
                raise ImportProblem(
                    f"its DLVM text may define functions only, not {op.name.split('.')[-1]}"
                )
            funcs.append(op)
        entry = _entry(funcs, proto.op_type)
        fn = entry.function_type
        if list(fn.inputs.data) != list(types):
            want = ", ".join(format_type(t) for t in fn.inputs.data)
            got = ", ".join(format_type(t) for t in types)
            raise ImportProblem(
                f"@{entry.sym_name.data} takes ({want}), the node's inputs are ({got})"
            )
        renamed = self._names(proto, funcs, entry)
        name = renamed[entry.sym_name.data]
        for func in funcs:
            module.body.block.detach_op(func)
            if func.decl is not None and func.decl.data == "extern":
                self._extern(func)
                continue
            _rename(func, renamed)
            self.funcs.append(func)
        return name, fn

    def _names(self, proto: NodeProto, funcs: list[FuncOp], entry: FuncOp) -> dict[str, str]:
        """New names for the text's defined functions (externs keep their C names)."""
        base = "custom." + re.sub(r"[^A-Za-z0-9_.]", "_", f"{proto.domain}.{proto.op_type}")
        renamed: dict[str, str] = {}
        for func in funcs:
            old = func.sym_name.data
            if func.decl is not None and func.decl.data == "extern":
                renamed[old] = old
                continue
            stem = base if func is entry else f"{base}.{old}"
            name, k = stem, 0
            while name in self._taken:
                k += 1
                name = f"{stem}.{k}"
            self._taken.add(name)
            renamed[old] = name
        return renamed

    def _extern(self, func: FuncOp) -> None:
        name = func.sym_name.data
        known = self._externs.get(name)
        if known is not None and known != func.function_type:
            raise ImportProblem(
                f"extern @{name} is declared with two types: {format_type(known)} "
                f"and {format_type(func.function_type)}"
            )
        if known is None:
            self._externs[name] = func.function_type
            self.funcs.append(func)


def _entry(funcs: list[FuncOp], op_type: str) -> FuncOp:
    named = [f for f in funcs if f.sym_name.data == op_type and f.decl is None]
    if named:
        return named[0]
    defined = [f for f in funcs if f.decl is None]
    if len(defined) != 1:
        raise ImportProblem(
            f"its DLVM text defines {len(defined)} functions and none is named @{op_type}"
        )
    return defined[0]


def _rename(func: FuncOp, renamed: dict[str, str]) -> None:
    """`func` and the symbols it refers to (calls, function values, adjoints' primals)
    under their new names."""
    func.properties["sym_name"] = StringAttr(renamed[func.sym_name.data])
    if func.primal is not None and func.primal.data in renamed:
        func.properties["primal"] = StringAttr(renamed[func.primal.data])
    for op in func.walk():
        if isinstance(op, ApplyOp) and op.callee.data in renamed:
            op.properties["callee"] = StringAttr(renamed[op.callee.data])
        elif isinstance(op, GlobalRefOp) and op.symbol.data in renamed:
            op.properties["symbol"] = StringAttr(renamed[op.symbol.data])


def _attribute(attr: Any) -> Any:
    value = get_attribute_value(attr)
    if hasattr(value, "data_type") and hasattr(value, "dims"):
        return numpy_helper.to_array(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8", "replace") for v in value]
    return value


def _located(err: DiagnosticError) -> str:
    where = err.location
    if where is None:
        return err.message
    return f"{where.filename}:{where.line}:{where.column}: {err.message}"
