"""llvmlite's C library called directly: the host queries, the process-wide symbol
table and an MCJIT engine that runs object code, without importing `llvmlite.binding`.

The warm start (dlc/warm.py) only loads machine code from the compile cache, and
importing `llvmlite.binding` (Python wrappers of all of LLVM's C API, `llvmlite.ir`,
`importlib.resources`) cost more than the whole load: about 70 ms of a 400 ms warm
`dlc-run` on an AMD EPYC (Zen 3). The functions here are the `LLVMPY_*` entry points
that `llvmlite.binding` itself wraps, declared with the signatures of the llvmlite
versions dlc's dependency pin allows (`SUPPORTED`). With another llvmlite, or when its
library cannot be opened, `library()` is None and every function here takes the same
call through `llvmlite.binding`. Both open the same shared library, so a process has
one LLVM: one symbol table, one set of initialized targets.

Calls from here hold `LOCK`. llvmlite serializes its own calls with a lock of its own;
the objects made here (an LLVM context, a target machine and an engine per `Engine`)
are never handed to llvmlite, and the symbol table has a lock inside LLVM.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import threading
import weakref
from ctypes import POINTER, c_bool, c_char_p, c_int, c_size_t, c_uint, c_uint64, c_void_p
from typing import Any

SUPPORTED = ("0.50.",)
"""llvmlite versions whose C entry points have the signatures of `_SIGNATURES`."""

LOCK = threading.RLock()
_OUT = POINTER(c_char_p)  # a string LLVM allocates (freed with LLVMPY_DisposeString)
_SIGNATURES: dict[str, tuple[list[Any], Any]] = {
    "LLVMPY_GetVersionInfo": ([], c_uint),
    "LLVMPY_DisposeString": ([c_char_p], None),
    "LLVMPY_GetProcessTriple": ([_OUT], None),
    "LLVMPY_GetHostCPUName": ([_OUT], None),
    "LLVMPY_GetHostCPUFeatures": ([_OUT], c_int),
    "LLVMPY_InitializeNativeTarget": ([], None),
    "LLVMPY_InitializeNativeAsmPrinter": ([], None),
    "LLVMPY_InitializeNativeAsmParser": ([], None),
    "LLVMPY_InitializeAllTargetInfos": ([], None),
    "LLVMPY_InitializeAllTargets": ([], None),
    "LLVMPY_InitializeAllTargetMCs": ([], None),
    "LLVMPY_InitializeAllAsmPrinters": ([], None),
    "LLVMPY_AddSymbol": ([c_char_p, c_void_p], None),
    "LLVMPY_SearchAddressOfSymbol": ([c_char_p], c_void_p),
    "LLVMPY_LoadLibraryPermanently": ([c_char_p, _OUT], c_bool),
    "LLVMPY_GetTargetFromTriple": ([c_char_p, _OUT], c_void_p),
    "LLVMPY_CreateTargetMachine": (
        [c_void_p, c_char_p, c_char_p, c_char_p, c_int, c_char_p, c_char_p, c_int, c_int, c_char_p],
        c_void_p,
    ),
    "LLVMPY_CreateTargetMachineData": ([c_void_p], c_void_p),
    "LLVMPY_CopyStringRepOfTargetData": ([c_void_p, _OUT], None),
    "LLVMPY_DisposeTargetData": ([c_void_p], None),
    "LLVMPY_DisposeTargetMachine": ([c_void_p], None),
    "LLVMPY_ContextCreate": ([], c_void_p),
    "LLVMPY_ContextDispose": ([c_void_p], None),
    "LLVMPY_ParseAssembly": ([c_void_p, c_char_p, _OUT], c_void_p),
    "LLVMPY_SetTarget": ([c_void_p, c_char_p], None),
    "LLVMPY_SetDataLayout": ([c_void_p, c_char_p], None),
    "LLVMPY_CreateMCJITCompiler": ([c_void_p, c_void_p, c_bool, _OUT], c_void_p),
    "LLVMPY_CreateObjectFile": ([c_char_p, c_size_t], c_void_p),
    "LLVMPY_DisposeObjectFile": ([c_void_p], None),
    "LLVMPY_MCJITAddObjectFile": ([c_void_p, c_void_p], None),
    "LLVMPY_FinalizeObject": ([c_void_p], None),
    "LLVMPY_GetFunctionAddress": ([c_void_p, c_char_p], c_uint64),
    "LLVMPY_GetGlobalValueAddress": ([c_void_p, c_char_p], c_uint64),
    "LLVMPY_DisposeExecutionEngine": ([c_void_p], None),
}
_LIB: list[ctypes.CDLL | None] = []


def _library_path() -> str | None:
    """llvmlite's shared library, found without importing `llvmlite.binding`."""
    spec = importlib.util.find_spec("llvmlite")
    if spec is None or not spec.submodule_search_locations:
        return None
    name = {"darwin": "libllvmlite.dylib", "win32": "llvmlite.dll"}.get(sys.platform)
    return os.path.join(
        list(spec.submodule_search_locations)[0], "binding", name or "libllvmlite.so"
    )


