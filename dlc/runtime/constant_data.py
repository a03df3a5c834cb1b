"""Constant data (weights) from the llvm-level module into LLVM without per-element text.

Each large literal global reaches LLVM as bytes: as an `[N x i8] c"..."` string (self-
contained IR: `-t llvm`, foreign targets), for ELF object code of this machine declared
and defined by an `.incbin` of a private temporary file, or, for the JIT, declared
only and bound to the bytes already in this process (`BoundData`). Measurements and
trade-offs: docs/design/fusion-and-memory.md.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llvmlite import ir
    from xdsl.dialects import llvm
    from xdsl.dialects.builtin import ModuleOp

ALIGN = 64  # a cache line; vector loads from the data are at most this wide


class DataFiles:
    """A private directory holding the data files of `.incbin` directives, removed on
    exit; `include` writes one and returns the module assembly that defines its
    symbol."""

    def __init__(self) -> None:
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self.count = 0  # files written (each part of a split module writes its own)

    def __enter__(self) -> DataFiles:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def include(self, name: str, data: bytes) -> list[str] | None:
        """Assembly lines defining local symbol `name` as `data` in `.rodata`; None
        when no file can be written (no usable temporary directory): the caller then
        gives the data as text."""
        try:
            if self._dir is None:
                self._dir = tempfile.TemporaryDirectory(prefix="dlc-data-")  # mode 0700
            path = Path(self._dir.name) / f"{self.count}.bin"
            if not (str(path).isascii() and str(path).isprintable()):
                return None  # not spelled safely in an assembler string
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
        except OSError:
            return None
        self.count += 1
        quoted = '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'
        return [
            ".pushsection .rodata",
            f".p2align {ALIGN.bit_length() - 1}",
            f"{name}:",
            f".incbin {quoted}",
            f".size {name}, {len(data)}",
            ".popsection",
        ]


class BoundData:
    """The data globals of a module the JIT compiles for this process: `include` keeps
    a reference to each global's bytes and gives no assembly, so the global stays an
    external declaration that the JIT binds to those bytes by address
    (`jit.finalized`). Neither LLVM nor the object code holds a copy of the data; a
    global cloned into several parts (`jit_parts`) is one segment."""

    def __init__(self) -> None:
        self.segments: dict[str, bytes] = {}

    def include(self, name: str, data: bytes) -> list[str]:
        self.segments[name] = data
        return []


def included_data_possible(triple: str) -> bool:
    """Whether `.incbin` can place data in objects for `triple`: this machine's
    architecture (llvmlite initializes only the native assembly parser) writing ELF."""
    from dlc.target import is_foreign, process_triple

    return not is_foreign(triple) and "-linux" in (triple or process_triple())


def data_files(triple: str) -> contextlib.AbstractContextManager[DataFiles | None]:
    """A `DataFiles` for object code for `triple` when it can include data, else None
    (the data is then LLVM IR text)."""
    return DataFiles() if included_data_possible(triple) else contextlib.nullcontext()


def _data_globals(module: ModuleOp) -> list[llvm.GlobalOp]:
    """The internal constant globals of dense data (mutable ones, such as the Python
    entries' type table, are small and keep xDSL's conversion)."""
    from xdsl.dialects import llvm
    from xdsl.dialects.builtin import DenseIntOrFPElementsAttr

    return [
        op
        for op in module.body.block.ops
        if isinstance(op, llvm.GlobalOp)
        and isinstance(op.value, DenseIntOrFPElementsAttr)
        and op.constant is not None
        and op.linkage.linkage.data == "internal"
    ]


def converted(module: ModuleOp, triple: str, files: DataFiles | BoundData | None) -> ir.Module:
    """xDSL's conversion of `module` to an llvmlite module, its data globals given to
    LLVM as bytes (module docstring): each is swapped for an uninitialized `[N x i8]`
    stand-in during the conversion, then given its data. The module is left as it was."""
    from xdsl.backend.llvm.convert import convert_module
    from xdsl.dialects import llvm
    from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, IntAttr, i8

    block = module.body.block
    swapped: list[tuple[llvm.GlobalOp, llvm.GlobalOp, bytes]] = []
    for op in _data_globals(module):
        assert isinstance(op.value, DenseIntOrFPElementsAttr)  # what _data_globals selects
        data: bytes = op.value.data.data
        array = llvm.LLVMArrayType(IntAttr(len(data)), i8)
        stand_in = llvm.GlobalOp(array, op.sym_name.data, "internal", constant=True)
        block.insert_op_before(stand_in, op)
        op.detach()
        swapped.append((stand_in, op, data))
    try:
        ir_module = convert_module(module, fallback_target_triple=triple)
    finally:
        for stand_in, op, _ in swapped:
            block.insert_op_before(op, stand_in)
            stand_in.detach()
            stand_in.erase()
    lines: list[str] = []
    for _, op, data in swapped:
        name = op.sym_name.data
        included = files.include(name, data) if files is not None and data else None
        lines.extend(included or [])
        _give_data(ir_module.get_global(name), data, included is not None)
    if lines:
        ir_module.dlc_module_asm = lines
    return ir_module


def module_ir(
    module: ModuleOp,
    triple: str,
    data_layout: str,
    files: DataFiles | BoundData | None,
    replaced: dict[str, str] | None = None,
) -> str:
    """LLVM IR text of `module` for `triple` and `data_layout`, printed by `llvm_text`,
    its data globals given to LLVM as bytes (module docstring); `replaced` gives the
    whole line of a global. A module `llvm_text` cannot print is converted by xDSL
    (`converted`, which knows no `replaced`: the caller then edits the llvmlite module)."""
    from xdsl.dialects.builtin import DenseIntOrFPElementsAttr

    from dlc.runtime import llvm_text

    lines: list[str] = []

    def data(op: llvm.GlobalOp) -> str | None:
        assert isinstance(op.value, DenseIntOrFPElementsAttr)  # what llvm_text asks
        raw: bytes = op.value.data.data
        included = files.include(op.sym_name.data, raw) if files is not None and raw else None
        lines.extend(included or [])
        return _data_line(op, raw, included is not None)

    body = llvm_text.module_text(module, triple, data_layout, data, replaced)
    return "\n".join(body) + "\n" + _module_asm(lines)


def _data_line(op: llvm.GlobalOp, data: bytes, included: bool) -> str:
    """`module_ir`'s line of a data global, as `converted` gives it to LLVM: declared
    (its bytes included or bound) or spelled as `c"..."` bytes aligned to `ALIGN`."""
    from dlc.runtime.llvm_text_ops import symbol

    size = f"[{len(data)} x i8]"
    name = symbol(op.sym_name.data)
    if included:
        return f"{name} = external hidden constant {size}"
    text = 'c"\\' + data.hex("\\") + '"' if data else "zeroinitializer"
    return f"{name} = internal constant {size} {text}, align {ALIGN}"


def _module_asm(lines: list[str]) -> str:
    escaped = [line.replace("\\", "\\5C").replace('"', "\\22") for line in lines]
    return "".join(f'module asm "{line}"\n' for line in escaped)


def _give_data(gv: ir.GlobalVariable, data: bytes, included: bool) -> None:
    from llvmlite import ir

    if included:  # defined by the module assembly (hidden: addressed PC-relative) or bound
        gv.linkage = "external"
        gv.storage_class = "hidden"  # llvmlite prints it where LLVM's visibility goes
        return
    text = 'c"\\' + data.hex("\\") + '"' if data else "zeroinitializer"
    gv.initializer = ir.FormattedConstant(gv.value_type, text)
    gv.align = ALIGN


def module_text(ir_module: ir.Module) -> str:
    """LLVM IR text of a module `converted` made, with its module assembly."""
    asm = getattr(ir_module, "dlc_module_asm", None)
    if not asm:
        return str(ir_module)
    return str(ir_module) + "\n" + _module_asm(asm)
