"""An llvm-level module (lowered without Python entries) -> a C library and its header.

`write_library` adds what the JIT runtime would install (`dlc.runtime.native`) as
static data of the module itself: each module variable's storage is a zeroed internal
global, and its address slot (`abi.VAR_PREFIX + name`) is initialized with that
global's address (a constant, so loading the code installs it: nothing to do at run
time, nothing racy). It links in the C entry points (`c_entry.py`), makes every other
definition internal (only the entry points are exported; the DLVM functions' own
names cannot clash with the user's symbols), optimizes the whole at the requested
level, emits position-independent object code for the target, and writes the `.o`,
`.a` or `.so` (`link.py`) and the header (`header.py`).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import llvmlite.binding as llvm_binding
from llvmlite import ir
from xdsl.dialects import llvm
from xdsl.dialects.builtin import ArrayAttr, ModuleOp

from dlc.aot import c_entry, c_symbolic, header, link
from dlc.aot.arena_formula import ArenaFormula
from dlc.aot.signature import CFunction
from dlc.dialects import abi
from dlc.files import install_file, write_atomically
from dlc.runtime import llvm_text
from dlc.runtime.constant_data import DataFiles, data_files, module_ir, module_text
from dlc.runtime.jit import llvmlite_module, optimize, target_machine, target_triple
from dlc.target import Target


@dataclass(frozen=True)
class Exported:
    """What an export wrote: the library (or object) and its header."""

    library: Path
    header: Path


@dataclass(frozen=True)
class Request:
    """Where and how to write a library (besides the code)."""

    path: Path
    header: Path
    prefix: str
    opt_level: int
    target: Target
    cpu: str  # the CPU model as asked ("host": this machine's own, with its features)
    cc: str | None  # the linker of a .so (found by `link.compiler` when None)
    externs: tuple[str, ...] = ()  # the [extern] C functions the program calls


def _messages(llvm_level: ModuleOp) -> list[str]:
    messages = llvm_level.attributes.get(abi.MESSAGES)
    assert messages is None or isinstance(messages, ArrayAttr)
    return [] if messages is None else [m.data for m in messages.data]


def _variables(llvm_level: ModuleOp) -> dict[str, int]:
    return abi.variable_sizes(llvm_level)


def declared(llvm_level: ModuleOp) -> list[str]:
    """The C functions the code calls without defining them."""
    return [
        f.sym_name.data
        for f in llvm_level.body.block.ops
        if isinstance(f, llvm.FuncOp) and not f.body.blocks
    ]


def _static_variables(module: ir.Module, sizes: dict[str, int]) -> None:
    """Zeroed 16-byte aligned storage per variable, its address in the variable's slot."""
    i64 = ir.IntType(64)
    for index, (name, size) in enumerate(sorted(sizes.items())):
        storage = ir.GlobalVariable(
            module, ir.ArrayType(ir.IntType(8), max(1, size)), f"__dlc_var{index}"
        )
        storage.linkage = "internal"
        storage.align = 16
        storage.initializer = ir.Constant(storage.value_type, None)
        slot = module.get_global(abi.VAR_PREFIX + name)
        slot.linkage = "internal"
        slot.initializer = storage.ptrtoint(i64)


def _variable_lines(llvm_level: ModuleOp, sizes: dict[str, int]) -> dict[str, str]:
    """`_static_variables` as text (`constant_data.module_ir`'s `replaced`): the line of
    each slot, after the line of its storage."""
    slots = {
        op.sym_name.data: op for op in llvm_level.body.block.ops if isinstance(op, llvm.GlobalOp)
    }
    lines: dict[str, str] = {}
    for index, (name, size) in enumerate(sorted(sizes.items())):
        storage = f"@__dlc_var{index}"
        address = f"ptrtoint (ptr {storage} to i64)"
        slot = llvm_text.global_line(
            slots[abi.VAR_PREFIX + name], linkage="internal", initializer=address
        )
        definition = f"{storage} = internal global [{max(1, size)} x i8] zeroinitializer, align 16"
        lines[abi.VAR_PREFIX + name] = definition + "\n" + slot
    return lines


