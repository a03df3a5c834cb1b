"""Checked export settings: where to write, for which target, with which C names.

Everything here is checked before anything is compiled, so a bad suffix, an unknown
target, a bad prefix or an unknown entry fails at once with an `ExportError` (a
function whose signature C cannot take is a located `DiagnosticError`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from dlc.aot.library import Request
from dlc.aot.link import ExportError, compiler, openmp_linkable, output_kind
from dlc.aot.signature import C_IDENTIFIER, CFunction, c_function
from dlc.dialects.graph import FuncOp
from dlc.pipeline import Options
from dlc.target import Target, triple_arch

C_RUNTIME = frozenset(
    "malloc free snprintf omp_get_max_threads pthread_self pthread_getattr_np "
    "pthread_attr_getstack pthread_attr_destroy".split()
)
"""The C functions the entry points call (`c_entry.py`)."""


def default_prefix(path: Path) -> str:
    """The C name prefix of a library file: `libmodel.so` -> `model`."""
    stem = path.name.split(".", 1)[0].removeprefix("lib") or "model"
    stem = re.sub(r"[^A-Za-z0-9_]", "_", stem)
    return stem if C_IDENTIFIER.fullmatch(stem) else f"_{stem}"


def make_request(
    path: str | os.PathLike[str],
    *,
    prefix: str | None = None,
    header: str | os.PathLike[str] | None = None,
    target: str | None = None,
    target_cpu: str | None = None,
    cc: str | None = None,
    opt_level: int = 2,
    externs: Iterable[str] = (),
) -> Request:
    """The checked settings of one export (module docstring)."""
    out = Path(os.fspath(path))
    triple, cpu = target or "", target_cpu or "host"
    try:
        chosen = Target.from_cpu(cpu, triple)
    except ValueError as e:
        raise ExportError(f"target: {e}") from None
    output_kind(out, triple)
    if not out.parent.is_dir():
        raise ExportError(f"cannot write '{out}': no directory '{out.parent}'")
    if prefix is None:
        prefix = default_prefix(out)
    elif not isinstance(prefix, str) or not C_IDENTIFIER.fullmatch(prefix):
        raise ExportError(f"prefix {prefix!r} is not a C identifier")
    header_path = Path(os.fspath(header)) if header is not None else out.with_name(f"{prefix}.h")
    # names, not what they resolve to: outputs replace a symlink instead of following it
    if header_path.parent.resolve() / header_path.name == out.parent.resolve() / out.name:
        raise ExportError(f"the header would overwrite the library '{out}'")
    return Request(out, header_path, prefix, opt_level, chosen, cpu, cc, tuple(sorted(externs)))


def target_options(options: Options, request: Request) -> Options:
    """The pipeline `options` of a compile, for the target of `request` (parallel loops
    where `parallel_loops` allows them)."""
    options = replace(options, target_cpu=request.cpu, triple=request.target.triple)
    return replace(options, openmp=parallel_loops(request))


def parallel_loops(request: Request) -> bool:
    """Whether the code may use the OpenMP runtime: not on wasm32; for a `.so` only
    when its linker finds libgomp (a `.o` or `.a` is linked by the user)."""
    if triple_arch(request.target.triple) == "wasm32":
        return False
    if request.path.suffix != ".so":
        return True
    return openmp_linkable(compiler(request.target.triple, request.cc))


def exported_functions(
    defined: dict[str, FuncOp], entries: Iterable[str] | None, prefix: str, symbolic: bool = False
) -> list[CFunction]:
    """The C signatures of the functions to export: `entries` (names, `f` or `@f`), or
    every defined function; `symbolic`: of a module with symbolic dimensions, whose
    functions all take a sizes buffer (`CFunction.sized_call`)."""
    names = list(defined)
    if entries is not None:
        names = []
        for entry in entries:
            name = entry.removeprefix("@")
            if name not in defined:
                listed = ", ".join(f"@{n}" for n in defined) or "none"
                raise ExportError(f"no function @{name} is defined (defined functions: {listed})")
            if name not in names:
                names.append(name)
    if not names:
        raise ExportError("the program defines no function to export")
    functions = [c_function(defined[name], prefix) for name in names]
    if symbolic:
        functions = [replace(f, sized_call=True) for f in functions]
    seen = {f"{prefix}_status_message": "the status message function"}
    for f in functions:
        sized = (f"{f.c_name}_arena_bytes",) if f.sized_call else ()
        for symbol in (f.c_name, f"{f.c_name}_with_arena", *sized):
            if symbol in seen:
                raise ExportError(f"@{f.name}: its C name {symbol} is also {seen[symbol]}")
            seen[symbol] = f"the C name of @{f.name}"
    for name in defined:  # one LLVM module holds the program and its entry points
        if name in C_RUNTIME or name in seen:
            what = seen.get(name, "a C function the entry points call")
            raise ExportError(
                f"@{name}: the library needs the name {name} for {what}: rename @{name}"
            )
    return functions
