"""The warm start of `dlc.compile` and `dlc-run`: a program compiled before, loaded from
its quick record (`dlc.runtime.quick`) without parsing it and without importing xDSL,
Lark or the IR classes. This module imports none of them either: the program is parsed
(`DeferredLevels`) only when `mod.ir(...)`, `mod.ir_module(...)` or `mod.export(...)`
asks for it.
"""

from __future__ import annotations

import os
from typing import Any

from dlc.options import Options, check_threads, compile_options, quick_facts
from dlc.runtime import quick


class DeferredLevels:
    """`CompiledModule`'s program at each level for a module from a quick record: the
    program is parsed, checked and differentiated on first use, then handled as after a
    full compile (`dlc.program_levels.ProgramLevels`)."""

    def __init__(
        self, text: str | bytes, filename: str, options: Options, jit: Any, allowed: frozenset[str]
    ) -> None:
        self._source = (text, filename)
        self._options, self._jit, self._allowed = options, jit, allowed
        self._levels: Any = None

    def _get(self) -> Any:
        if self._levels is None:
            from dlc.externs import check_externs
            from dlc.parser import parse_module
            from dlc.passes.graph.differentiate import differentiated
            from dlc.program_levels import ProgramLevels

            module = parse_module(*self._source)
            called = check_externs(module, self._allowed)
            graph = differentiated(module)
            self._levels = ProgramLevels(graph, self._options, self._jit, called)
        return self._levels

    def text(self, level: str) -> str:
        if level == "llvm" and self._jit.optimized_ir is not None:  # a memory hit keeps it
            return self._jit.optimized_ir
        return self._get().text(level)

    def module(self, level: str) -> Any:
        return self._get().module(level)

    def export(self, path: str | os.PathLike[str], **settings: Any) -> Any:
        return self._get().export(path, **settings)


def compile_cached(
    text: str | bytes,
    filename: str,
    allowed: frozenset[str],
    *,
    seed: int,
    num_threads: object,
    **options: Any,
) -> Any:
    """`dlc.compile` of `text` (from file `filename`, allowing the externs `allowed`,
    with `compile`'s keyword options) from its quick record, seeded; or None: no usable
    record, or options the full path must check and report (it raises for them in its
    own order: syntax errors first)."""
    try:
        checked = compile_options(**options)
        threads = check_threads(num_threads)
    except (TypeError, ValueError):
        return None
    facts = quick_facts(checked, allowed)
    if facts is None:
        return None
    target = checked.target

    def levels(jit: Any) -> DeferredLevels:
        return DeferredLevels(text, filename, checked, jit, allowed)

    key = quick.quick_key(text, facts)
    compiled = quick.load(key, filename, checked.opt_level, target, threads, levels)
    if compiled is not None:
        compiled.seed(seed)
    return compiled
