"""Object code into the file the user asked for: `.o` as is, `.a` by `ar`, `.so` by the C compiler.

The shared library is linked by the system C compiler (`cc`, or `$CC`; for a foreign
target `<arch>-<os>-<abi>-gcc`, e.g. Debian's `aarch64-linux-gnu-gcc`) with `-lm`,
and `-fopenmp` only when the code calls the OpenMP runtime; afterwards `readelf -d`
must show no text relocation (`TEXTREL`: code pages the loader would have to patch),
or the library is removed and the export fails. A missing tool is an `ExportError`
naming it and the package that provides it, never a traceback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from dlc.target import is_foreign, triple_arch

KINDS = {".so": "shared library", ".o": "object file", ".a": "static library"}
"""Output suffix -> what dlc-compile writes."""


class ExportError(Exception):
    """A library could not be written: an unknown output suffix, a target that has no
    such output, a missing or failing linker, text relocations."""


def output_kind(path: Path, triple: str) -> str:
    """The suffix of `path` (".so", ".o" or ".a") if dlc can write it for `triple`."""
    suffix = path.suffix
    if suffix not in KINDS:
        raise ExportError(
            f"cannot tell what to write from the name '{path}': "
            "use a .so (shared library), .o (object file) or .a (static library) suffix"
        )
    if triple_arch(triple) == "wasm32" and suffix != ".o":
        raise ExportError(f"the {triple} target produces .o object files only, not {suffix}")
    return suffix


def gnu_triple(triple: str) -> str:
    """The GNU toolchain prefix of an LLVM triple: `aarch64-unknown-linux-gnu` ->
    `aarch64-linux-gnu`."""
    parts = triple.split("-")
    if len(parts) == 4 and parts[1] in ("unknown", "pc", "none"):
        parts.pop(1)
    return "-".join(parts)


def compiler(triple: str, cc: str | None = None) -> str:
    """The C compiler that links for `triple`: `cc` if given, `$CC` or `cc` for this
    machine, `<gnu triple>-gcc` for another architecture; ExportError if missing."""
    name = cc or (
        f"{gnu_triple(triple)}-gcc" if is_foreign(triple) else os.environ.get("CC") or "cc"
    )
    found = shutil.which(name)
    if found is None:
        hint = (
            f"install a cross compiler (Debian: gcc-{gnu_triple(triple).replace('_', '-')}) "
            if is_foreign(triple)
            else "install a C compiler (Debian: gcc) "
        )
        raise ExportError(
            f"no C compiler '{name}' to link the library: {hint}or write a .o file and "
            "link it yourself"
        )
    return found


def _run(command: list[str], what: str) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as e:
        raise ExportError(f"{what} failed: cannot run '{command[0]}': {e.strerror or e}") from None
    if done.returncode != 0:
        output = (done.stderr or done.stdout).strip()
        raise ExportError(f"{what} failed ({' '.join(command)}):\n{output}")


def openmp_linkable(cc: str) -> bool:
    """Whether `cc -fopenmp` finds the OpenMP runtime (libgomp) to link against."""
    try:
        done = subprocess.run(
            [cc, "-print-file-name=libgomp.so"], capture_output=True, text=True, check=False
        )
    except OSError:
        return False
    found = done.stdout.strip()
    return done.returncode == 0 and os.path.isabs(found) and os.path.exists(found)


def link_shared(obj: Path, out: Path, cc: str, openmp: bool) -> None:
    """`cc -shared` the object into `out` (libm, and libgomp when `openmp`), then check
    it for text relocations."""
    command = [cc, "-shared", "-o", str(out), str(obj), "-lm", "-lpthread"]
    if openmp:
        command.insert(2, "-fopenmp")
    _run(command, "linking")
    if text_relocations(out):
        out.unlink(missing_ok=True)
        raise ExportError(f"'{out}' has text relocations (TEXTREL): not written")


def archive(obj: Path, out: Path, triple: str) -> None:
    """`ar rcs out obj` (the target's own `<gnu triple>-ar` when there is one)."""
    tool = shutil.which(f"{gnu_triple(triple)}-ar") if is_foreign(triple) else None
    tool = tool or shutil.which("ar")
    if tool is None:
        raise ExportError("no 'ar' to write a static library (Debian: binutils): write a .o file")
    out.unlink(missing_ok=True)  # `ar r` adds to an existing archive
    _run([tool, "rcs", str(out), str(obj)], "archiving")


def text_relocations(path: Path) -> bool:
    """Whether ELF file `path` has a TEXTREL dynamic tag (False without `readelf`)."""
    readelf = shutil.which("readelf")
    if readelf is None:
        return False
    done = subprocess.run([readelf, "-d", str(path)], capture_output=True, text=True, check=False)
    return "TEXTREL" in done.stdout
