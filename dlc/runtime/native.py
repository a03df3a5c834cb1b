"""The native state of a loaded module: status word, variables, external symbols.

`install(jit, meta)` gives a freshly loaded `JITModule` what its code expects besides
the code itself, as described by the compile metadata (`Metadata`, which the compile
cache stores as JSON): zeroed storage for module variables installed in their address
slots, the status word and its messages (traps and bounds violations raise
`TrapError` / `IndexError` from the call), and the set of functions that must run
holding the GIL.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any, TypedDict

import llvmlite.binding as llvm_binding
import numpy as np

from dlc.diagnostics import TrapError
from dlc.dialects.abi import CALL_DEPTH, STATUS, VAR_PREFIX
from dlc.runtime.jit import JITModule


class Metadata(TypedDict):
    """What a compiled module needs besides its machine code (JSON-able)."""

    native: list[str]  # graph functions compiled to native code
    keep_gil: list[str]  # functions that must not run concurrently
    externs: list[str]  # C symbols the code calls
    messages: list[str] | None  # status messages ("trap\t..." / "bounds\t...")
    recursive: bool  # the module has a call-depth counter
    vars: dict[str, int]  # module variables: name -> byte size
    stats: dict[str, dict[str, int]]  # compile report per function
    passes: dict[str, dict[str, int]]  # statistics per pass


class NativeStatus:
    """The status word of a compiled module (`dlc.dialects.abi.STATUS`) and its
    messages; `raise_status` resets the word and raises TrapError / IndexError."""

    def __init__(self, address: int, messages: list[str], depth: int | None = None) -> None:
        self.word = ctypes.c_int64.from_address(address)
        self.messages = messages
        self.depth = ctypes.c_int64.from_address(depth) if depth is not None else None

    def raise_status(self) -> None:
        code, self.word.value = self.word.value, 0
        if self.depth is not None:  # every frame uncounts itself on the way out; be sure
            self.depth.value = 0
        kind, _, text = self.messages[code - 1].partition("\t")
        if kind == "bounds":
            raise IndexError(text)
        raise TrapError(text)


def _attach_status(jit: JITModule, messages: list[str] | None, recursive: bool) -> None:
    jit.status = None
    address = jit.global_address(STATUS) if messages is not None else None
    if address is None:
        return
    depth = jit.global_address(CALL_DEPTH) if recursive else None
    status = NativeStatus(address, list(messages or ()), depth)
    jit.status = status.word
    jit.raise_status = status.raise_status  # type: ignore[attr-defined]


def _attach_vars(jit: JITModule, sizes: dict[str, int]) -> None:
    """Zeroed storage of the module's variables (name -> byte size), 16-byte aligned,
    installed in their address slots."""
    storage: dict[str, np.ndarray] = {}
    for name, size in sizes.items():
        buffer = np.zeros(max(1, size) + 16, np.uint8)
        storage[name] = buffer
        slot = jit.global_address(VAR_PREFIX + name)
        assert slot is not None, f"no address slot for variable {name}"
        ctypes.c_int64.from_address(slot).value = (buffer.ctypes.data + 15) // 16 * 16
    jit.var_storage = storage  # type: ignore[attr-defined]


def install(jit: JITModule, meta: Metadata) -> None:
    """Install the runtime state described by `meta` on a freshly loaded engine."""
    jit.keep_gil = set(meta["keep_gil"])  # type: ignore[attr-defined]
    _attach_status(jit, meta["messages"], meta["recursive"])
    _attach_vars(jit, meta["vars"])


def variable_storage(jit: JITModule, name: str) -> np.ndarray | None:
    """The 16-byte aligned bytes of module variable `name`, or None."""
    storage: dict[str, Any] = getattr(jit, "var_storage", {})
    buffer = storage.get(name)
    if buffer is None:
        return None
    return buffer[(-buffer.ctypes.data) % 16 :]


def _process_symbol(name: str) -> int | None:
    """Address of C symbol `name` in the process or libm (dlsym), or None."""
    for library in (None, ctypes.util.find_library("m")):
        try:
            return ctypes.cast(getattr(ctypes.CDLL(library), name), ctypes.c_void_p).value
        except (AttributeError, OSError):
            continue
    return None


def resolve_symbols(names: list[str]) -> list[str]:
    """Make every C symbol of `names` known to the JIT linker; return those that do
    not exist in this process (MCJIT would crash on an unresolved symbol)."""
    missing = []
    for name in names:
        if llvm_binding.address_of_symbol(name):
            continue
        address = _process_symbol(name)
        if address:
            llvm_binding.add_symbol(name, address)
        else:
            missing.append(name)
    return missing
