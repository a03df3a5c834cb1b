"""Types, constants and value names of `llvm_text`, spelled as llvmlite spells what
xDSL's converter (xdsl/backend/llvm/convert_op.py, convert_type.py) makes of them.
Here: types, constants and the names of values; the instructions are in
`llvm_text_instructions.py`. Constants, `mlir.addressof`, `mlir.undef` and `mlir.zero`
are operands, not lines."""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    VectorType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp


class Unsupported(Exception):
    """An op, type or attribute this printer does not spell (xDSL's converter does)."""


_SIMPLE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-$._")
_PRINTABLE = frozenset(range(32, 127)) - {ord('"'), ord("\\")}


def escaped(raw: bytes) -> str:
    """`raw` inside an LLVM string: printable ASCII as is, other bytes as `\\XX`."""
    return "".join(chr(b) if b in _PRINTABLE else f"\\{b:02x}" for b in raw)


def symbol(name: str) -> str:
    """`@name`, quoted unless it is a simple identifier (as llvmlite spells it)."""
    if name and not name[0].isdigit() and all(c in _SIMPLE for c in name):
        return "@" + name
    return '@"' + name.replace("\\", "\\5c").replace('"', "\\22") + '"'


_TYPES: dict[Attribute, str] = {}
_TYPE_OBJECTS: dict[int, tuple[Attribute, str]] = {}
"""Spellings by the identity of the type object (hashing an attribute walks its
parameters; most values share a few type objects), with the object, so that no other
takes its `id` while it is here."""
_TYPE_OBJECTS_LIMIT = 50_000


def type_text(t: Attribute) -> str:
    """LLVM's spelling of type `t` (memoized: a module spells a few types many times)."""
    known = _TYPE_OBJECTS.get(id(t))
    if known is not None:
        return known[1]
    text = _TYPES.get(t)
    if text is None:
        text = _TYPES[t] = _type_text(t)
    if len(_TYPE_OBJECTS) >= _TYPE_OBJECTS_LIMIT:
        _TYPE_OBJECTS.clear()
    _TYPE_OBJECTS[id(t)] = (t, text)
    return text


def _type_text(t: Attribute) -> str:
    if isinstance(t, IntegerType):
        return f"i{t.width.data}"
    names: dict[type[Attribute], str] = {
        Float16Type: "half",
        Float32Type: "float",
        Float64Type: "double",
    }
    simple = names.get(type(t))
    if simple is not None:
        return simple
    if isinstance(t, llvm.LLVMVoidType):
        return "void"
    if isinstance(t, llvm.LLVMPointerType):
        space = t.addr_space
        return (
            f"ptr addrspace({space.data})" if isinstance(space, IntAttr) and space.data else "ptr"
        )
    if isinstance(t, VectorType) and len(t.get_shape()) == 1 and not t.get_num_scalable_dims():
        return f"<{t.get_shape()[0]} x {type_text(t.element_type)}>"
    if isinstance(t, llvm.LLVMArrayType):
        return f"[{t.size.data} x {type_text(t.type)}]"
    if isinstance(t, llvm.LLVMStructType):
        return "{" + ", ".join(type_text(m) for m in t.types.data) + "}"
    raise Unsupported(f"type {t}")


def float_text(t: Attribute, value: float) -> str:
    """A float constant as llvmlite spells it: the hex of the double, rounded to `t`."""
    if isinstance(t, Float32Type):
        value = struct.unpack("f", struct.pack("f", value))[0]
    elif isinstance(t, Float16Type):
        value = struct.unpack("e", struct.pack("e", value))[0]
    return "0x{:016x}".format(struct.unpack("Q", struct.pack("d", value))[0])


def scalar_text(t: Attribute, value: Attribute | int | float) -> str:
    raw = value.value.data if isinstance(value, IntegerAttr | FloatAttr) else value
    if isinstance(raw, Attribute):
        raise Unsupported(f"constant {raw}")
    if isinstance(t, IntegerType):
        return str(int(raw))
    if isinstance(t, Float16Type | Float32Type | Float64Type):
        return float_text(t, float(raw))
    raise Unsupported(f"constant of type {t}")


def constant_text(t: Attribute, value: Attribute) -> str:
    """The LLVM constant of type `t` that xDSL's `create_constant` makes of `value`."""
    if isinstance(value, IntegerAttr | FloatAttr):
        return scalar_text(t, value)
    if not isinstance(value, DenseIntOrFPElementsAttr):
        raise Unsupported(f"constant {type(value).__name__}")
    if isinstance(t, VectorType):
        element, brackets = t.element_type, "<>"
    elif isinstance(t, llvm.LLVMArrayType):
        element, brackets = t.type, "[]"
    else:
        raise Unsupported(f"dense constant of type {t}")
    spelled = type_text(element)
    items = ", ".join(f"{spelled} {scalar_text(element, v)}" for v in value.get_values())
    return brackets[0] + items + brackets[1]


def _null(t: Attribute) -> str:
    if isinstance(t, IntegerType):
        return "0"
    if isinstance(t, Float16Type | Float32Type | Float64Type):
        return "0.0"
    return "null" if isinstance(t, llvm.LLVMPointerType) else "zeroinitializer"


