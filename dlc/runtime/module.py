"""`CompiledModule`: the object `dlc.compile` returns.

`mod.f(x, w)` or `mod["f"](x, w)` calls a compiled function (`convention.py`);
`mod.ir(level)` shows the program at a level; `mod.stats(f)` gives the compile report;
`mod.seed(n)` restarts the `random` generator; `mod.profile()` gives the kernels'
times of a module compiled with `profile=True` (`profile.py`). The module only calls what it was given:
the pipeline (`dlc.api`) compiles, and hands over the program text at each level as a
callback, computed on first use.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from dlc.diagnostics import clone_located
from dlc.dialects.abi import LIVE_BOXES_VAR, RNG_VAR
from dlc.runtime.context import Contexts
from dlc.runtime.convention import CompiledFunction
from dlc.runtime.jit import JITModule
from dlc.runtime.native import Messages, variable_storage

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from dlc.runtime.profile import EventBuffer, Profile

LEVELS = ("graph", "tensor", "loop", "llvm")


class Levels(Protocol):
    """The program of a compiled module at each level (computed on first use)."""

    def text(self, level: str) -> str: ...

    def module(self, level: str) -> ModuleOp: ...

    def export(self, path: str | os.PathLike[str], **settings: Any) -> Any: ...


class CompiledModule:
    """Native code for a graph module: `mod.f(...)`, `mod["f"]`, `mod.ir(level)`."""

    def __init__(
        self,
        jit: JITModule,
        funcs: dict[str, Any],
        native: set[str],
        report: tuple[dict[str, dict[str, int]], dict[str, dict[str, int]], int, list[str]],
        messages: list[str] | None,
        levels: Levels,
        threads: int = 1,
    ) -> None:
        """`funcs` maps names to the graph functions (their signatures), `native` names
        those with machine code, `report` is the compile report (loop-level facts per
        function, statistics per pass, the arena a call needs), `messages` the status
        messages of the code and `levels` gives the program at each level; `threads` is
        how many threads its parallel loops use."""
        self._jit = jit
        self._stats, self._pass_statistics, arena_bytes, unbounded = report
        self._levels = levels
        contexts = Contexts(arena_bytes, threads)  # one call context per calling thread
        self._threads = threads
        self._profiled: tuple[EventBuffer, list[dict[str, Any]]] | None = None
        status = Messages(messages) if messages else None
        self._functions = {
            name: CompiledFunction(
                name, f, jit, contexts, status, name in native, long=name in unbounded
            )
            for name, f in funcs.items()
        }

    def seed(self, value: int) -> None:
        """Restart the `random` generator: seed `value`, counter 0. Any int is a seed,
        taken mod 2**64 (the state is one u64 word): -1 seeds like 2**64 - 1, as C's
        `(uint64_t)-1` would, and `dlc-run --seed` does the same. Draws are a pure
        function of (seed, number of earlier draws).

        On a module that never uses `random` (no generator state) this does nothing
        and raises nothing (the type check still applies): seeding is then harmless."""
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise TypeError(f"seed: expected an int, got {type(value).__name__}")
        state = variable_storage(self._jit, RNG_VAR)
        if state is None:
            return  # the module never calls `random`
        words = state[:16].view(np.uint64)
        words[0] = int(value) % (1 << 64)
        words[1] = 0

    def attach_profile(self, kernels: list[dict[str, Any]]) -> None:
        """Record the timing marks of a profiling compile whose kernels are `kernels`."""
        from dlc.runtime.profile import EventBuffer  # only profiling compiles pay for it

        self._profiled = (EventBuffer(self._jit), kernels)

    def profile(self) -> Profile:
        """The kernels the calls since the last `profile()` (or the compile) ran:
        `print(mod.profile().table())`, `mod.profile().save("trace.json")`. Only for
        modules compiled with `profile=True` (ValueError otherwise). The roofline's
        limits are measured once per CPU (`dlc.runtime.peaks`), again when a kernel
        beat them (they were measured on a busy machine). Calls from several
        threads at once mix their marks: profile from one thread."""
        from dlc.runtime.peaks import host_peaks, raised_peaks
        from dlc.runtime.profile import Profile, spans

        if self._profiled is None:
            raise ValueError("profile(): compile with profile=True to record kernel times")
        buffer, kernels = self._profiled
        events, lost = buffer.take()
        found = Profile(kernels, spans(events), host_peaks(), lost, self._threads)
        if any((row.percent_of_limit or 0) > 100 for row in found.rows):  # peaks of a busy machine
            found = Profile(kernels, found.spans, raised_peaks(found.peaks), lost, self._threads)
        return found

    def live_boxes(self) -> int:
        """How many boxes of recursive enum values are alive: made by the module's code
        or for arguments, and not freed yet (0 when there are none). Every call gives
        back what it made, so this is 0 after calls unless the program keeps trees in
        variables or memory."""
        counter = variable_storage(self._jit, LIVE_BOXES_VAR)
        return 0 if counter is None else int(counter[:8].view(np.int64)[0])

    def export(
        self,
        path: str | os.PathLike[str],
        *,
        entries: list[str] | None = None,
        prefix: str | None = None,
        header: str | os.PathLike[str] | None = None,
        target: str | None = None,
        target_cpu: str | None = None,
        cc: str | None = None,
    ) -> Any:
        """Write this module's program as a C library (ahead-of-time compilation, like
        `dlc-compile`): `path` ends in `.so` (linked by the C compiler `cc`, default
        `$CC` or `cc`, `<triple>-gcc` for a foreign target), `.o` or `.a`; the header
        goes to `header` (default `<prefix>.h` next to `path`). `entries` names the
        exported functions (default all), `prefix` starts their C names (default the
        file name: `libmodel.so` -> `model_f`), `target` is an LLVM triple such as
        `aarch64-linux-gnu` (default this machine) and `target_cpu` its CPU model. The
        code is compiled again with this module's options (opt level, bounds checks,
        fusion, ...) for that target. Returns `dlc.aot.Exported` (the paths written);
        raises `dlc.aot.ExportError` (or `DiagnosticError` for a function whose
        signature C cannot take). Generated code uses no Python at run time."""
        settings = {"prefix": prefix, "header": header, "target": target}
        settings |= {"target_cpu": target_cpu, "cc": cc}
        return self._levels.export(path, entries=entries, **settings)

    @property
    def functions(self) -> tuple[str, ...]:
        return tuple(self._functions)

    def __getitem__(self, name: str) -> CompiledFunction:
        try:
            return self._functions[name]
        except KeyError:
            raise KeyError(f"no function @{name} in the compiled module") from None

    def __getattr__(self, name: str) -> CompiledFunction:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._functions[name]
        except KeyError:
            raise AttributeError(f"no function @{name} in the compiled module") from None

    def stats(self, name: str) -> dict[str, int]:
        """Compile report of function `name`: `loop_nests` (top-level loop nests run per
        call), `buffers` (intermediate buffers), `arena_bytes`, `min_live_bytes`,
        `heap_buffers`."""
        self[name]  # KeyError for an unknown function
        if name in self._stats:
            return dict(self._stats[name])
        raise KeyError(f"@{name} has no loop-level code")

    def pass_statistics(self) -> dict[str, dict[str, int]]:
        """What the compile's passes did: pass name -> counter -> value (the counts of
        `dlc-opt --pass-statistics`, summed over the runs of a pass), e.g.
        `{"matrix-chain-reorder": {"chains reordered": 1, "FLOPs saved": 180000}}`."""
        return {name: dict(counts) for name, counts in self._pass_statistics.items()}

    def ir(self, level: str = "llvm") -> str:
        """The program at `level` (graph|tensor|loop|llvm; llvm = optimized LLVM IR)."""
        _check_level(level)
        return self._levels.text(level)

    def ir_module(self, level: str) -> ModuleOp:
        """A copy of the program at `level` as an xDSL module (graph|tensor|loop|llvm;
        llvm before LLVM's own optimizations), to inspect or to run passes on."""
        _check_level(level)
        return clone_located(self._levels.module(level))


def _check_level(level: str) -> None:
    if level not in LEVELS:
        raise ValueError(f"unknown IR level {level!r}; expected one of {', '.join(LEVELS)}")