def _module_text(
    llvm_level: ModuleOp, tm: llvm_binding.TargetMachine, files: DataFiles | None
) -> str:
    """The module's LLVM IR with its static variables (`llvm_text`; xDSL's converter
    for a module with an op it does not print)."""
    try:
        replaced = _variable_lines(llvm_level, _variables(llvm_level))
        return module_ir(llvm_level, tm.triple, str(tm.target_data), files, replaced)
    except llvm_text.Unsupported:
        ir_module = llvmlite_module(llvm_level, tm, files)
        _static_variables(ir_module, _variables(llvm_level))
        return module_text(ir_module)


def _internalize(module: llvm_binding.ModuleRef, exported: set[str]) -> None:
    for value in [*module.functions, *module.global_variables]:
        if not value.is_declaration and value.name not in exported:
            value.linkage = llvm_binding.Linkage.internal


def object_code(
    llvm_level: ModuleOp, functions: list[CFunction], opts: c_entry.ShimOptions, request: Request
) -> bytes:
    """Optimized, position-independent object code of the module and its entry points."""
    tm = target_machine(request.opt_level, request.target, pic=True)
    with data_files(tm.triple) as files:  # constant data included until the object exists
        module = llvm_binding.parse_assembly(_module_text(llvm_level, tm, files))
        shim = c_entry.entry_points(functions, opts, tm.triple, str(tm.target_data))
        try:
            module.link_in(llvm_binding.parse_assembly(shim))
        except RuntimeError as e:  # a DLVM function named like a C function the entries call
            raise link.ExportError(f"cannot add the C entry points to the module: {e}") from None
        _internalize(module, c_entry.exported_names(functions, opts.prefix))
        module.verify()
        optimize(module, tm, request.opt_level)
        return tm.emit_object(module)


def write_library(
    llvm_level: ModuleOp,
    functions: list[CFunction],
    arena_bytes: int,
    request: Request,
    formulas: dict[str, ArenaFormula] | None = None,
) -> Exported:
    """Write the library `request.path` (its suffix says which kind) and its header;
    `formulas`: the arena formula of each function with symbolic dimensions."""
    target = request.target
    kind = link.output_kind(request.path, target.triple)
    externs = declared(llvm_level)
    sized = [m for f in functions for m in c_symbolic.messages(f)]
    opts = c_entry.ShimOptions(
        prefix=request.prefix,
        messages=(*_messages(llvm_level), c_entry.ARENA_FAILED, *sized),
        arena_bytes=arena_bytes,
        openmp="GOMP_parallel" in externs,
        pthreads="linux" in target_triple(target),
        pointer_bits=target.pointer_bits,
        formulas=tuple(sorted((formulas or {}).items())),
    )
    cc = link.compiler(target.triple, request.cc) if kind == ".so" else None
    code = object_code(llvm_level, functions, opts, request)
    with tempfile.TemporaryDirectory(prefix="dlc-compile-") as scratch:
        obj = Path(scratch) / f"{request.prefix}.o"
        obj.write_bytes(code)
        built = Path(scratch) / f"out{kind}"  # linked here, then renamed into place
        if kind == ".o":
            built = obj
        elif kind == ".a":
            link.archive(obj, built, target.triple)
        else:
            link.link_shared(obj, built, cc, opts.openmp)  # type: ignore[arg-type]
        _install(built, request.path)
    triple = target_triple(target)
    text = header.header(functions, opts, request.header.name, list(request.externs), triple)
    _write(request.header, text.encode("utf-8"))
    return Exported(request.path, request.header)


def _write(path: Path, data: bytes) -> None:
    """`data` at `path`, atomically and never through an existing name (dlc/files.py)."""
    try:
        write_atomically(path, data)
    except OSError as e:
        raise link.ExportError(f"cannot write '{path}': {e.strerror or e}") from None


def _install(built: Path, path: Path) -> None:
    try:
        install_file(built, path)
    except OSError as e:
        raise link.ExportError(f"cannot write '{path}': {e.strerror or e}") from None
