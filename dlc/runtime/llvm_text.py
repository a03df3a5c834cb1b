"""LLVM IR text of an llvm-level module, printed from the xDSL ops in one walk.

The JIT and the ahead-of-time compiler used to go through xDSL's `convert_module`, which
builds an llvmlite `ir` object per instruction only to print it as text for LLVM to
parse again: for a whole model tens of thousands of objects and seconds of Python. This
printer writes the text directly, as llvmlite would print the converter's module: the
same instructions and types, the properties the converter drops dropped too (function
linkage, branch weights, ...), the same names (`llvm_text_ops.FunctionState`), so LLVM
parses both into the same module (test/unit/runtime/test_llvm_text.py compares them).
An op, type or attribute it does not spell raises `Unsupported`, and the caller
converts the whole module with xDSL's converter instead (`jit.ir_text`): valid input
is never refused. Types, constants and names: `llvm_text_ops.py`; instructions:
`llvm_text_instructions.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    IntegerAttr,
    StringAttr,
)
from xdsl.ir import Attribute, Block

from dlc.runtime import llvm_text_ops as ops
from dlc.runtime.llvm_text_instructions import instruction
from dlc.runtime.llvm_text_ops import Unsupported, constant_text, escaped, symbol, type_text

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

__all__ = ["Unsupported", "global_line", "module_text"]

_ARG_FLAGS = {
    "llvm.inreg": "inreg",
    "llvm.nest": "nest",
    "llvm.noalias": "noalias",
    "llvm.nocapture": "captures(none)",
    "llvm.nofree": "nofree",
    "llvm.nonnull": "nonnull",
    "llvm.noundef": "noundef",
    "llvm.returned": "returned",
    "llvm.signext": "signext",
    "llvm.zeroext": "zeroext",
}
_ARG_INTS = {
    "llvm.align": "align",
    "llvm.dereferenceable": "dereferenceable",
    "llvm.dereferenceable_or_null": "dereferenceable_or_null",
}
_ARG_TYPES = {"llvm.byval", "llvm.byref", "llvm.sret", "llvm.inalloca", "llvm.preallocated"}


def global_line(
    op: llvm.GlobalOp,
    *,
    linkage: str | None = None,
    initializer: str | None = None,
    hidden: bool = False,
    align: int | None = None,
) -> str:
    """`@name = ...` as llvmlite prints the global xDSL's converter makes of `op`, with
    `linkage` and `initializer` (constant text) in place of the op's when given."""
    t = type_text(op.global_type)
    if initializer is None and op.value is not None:
        if isinstance(op.value, StringAttr):
            raw = op.value.data.encode()
            t = f"[{len(raw)} x i8]"
            initializer = f'c"{escaped(raw)}"'
        else:
            initializer = constant_text(op.global_type, op.value)
    linkage = linkage if linkage is not None else op.linkage.linkage.data
    if not linkage and initializer is None:
        linkage = "external"
    if initializer is None and linkage not in ("external", "extern_weak"):
        initializer = "undef"
    words = [linkage, "hidden" if hidden else ""]
    if op.addr_space.value.data:
        words.append(f"addrspace({op.addr_space.value.data})")
    words += ["constant" if op.constant is not None else "global", t]
    line = f"{symbol(op.sym_name.data)} = " + " ".join(w for w in words if w)
    if initializer is not None:
        line += " " + initializer
    return line + (f", align {align}" if align is not None else "")


def _arg_attributes(attrs: Attribute | None) -> str:
    if attrs is None:
        return ""
    words: list[str] = []
    assert isinstance(attrs, DictionaryAttr)
    for name, value in attrs.data.items():
        if name in _ARG_TYPES:
            raise Unsupported(f"argument attribute {name}")
        if name in _ARG_FLAGS:
            words.append(_ARG_FLAGS[name])
        elif name in _ARG_INTS:
            assert isinstance(value, IntegerAttr)
            words.append(f"{_ARG_INTS[name]} {value.value.data}")
    return "".join(" " + w for w in words)


def _signature(op: llvm.FuncOp, names: list[str] | None) -> str:
    """`RET @name(T attrs %a, ...)` of a definition (`names`) or a declaration."""
    ftype = op.function_type
    arg_attrs = list(op.arg_attrs.data) if op.arg_attrs is not None else []
    params = []
    for index, t in enumerate(ftype.inputs.data):
        attrs = _arg_attributes(arg_attrs[index] if index < len(arg_attrs) else None)
        params.append(type_text(t) + attrs + (f" {names[index]}" if names else ""))
    if ftype.is_variadic:
        params.append("...")
    inline = " noinline" if op.no_inline is not None else ""
    name = symbol(op.sym_name.data)
    return f"{type_text(ftype.output)} {name}({', '.join(params)}){inline}"


def _function(op: llvm.FuncOp, module: ops.ModuleState) -> list[str]:
    if not op.body.blocks:
        return [f"declare {_signature(op, None)}", ""]
    blocks = list(op.body.blocks)
    fn = ops.FunctionState(module, blocks, len(op.function_type.inputs))
    incoming = fn.incoming(blocks)
    lines = [f"define {_signature(op, fn.arguments)}", "{"]
    for index, block in enumerate(blocks):
        lines.extend(_block(block, index == 0, fn, incoming))
    lines += ["}", ""]
    return lines


def _block(
    block: Block, entry: bool, fn: ops.FunctionState, incoming: dict[int, list[str]]
) -> Iterable[str]:
    yield f"{fn.label(block)[1:]}:"
    if not entry:
        for arg in block.args:
            name = fn.define(arg)
            yield f"  {name} = phi {type_text(arg.type)} {', '.join(incoming.get(id(arg), []))}"
    for op in block.ops:
        line = instruction(op, fn)
        if line is not None:
            yield "  " + line


def module_text(
    module: ModuleOp,
    triple: str,
    data_layout: str,
    data: Callable[[llvm.GlobalOp], str | None],
    replaced: dict[str, str] | None = None,
) -> list[str]:
    """The lines of `module` as LLVM IR. `data(op)` gives the line of a data global,
    None for any other global, and is called (in module order) only once all else is
    printed: an `Unsupported` op comes first. `replaced`: the whole line of a global."""
    replaced = replaced or {}
    state = ops.ModuleState(module)
    functions: list[str] = []
    globals_: list[tuple[llvm.GlobalOp, str | None]] = []
    for op in module.ops:
        if isinstance(op, llvm.FuncOp):
            functions.extend(_function(op, state))
        elif not isinstance(op, llvm.GlobalOp):
            raise Unsupported(op.name)
        elif op.sym_name.data in replaced:
            globals_.append((op, replaced[op.sym_name.data]))
        else:
            globals_.append((op, None if _is_data(op) else global_line(op)))
    lines = [f'target triple = "{triple}"', f'target datalayout = "{data_layout}"', ""]
    for op, line in globals_:
        given = line if line is not None else data(op)
        assert given is not None, op.sym_name.data  # `_is_data` and `data` agree
        lines.append(given)
    return [*lines, "", *functions, *state.declarations]


def _is_data(op: llvm.GlobalOp) -> bool:
    """Whether `constant_data` gives `op`'s bytes (an internal constant of dense data)."""
    return (
        isinstance(op.value, DenseIntOrFPElementsAttr)
        and op.constant is not None
        and op.linkage.linkage.data == "internal"
    )
