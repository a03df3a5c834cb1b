"""Helpers the unit tests share to build graph IR by hand.

- `attr(v)`: Python values as op properties (ints, strings, nested lists; `None` as a
  dynamic element key, which is an empty `ArrayAttr`);
- `inferred_op(cls, operands, props)`: an instruction whose result types come from the
  op class's `infer`, as the parser builds it;
- `graph_module(*ops)`: a verified raw module named "test".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Attribute, Operation, SSAValue

from dlc.dialects.graph import Symbols


def attr(value: Any) -> Attribute:
    """`3` -> IntAttr, `"x"` -> StringAttr, `None` -> `[]` (a dynamic key), lists ->
    ArrayAttr of their converted items; attributes pass through; bools are refused."""
    if isinstance(value, Attribute):
        return value
    if isinstance(value, bool):
        raise TypeError(value)
    if isinstance(value, int):
        return IntAttr(value)
    if isinstance(value, str):
        return StringAttr(value)
    if value is None:
        return ArrayAttr([])
    return ArrayAttr([attr(v) for v in value])


def inferred_op(
    cls: Any,
    operands: Sequence[SSAValue],
    props: Mapping[str, Attribute],
    symbols: Symbols | None = None,
) -> Operation:
    """`cls(operands)` with `props`; its result types come from `cls.infer`."""
    results = cls.infer([o.type for o in operands], dict(props), symbols)
    return cls.create(operands=list(operands), result_types=results, properties=dict(props))


def graph_module(*ops: Operation) -> ModuleOp:
    """A raw-stage module named "test" holding `ops`, verified."""
    module = ModuleOp(list(ops))
    module.attributes["dlc.name"] = StringAttr("test")
    module.attributes["dlc.stage"] = StringAttr("raw")
    module.verify()
    return module
