"""Each xDSL `llvm` op `llvm_text` prints, as the line of LLVM IR that xDSL's converter
(xdsl/backend/llvm/convert_op.py) makes of it; the properties the converter ignores
(branch weights, `noWrapFlags`, `select`'s and `fcmp`'s fast-math flags, a load's
ordering) are ignored here too, so both give LLVM the same module."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from xdsl.dialects import llvm
from xdsl.dialects.builtin import AnyFloat
from xdsl.ir import Operation
from xdsl.utils.type import get_element_type_or_self

from dlc.runtime.llvm_text_ops import (
    FunctionState,
    Unsupported,
    escaped,
    operand_text,
    symbol,
    type_text,
)

Printer = Callable[[Any, FunctionState], str]

_BINARY: dict[type[Operation], str] = {
    llvm.AddOp: "add",
    llvm.FAddOp: "fadd",
    llvm.SubOp: "sub",
    llvm.FSubOp: "fsub",
    llvm.MulOp: "mul",
    llvm.FMulOp: "fmul",
    llvm.UDivOp: "udiv",
    llvm.SDivOp: "sdiv",
    llvm.FDivOp: "fdiv",
    llvm.URemOp: "urem",
    llvm.SRemOp: "srem",
    llvm.FRemOp: "frem",
    llvm.ShlOp: "shl",
    llvm.LShrOp: "lshr",
    llvm.AShrOp: "ashr",
    llvm.AndOp: "and",
    llvm.OrOp: "or",
    llvm.XOrOp: "xor",
}
_CASTS: dict[type[Operation], str] = {
    llvm.TruncOp: "trunc",
    llvm.ZExtOp: "zext",
    llvm.SExtOp: "sext",
    llvm.PtrToIntOp: "ptrtoint",
    llvm.IntToPtrOp: "inttoptr",
    llvm.BitcastOp: "bitcast",
    llvm.FPExtOp: "fpext",
    llvm.FPTruncOp: "fptrunc",
    llvm.SIToFPOp: "sitofp",
}
_OVERFLOW_ORDER = ("nuw", "nsw")  # llvmlite prints the flags in the order given; LLVM any


_FASTMATH_ORDER = ("nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc")
"""LLVM's order of fast-math flags: the flags are a set, and a text that spelled them
in the set's order would differ between processes (string hashes are salted), and
with it the name of a unit (`unit_cache`) and its cache key."""


def _fastmath(op: Any) -> list[str]:
    names = {f.value for f in op.fastmathFlags.data}
    return [n for n in _FASTMATH_ORDER if n in names]


_FLAG_FAMILIES = (
    llvm.ArithmeticBinOpOverflow,
    llvm.AbstractFloatArithOp,
    llvm.ArithmeticBinOpExact,
    llvm.ArithmeticBinOpDisjoint,
)
_FAMILIES: dict[type[Operation], tuple[bool, ...]] = {}
"""An op class -> whether it is each of `_FLAG_FAMILIES`, asked once per class
(`dlc.analysis.walk.kind_of`: a failing `isinstance` is slow on xDSL's classes)."""


def _families(op: Operation) -> tuple[bool, ...]:
    found = _FAMILIES.get(type(op))
    if found is None:
        found = _FAMILIES[type(op)] = tuple(isinstance(op, c) for c in _FLAG_FAMILIES)
    return found


def _binary_flags(op: Any) -> list[str]:
    overflow, floating, exact, disjoint = _families(op)
    if overflow and op.overflowFlags:
        names = {f.value for f in llvm.OverflowAttr.from_int(op.overflowFlags.value.data).data}
        return [n for n in _OVERFLOW_ORDER if n in names]
    if floating and op.fastmathFlags is not None:
        return _fastmath(op)
    if exact and op.is_exact:
        return ["exact"]
    if disjoint and op.is_disjoint:
        return ["disjoint"]
    return []


def _binary(op: Operation, fn: FunctionState, opcode: str) -> str:
    lhs, rhs = op.operands
    words = " ".join([opcode, *_binary_flags(op)])
    name = fn.define(op.results[0])
    return f"{name} = {words} {fn.typed(lhs)}, {fn.define(rhs)}"


def _cast(op: Operation, fn: FunctionState, opcode: str) -> str:
    flags: list[str] = []
    if isinstance(op, llvm.IntegerConversionOpOverflow) and op.overflowFlags:
        names = {f.value for f in op.overflowFlags.data}
        flags = [n for n in _OVERFLOW_ORDER if n in names]
    elif isinstance(op, llvm.IntegerConversionOpNNeg) and op.non_neg:
        flags = ["nneg"]
    words = " ".join([opcode, *flags])
    result = op.results[0]
    return f"{fn.define(result)} = {words} {fn.typed(op.operands[0])} to {type_text(result.type)}"


def _icmp(op: llvm.ICmpOp, fn: FunctionState) -> str:
    predicate = llvm.ICmpPredicateFlag.from_int(op.predicate.value.data).value
    return f"{fn.define(op.res)} = icmp {predicate} {fn.typed(op.lhs)}, {fn.define(op.rhs)}"


def _fcmp(op: llvm.FCmpOp, fn: FunctionState) -> str:
    predicate = llvm.FCmpPredicateFlag.from_int(op.predicate.value.data).value
    return f"{fn.define(op.res)} = fcmp {predicate} {fn.typed(op.lhs)}, {fn.define(op.rhs)}"


def _fneg(op: llvm.FNegOp, fn: FunctionState) -> str:
    words = " ".join(["fneg", *_fastmath(op)])
    return f"{fn.define(op.res)} = {words} {fn.typed(op.arg)}"


def _call_line(result: Any, callee: str, args: str, words: list[str], fn: FunctionState) -> str:
    if result is None:
        return " ".join([*words, f"void {callee}({args})"])
    return f"{fn.define(result)} = " + " ".join(
        [*words, f"{type_text(result.type)} {callee}({args})"]
    )


def _call(op: llvm.CallOp, fn: FunctionState) -> str:
    if op.op_bundle_operands or op.op_bundle_sizes or op.callee is None:
        raise Unsupported("llvm.call with operand bundles or indirect")
    name = op.callee.string_value()
    ftype = fn.module.functions.get(name)
    if ftype is None:
        raise Unsupported(f"llvm.call of {name}, not a function of the module")
    words = ["tail call" if op.TailCallKind.data != "none" else "call"]
    cconv = op.CConv.cconv_name
    if cconv and cconv != "ccc":
        words.append(cconv)
    returned = op.returned
    if returned is not None and isinstance(get_element_type_or_self(returned.type), AnyFloat):
        words.extend(_fastmath(op))
    callee = symbol(name)
    if ftype.is_variadic:
        params = [type_text(t) for t in ftype.inputs.data] + ["..."]
        callee = f"({', '.join(params)}) {callee}"
    args = ", ".join(fn.typed(a) for a in op.args)
    return _call_line(returned, callee, args, words, fn)


def _call_intrinsic(op: llvm.CallIntrinsicOp, fn: FunctionState) -> str:
    if op.op_bundle_operands or op.op_bundle_sizes or any(op.fastmathFlags.data):
        raise Unsupported("llvm.call_intrinsic with operand bundles or fast-math flags")
    name = op.intrin.data
    result = type_text(op.ress.type) if op.ress is not None else "void"
    fn.module.intrinsic(name, result, [type_text(a.type) for a in op.args])
    args = ", ".join(fn.typed(a) for a in op.args)
    return _call_line(op.ress, symbol(name), args, ["call"], fn)


def _inline_asm(op: llvm.InlineAsmOp, fn: FunctionState) -> str:
    effect = " sideeffect" if op.has_side_effects is not None else ""
    text, constraints = escaped(op.asm_string.data.encode()), escaped(op.constraints.data.encode())
    callee = f'asm{effect} "{text}", "{constraints}"'
    args = ", ".join(fn.typed(a) for a in op.operands_)
    return _call_line(op.res, callee, args, ["call"], fn)


def _align(op: Any) -> str:
    return f", align {op.alignment.value.data}" if op.alignment else ""


def _alloca(op: llvm.AllocaOp, fn: FunctionState) -> str:
    return (
        f"{fn.define(op.res)} = alloca {type_text(op.elem_type)}, {fn.typed(op.size)}{_align(op)}"
    )


def _load(op: llvm.LoadOp, fn: FunctionState) -> str:
    result = op.results[0]
    return f"{fn.define(result)} = load {type_text(result.type)}, {fn.typed(op.ptr)}{_align(op)}"


def _store(op: llvm.StoreOp, fn: FunctionState) -> str:
    return f"store {fn.typed(op.value)}, {fn.typed(op.ptr)}{_align(op)}"


def _gep(op: llvm.GEPOp, fn: FunctionState) -> str:
    ssa = iter(op.ssa_indices)
    indices = [
        fn.typed(next(ssa)) if index == llvm.GEP_USE_SSA_VAL else f"i32 {index}"
        for index in op.rawConstantIndices.iter_values()
    ]
    words = "getelementptr inbounds" if op.inbounds is not None else "getelementptr"
    head = f"{fn.define(op.results[0])} = {words} {type_text(op.elem_type)}, {fn.typed(op.ptr)}"
    return ", ".join([head, *indices])


def _extract_value(op: llvm.ExtractValueOp, fn: FunctionState) -> str:
    position = ", ".join(str(p) for p in op.position.iter_values())
    return f"{fn.define(op.res)} = extractvalue {fn.typed(op.container)}, {position}"


def _insert_value(op: llvm.InsertValueOp, fn: FunctionState) -> str:
    position = ", ".join(str(p) for p in op.position.iter_values())
    value = f"{fn.typed(op.container)}, {fn.typed(op.value)}"
    return f"{fn.define(op.res)} = insertvalue {value}, {position}"


def _select(op: llvm.SelectOp, fn: FunctionState) -> str:
    operands = f"{fn.typed(op.cond)}, {fn.typed(op.lhs)}, {fn.typed(op.rhs)}"
    return f"{fn.define(op.res)} = select {operands}"


def _br(op: llvm.BrOp, fn: FunctionState) -> str:
    return f"br label {fn.label(op.successor)}"


def _cond_br(op: llvm.CondBrOp, fn: FunctionState) -> str:
    targets = f"label {fn.label(op.then_block)}, label {fn.label(op.else_block)}"
    return f"br {fn.typed(op.cond)}, {targets}"


def _return(op: Operation, fn: FunctionState) -> str:
    return f"ret {fn.typed(op.operands[0])}" if op.operands else "ret void"


def _insert_element(op: llvm.InsertElementOp, fn: FunctionState) -> str:
    operands = f"{fn.typed(op.vector)}, {fn.typed(op.value)}, {fn.typed(op.index)}"
    return f"{fn.define(op.res)} = insertelement {operands}"


def _shuffle_vector(op: llvm.ShuffleVectorOp, fn: FunctionState) -> str:
    mask = op.mask.get_values()
    spelled = "<" + ", ".join(f"i32 {m}" for m in mask) + ">"
    operands = f"{fn.typed(op.v1)}, {fn.typed(op.v2)}, <{len(mask)} x i32> {spelled}"
    return f"{fn.define(op.res)} = shufflevector {operands}"


TABLE: dict[type[Operation], Printer] = {
    **{kind: partial(_binary, opcode=opcode) for kind, opcode in _BINARY.items()},
    **{kind: partial(_cast, opcode=opcode) for kind, opcode in _CASTS.items()},
    llvm.ICmpOp: _icmp,
    llvm.FCmpOp: _fcmp,
    llvm.FNegOp: _fneg,
    llvm.CallOp: _call,
    llvm.CallIntrinsicOp: _call_intrinsic,
    llvm.InlineAsmOp: _inline_asm,
    llvm.AllocaOp: _alloca,
    llvm.LoadOp: _load,
    llvm.StoreOp: _store,
    llvm.GEPOp: _gep,
    llvm.ExtractValueOp: _extract_value,
    llvm.InsertValueOp: _insert_value,
    llvm.SelectOp: _select,
    llvm.BrOp: _br,
    llvm.CondBrOp: _cond_br,
    llvm.UnreachableOp: lambda op, fn: "unreachable",
    llvm.ReturnOp: _return,
    llvm.InsertElementOp: _insert_element,
    llvm.ShuffleVectorOp: _shuffle_vector,
}
"""The printer of each op class (an op of a subclass, such as dlc's vector `fcmp`, uses
its base class's)."""

_PRINTERS: dict[type[Operation], Printer | None] = {}


def instruction(op: Operation, fn: FunctionState) -> str | None:
    """The line of `op`, None for an operand-only op (`llvm_text_ops.operand_text`);
    raises `Unsupported` for an op the printer does not know."""
    kind = type(op)
    if kind not in _PRINTERS:
        _PRINTERS[kind] = next((TABLE[c] for c in kind.__mro__ if c in TABLE), None)
    printer = _PRINTERS[kind]
    if printer is not None:
        return printer(op, fn)
    if operand_text(op) is None:
        raise Unsupported(op.name)
    return None