def _open() -> ctypes.CDLL | None:
    import llvmlite  # its package alone: the version, no binding

    path = _library_path()
    if not str(llvmlite.__version__).startswith(SUPPORTED) or path is None:
        return None
    try:
        lib = ctypes.CDLL(path)
        for name, (argtypes, restype) in _SIGNATURES.items():
            function = getattr(lib, name)
            function.argtypes, function.restype = argtypes, restype
    except (OSError, AttributeError):  # missing, unloadable, or an entry point renamed
        return None
    return lib


def library() -> ctypes.CDLL | None:
    """llvmlite's C library with `_SIGNATURES` declared, once per process; None when
    llvmlite is not a `SUPPORTED` version or its library cannot be opened."""
    with LOCK:
        if not _LIB:
            _LIB.append(_open())
        return _LIB[0]


def _call_out(lib: ctypes.CDLL, name: str, *args: Any) -> tuple[Any, str]:
    """Call `name` with a trailing output string; its result and the string."""
    out = c_char_p(None)
    with LOCK:
        result = getattr(lib, name)(*args, ctypes.byref(out))
        text = (out.value or b"").decode("utf-8", "replace")
        if out.value is not None:
            lib.LLVMPY_DisposeString(out)
    return result, text


def _binding() -> Any:
    import llvmlite.binding as llvm_binding  # the fallback: another llvmlite version

    return llvm_binding


def process_triple() -> str:
    """LLVM's triple of this process ("x86_64-unknown-linux-gnu")."""
    lib = library()
    if lib is None:
        return str(_binding().get_process_triple())
    return _call_out(lib, "LLVMPY_GetProcessTriple")[1]


def host_cpu_name() -> str:
    """LLVM's name of the host CPU model ("znver3")."""
    lib = library()
    if lib is None:
        return str(_binding().get_host_cpu_name())
    return _call_out(lib, "LLVMPY_GetHostCPUName")[1]


def host_cpu_features() -> dict[str, bool]:
    """The host CPU's features as LLVM names them, each on or off."""
    lib = library()
    if lib is None:
        return dict(_binding().get_host_cpu_features())
    ok, text = _call_out(lib, "LLVMPY_GetHostCPUFeatures")
    features = {}
    for item in text.split(",") if ok else []:
        if item:
            features[item[1:]] = item[0] == "+"
    return features


def flatten(features: dict[str, bool]) -> str:
    """A feature string ("+avx,-avx512f,...", sorted by name) as llvmlite's
    `FeatureMap.flatten` writes it."""
    return ",".join(("+" if on else "-") + name for name, on in sorted(features.items()))


def llvm_version() -> tuple[int, ...]:
    """The version of the LLVM llvmlite was built with, e.g. (20, 1, 8)."""
    lib = library()
    if lib is None:
        return tuple(_binding().llvm_version_info)
    with LOCK:
        packed = lib.LLVMPY_GetVersionInfo()
    parts = []
    while packed:  # llvmlite's packing: one byte a part, the major version highest
        parts.append(packed & 0xFF)
        packed >>= 8
    return tuple(reversed(parts))


def initialize(all_targets: bool) -> None:
    """Initialize the native target, asm printer and asm parser; with `all_targets`
    every target and asm printer LLVM was built with."""
    lib = library()
    names = ["InitializeNativeTarget", "InitializeNativeAsmPrinter", "InitializeNativeAsmParser"]
    if all_targets:
        names += ["InitializeAllTargetInfos", "InitializeAllTargets", "InitializeAllTargetMCs"]
        names += ["InitializeAllAsmPrinters"]
    if lib is None:
        binding = _binding()
        binding.initialize_native_target()
        binding.initialize_native_asmprinter()
        binding.initialize_native_asmparser()
        if all_targets:
            binding.initialize_all_targets()
            binding.initialize_all_asmprinters()
        return
    with LOCK:
        for name in names:
            getattr(lib, f"LLVMPY_{name}")()


def add_symbol(name: str, address: int) -> None:
    """Make `name` resolve to `address` for every engine's linking from now on."""
    lib = library()
    if lib is None:
        _binding().add_symbol(name, address)
        return
    with LOCK:
        lib.LLVMPY_AddSymbol(name.encode(), c_void_p(address))


