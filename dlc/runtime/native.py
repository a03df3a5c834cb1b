"""The native state of a loaded module: status word, variables, external symbols.

`install(jit, meta)` gives a freshly loaded `JITModule` what its code expects besides
the code itself, as described by the compile metadata (`Metadata`, which the compile
cache stores as JSON): zeroed storage for module variables installed in their address
slots, and dlc's signal handler (`interrupts.py`). `Messages` turns a call context's
status word into the error a failed call raises (`TrapError` for traps, `IndexError`
for bounds violations, with the offending index from ctx word `CTX_FAULT` where the
code stored one, the signal's exception for an interrupted loop).
"""

from __future__ import annotations

import ctypes
import os
import sys
import warnings
from typing import Any

import numpy as np

from dlc import llvm_c
from dlc.diagnostics import TrapError
from dlc.dialects.abi import CTX_FAULT, PY_TYPES, STATUS_INTERRUPTED, VAR_PREFIX
from dlc.dtypes import NATIVE_DTYPES, NUMPY_DTYPES
from dlc.runtime import interrupts
from dlc.runtime.cache_records import Metadata
from dlc.runtime.context import CallContext
from dlc.runtime.jit import JITModule


class Messages:
    """The status messages of a module ("trap\t...", "bounds\t...", "interrupt\t...",
    "bounds-value\tbefore\tafter": see `dlc.dialects.abi.MESSAGES`); `raise_for(ctx)`
    resets a context whose call failed and raises the error."""

    def __init__(self, messages: list[str]) -> None:
        self.messages = [m.partition("\t") for m in messages]

    def raise_for(self, ctx: CallContext) -> None:
        code = ctx.status.value
        value = int(ctx.words[CTX_FAULT])
        ctx.reset()  # depth, arena and status as before the call
        if code == STATUS_INTERRUPTED:  # any poll's (`abi.STATUS_INTERRUPTED`)
            interrupts.raise_pending()  # KeyboardInterrupt, or the user's handler's error
            raise TrapError("interrupted by a signal")
        kind, _, text = self.messages[code - 1]
        if kind == "bounds":
            raise IndexError(text)
        if kind == "bounds-value":  # the value goes at the last tab (a path may hold one)
            before, _, after = text.rpartition("\t")
            raise IndexError(f"{before}{value}{after}")
        raise TrapError(text)


def portable_messages(messages: list[str] | None, prefixes: list[str]) -> list[str] | None:
    """`messages` ("kind\\tFILE:LINE:COL: text") as "kind\\tN\\ttext", N the index of the
    location in `prefixes` ("-": none), for the compile cache; None when a message names a
    location of this program that is not among them (then the entry is not stored)."""
    if messages is None:
        return None
    index = {prefix: i for i, prefix in reversed(list(enumerate(prefixes)))}
    files = {prefix.rsplit(":", 3)[0] + ":" for prefix in prefixes}
    portable = []
    for message in messages:
        kind, _, text = message.partition("\t")
        where = next((p for p in index if text.startswith(p)), None)
        if where is None and any(text.startswith(f) for f in files):
            return None
        number = "-" if where is None else str(index[where])
        portable.append(f"{kind}\t{number}\t{text[len(where or '') :]}")
    return portable


def rendered_messages(portable: list[str] | None, prefixes: list[str]) -> list[str] | None:
    """The messages of a cache entry with this program's locations; None when an entry's
    location index does not fit `prefixes` (a malformed entry)."""
    if portable is None:
        return None
    messages = []
    for message in portable:
        kind, _, rest = message.partition("\t")
        number, tab, text = rest.partition("\t")
        if not tab or not (number == "-" or (number.isdigit() and int(number) < len(prefixes))):
            return None
        where = "" if number == "-" else prefixes[int(number)]
        messages.append(f"{kind}\t{where}{text}")
    return messages


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
    jit.var_storage = storage


def install(jit: JITModule, meta: Metadata, handler: bytes | memoryview | None = None) -> None:
    """Install the runtime state described by `meta` on a freshly loaded engine;
    `handler`: the signal handler's object code from its cache entry, if any."""
    _attach_vars(jit, meta["vars"])
    fill_types(jit)
    interrupts.install(handler)


def fill_types(jit: JITModule) -> None:
    """The `abi.PY_TYPES` table the Python entries' argument checks read, if any: the
    addresses of `numpy.ndarray` and of each native dtype (objects that live as long
    as NumPy, so as long as the process). bf16's slot is filled once ml_dtypes is
    loaded (it takes seconds to import): before, no bf16 array can exist, and a
    function with a bf16 parameter loads it and fills the table again (convention.py)."""
    table = jit.global_address(PY_TYPES)
    if table is None:
        return
    for i, dt in enumerate(NATIVE_DTYPES):
        if dt == "bf16" and "ml_dtypes" not in sys.modules:
            continue
        ctypes.c_int64.from_address(table + 8 * (1 + i)).value = id(NUMPY_DTYPES[dt])
    ctypes.c_int64.from_address(table).value = id(np.ndarray)