class ModuleState:
    """What the functions of one module share: the callees' types and the intrinsics
    declared so far (their `declare` lines go at the end, as llvmlite puts them)."""

    def __init__(self, module: ModuleOp) -> None:
        self.functions: dict[str, llvm.LLVMFunctionType] = {
            op.sym_name.data: op.function_type for op in module.ops if isinstance(op, llvm.FuncOp)
        }
        self.symbols = {
            op.sym_name.data for op in module.ops if isinstance(op, llvm.FuncOp | llvm.GlobalOp)
        }
        self.declarations: list[str] = []

    def intrinsic(self, name: str, result: str, args: list[str]) -> None:
        if name not in self.symbols:
            self.symbols.add(name)
            self.declarations.append(f"declare {result} {symbol(name)}({', '.join(args)})")


class FunctionState:
    """Names of one function's values and blocks, and the operand text of its constants.
    The names are llvmlite's: one scope per function in which each argument, the return
    value, each block (its name hint or none), each `phi` and each instruction takes
    the next free name (`.1`, `.2`, ...), in the order xDSL's converter makes them; so
    LLVM's module of this text equals the one of the converter's, names included.
    Values and blocks are keyed by their `id` (xDSL hashes them by `id` too, through a
    Python method); the function's IR outlives its state."""

    def __init__(self, module: ModuleState, blocks: list[Block], arguments: int) -> None:
        self.module = module
        self.values: dict[int, str] = {}
        self.blocks: dict[int, str] = {}
        self._used = {""}
        self._bases: dict[str, int] = {}
        self.arguments = [self._register("") for _ in range(arguments + 1)][:-1]  # + return
        for arg, name in zip(blocks[0].args if blocks else (), self.arguments):
            self.values[id(arg)] = name
        for block in blocks:
            self.blocks[id(block)] = self._register(block.name_hint or "")
        for block in blocks[1:]:
            for arg in block.args:
                self.values[id(arg)] = self._register("")
        for block in blocks:
            for op in block.ops:
                text = operand_text(op)
                if text is not None:
                    self.values[id(op.results[0])] = text
                    continue
                name = self._register("")  # every instruction, with or without result
                if op.results:
                    self.values[id(op.results[0])] = name

    def _register(self, base: str) -> str:
        """llvmlite's `NameScope.register(base, deduplicate=True)`, quoted as it prints."""
        name = base
        while name in self._used:
            self._bases[base] = self._bases.get(base, 0) + 1
            name = f"{base}.{self._bases[base]}"
        self._used.add(name)
        return '%"' + name.replace("\\", "\\5c").replace('"', "\\22") + '"'

    def define(self, value: SSAValue) -> str:
        return self.values[id(value)]

    def label(self, block: Block) -> str:
        return self.blocks[id(block)]

    def typed(self, value: SSAValue) -> str:
        return f"{type_text(value.type)} {self.values[id(value)]}"

    def incoming(self, blocks: list[Block]) -> dict[int, list[str]]:
        """The incoming values of each block argument (a `phi`, by the argument's `id`),
        in the order xDSL's converter adds them."""
        incoming: dict[int, list[str]] = {}
        for block in blocks:
            op = block.last_op
            if not isinstance(op, llvm.BrOp | llvm.CondBrOp):
                continue
            here = self.blocks[id(block)]
            for dest, args in _edges(op):
                for arg, value in zip(dest.args, args):
                    incoming.setdefault(id(arg), []).append(f"[{self.values[id(value)]}, {here}]")
        return incoming


def _edges(op: llvm.BrOp | llvm.CondBrOp) -> list[tuple[Block, tuple[SSAValue, ...]]]:
    if isinstance(op, llvm.BrOp):
        return [(op.successor, tuple(op.arguments))]
    return [
        (op.then_block, tuple(op.then_arguments)),
        (op.else_block, tuple(op.else_arguments)),
    ]


def kind_of(obj: object, classes: tuple[type, ...], memo: dict[type, int]) -> int:
    """`dlc.analysis.walk.kind_of` for the runtime (which imports no analyses): 1 + the
    index of the first of `classes` `obj` is an instance of (0: none), remembered by
    class in `memo` (a failing `isinstance` against xDSL's classes, ABCs, is slow)."""
    kind = memo.get(type(obj))
    if kind is None:
        found = (i for i, c in enumerate(classes, start=1) if isinstance(obj, c))
        kind = memo[type(obj)] = next(found, 0)
    return kind


_OPERAND_OPS = (llvm.ConstantOp, llvm.AddressOfOp, llvm.UndefOp, llvm.ZeroOp)
_OPERAND_KIND: dict[type, int] = {}  # an op class -> its `kind_of` `_OPERAND_OPS`


def operand_text(op: Operation) -> str | None:
    kind = kind_of(op, _OPERAND_OPS, _OPERAND_KIND)
    if kind == 0:
        return None
    if kind == 1:
        assert isinstance(op, llvm.ConstantOp)
        return constant_text(op.result.type, op.value)
    if kind == 2:
        assert isinstance(op, llvm.AddressOfOp)
        return symbol(op.global_name.root_reference.data)
    if kind == 3:
        return "undef"
    assert isinstance(op, llvm.ZeroOp)
    return _null(op.res.type)