def address_of_symbol(name: str) -> int | None:
    """The address LLVM's symbol table resolves `name` to, or None."""
    lib = library()
    if lib is None:
        return _binding().address_of_symbol(name) or None
    with LOCK:
        return lib.LLVMPY_SearchAddressOfSymbol(name.encode()) or None


def load_library_permanently(name: str) -> None:
    """Load the shared library `name` for the JIT's symbol resolution (RuntimeError
    when it cannot be loaded)."""
    lib = library()
    if lib is None:
        _binding().load_library_permanently(name)
        return
    failed, error = _call_out(lib, "LLVMPY_LoadLibraryPermanently", name.encode())
    if failed:
        raise RuntimeError(error)


Settings = tuple[str, str, str, int, str, str]
"""A target machine: triple, CPU, features, opt level, relocation model, code model."""


def _data_layout(lib: ctypes.CDLL, machine: int) -> bytes:
    data = lib.LLVMPY_CreateTargetMachineData(machine)
    try:
        return _call_out(lib, "LLVMPY_CopyStringRepOfTargetData", data)[1].encode()
    finally:
        lib.LLVMPY_DisposeTargetData(data)


def _machine(lib: ctypes.CDLL, settings: Settings) -> int:
    """A new target machine (the caller owns it). Raises RuntimeError."""
    triple, cpu, features, opt, reloc, code_model = settings
    if os.name == "nt" and code_model == "jitdefault":
        triple += "-elf"  # as llvmlite: MCJIT on Windows loads ELF objects only
    target, error = _call_out(lib, "LLVMPY_GetTargetFromTriple", triple.encode())
    if not target:
        raise RuntimeError(error)
    texts = [t.encode() for t in (triple, cpu, features)]
    machine = lib.LLVMPY_CreateTargetMachine(
        target, *texts, opt, reloc.encode(), code_model.encode(), 0, 0, b""
    )
    if not machine:
        raise RuntimeError("cannot create target machine")
    return machine


def _uses_own_memory_manager() -> bool:
    """llvmlite's default: its own memory manager on 64-bit ARM."""
    machine = os.uname().machine if hasattr(os, "uname") else ""
    return machine.lower() in ("arm64", "aarch64")


def _dispose(lib: ctypes.CDLL, engine: int, context: int) -> None:
    with LOCK:
        lib.LLVMPY_DisposeExecutionEngine(engine)  # with its module and target machine
        lib.LLVMPY_ContextDispose(context)


class Engine:
    """An MCJIT engine running the object files `parts` on a target machine made with
    `settings` (`dlc.runtime.jit.machine_settings`): the methods of llvmlite's
    `ExecutionEngine` that `JITModule` calls. It owns an LLVM context of its own, with
    the empty module MCJIT starts from; all is freed with this object (not at exit:
    a signal handler may still run in its code). Raises RuntimeError."""

    def __init__(self, lib: ctypes.CDLL, parts: list[bytes], settings: Settings) -> None:
        self._lib = lib
        with LOCK:
            machine = _machine(lib, settings)
            context = lib.LLVMPY_ContextCreate()
            module, error = _call_out(lib, "LLVMPY_ParseAssembly", context, b"")
            engine = None
            if module:
                lib.LLVMPY_SetTarget(module, process_triple().encode())
                lib.LLVMPY_SetDataLayout(module, _data_layout(lib, machine))
                engine, error = _call_out(
                    lib, "LLVMPY_CreateMCJITCompiler", module, machine, _uses_own_memory_manager()
                )
            if not engine:
                lib.LLVMPY_DisposeTargetMachine(machine)
                lib.LLVMPY_ContextDispose(context)  # frees the module too
                raise RuntimeError(error)
            self._engine = engine
            weakref.finalize(self, _dispose, lib, engine, context).atexit = False
            for part in parts:
                obj = lib.LLVMPY_CreateObjectFile(part, len(part))
                lib.LLVMPY_MCJITAddObjectFile(engine, obj)  # takes the object's contents
                lib.LLVMPY_DisposeObjectFile(obj)

    def finalize_object(self) -> None:
        """Link and load the code (bind symbols first)."""
        with LOCK:
            self._lib.LLVMPY_FinalizeObject(self._engine)

    def get_function_address(self, name: str) -> int:
        """Address of function `name` (0 when it is not defined)."""
        with LOCK:
            return int(self._lib.LLVMPY_GetFunctionAddress(self._engine, name.encode("ascii")))

    def get_global_value_address(self, name: str) -> int:
        """Address of global `name` (0 when it is not defined)."""
        with LOCK:
            return int(self._lib.LLVMPY_GetGlobalValueAddress(self._engine, name.encode("ascii")))