def variable_storage(jit: JITModule, name: str) -> np.ndarray | None:
    """The 16-byte aligned bytes of module variable `name`, or None."""
    storage: dict[str, Any] = getattr(jit, "var_storage", {})
    buffer = storage.get(name)
    if buffer is None:
        return None
    return buffer[(-buffer.ctypes.data) % 16 :]


_OPENMP: list[bool] = []


def openmp_available() -> bool:
    """Whether the OpenMP runtime (libgomp) is loaded for JIT code; loaded on first
    use. Without it parallel loops run serially, and dlc says so once."""
    if not _OPENMP:
        _short_spin()
        path = _load_permanently("libgomp.so.1", "gomp")
        if path is None:
            warnings.warn(
                "dlc: no OpenMP runtime (libgomp) found: compiled code runs on one thread "
                "(install libgomp, e.g. the gcc package, to use several cores)",
                RuntimeWarning,
                stacklevel=2,
            )
        _OPENMP.append(path is not None)
    return _OPENMP[0]


WAIT_SPIN = "30000"
"""`GOMP_SPINCOUNT` dlc asks of libgomp unless the user chose a wait policy: a thread
that waits at a barrier or for work spins about 30,000 pauses (1.5 ms on a Zen 3)
before it sleeps, so the parallel loops of one call, a few microseconds to a
millisecond apart, find the team awake. A sleeping worker is woken through the
kernel, which may first queue it on the waking thread's own core: on 2-core virtual
machines a loop on 2 threads then ran as slowly as on one, plus the wake (measured on
a quiet 2-core AMD EPYC Zen 3, `tools/bench_load.py --busy 0`, 2 threads / 1: the LSTM
tail 0.80 with a spin of 100 against 0.53 with this one, attention 1.07 against 0.60;
MobileNetV2 6.5 ms against 4.9 ms a call). Spins of 1,000 to 10,000 were worse than
either (the woken thread waits out the other's spin). Busy cores are the load
governor's (`governor.py`: one thread while the kernel reports CPU pressure): with
one busy process per core, every `tools/bench.py` workload at 2 threads stayed
within 1.05x of one thread with this spin."""


def _short_spin() -> None:
    """Before libgomp loads (it reads its environment once): a short spin, then
    passive waiting, unless `OMP_WAIT_POLICY` or `GOMP_SPINCOUNT` is already set."""
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = WAIT_SPIN


def default_threads() -> int:
    """Threads parallel loops use: `DLC_NUM_THREADS`, else the cores this process may
    run on (`os.sched_getaffinity`)."""
    text = os.environ.get("DLC_NUM_THREADS", "").strip()
    if text:
        try:
            return max(1, int(text))
        except ValueError:
            warnings.warn(f"dlc: DLC_NUM_THREADS={text!r} is not a number: ignored", stacklevel=2)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


_HELD: list[ctypes.CDLL] = []
"""Our own handles on the libraries `_load_permanently` loaded, never closed: LLVM
closes its handles when the process exits (llvmlite's static destructors), and a
library unmapped then under a thread still running in it (an OpenMP worker spinning
under `OMP_WAIT_POLICY=active`) crashed the exit with a segmentation fault."""


def _load_permanently(soname: str, short: str) -> str | None:
    """Load a shared library into the process for JIT code, by its usual `soname` (the
    dynamic loader's own search, no process started) or else by the name
    `ctypes.util.find_library(short)` finds (it runs `ldconfig -p`: milliseconds);
    the name it was loaded by, or None."""
    name = soname
    try:
        llvm_c.load_library_permanently(name)
    except RuntimeError:
        from ctypes.util import find_library

        found = find_library(short)
        if found is None:
            return None
        name = found
        try:
            llvm_c.load_library_permanently(name)
        except RuntimeError:
            return None
    try:
        _HELD.append(ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL))
    except OSError:  # loaded by LLVM's own search only: its handle is all there is
        pass
    return name


def _process_symbol(name: str) -> int | None:
    """Address of C symbol `name` in the process or libm (dlsym), or None."""
    for library in (None, "libm.so.6", "m"):
        if library == "m":  # libm under another name: ask ldconfig (starts a process)
            from ctypes.util import find_library

            library = find_library("m")
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
        if llvm_c.address_of_symbol(name):
            continue
        address = _process_symbol(name)
        if address:
            llvm_c.add_symbol(name, address)
        else:
            missing.append(name)
    return missing
