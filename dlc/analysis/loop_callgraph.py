"""The call graph of a loop-level module: which functions can reach themselves.

Plan-memory keeps recursive functions off static arenas and the llvm lowering gives
them a depth guard; both ask here.
"""

from __future__ import annotations

from typing import cast

from xdsl.dialects.builtin import ModuleOp

from dlc.analysis.walk import kind_of, walk_ops
from dlc.dialects import loop
from dlc.dialects.loop_memory import ScalarCallOp

_CALLS = (loop.CallOp, ScalarCallOp)
_CALL_KINDS: dict[type, int] = {}  # an op class -> its `kind_of` `_CALLS`


def is_recursive(func: loop.FuncOp, funcs: dict[str, loop.FuncOp]) -> bool:
    """`func` can reach itself through `loop.call` or `loop.scalar_call` (a reduction's
    function combinator may call back into the function that reduces)."""
    name = func.sym_name.data
    seen: set[str] = set()
    stack = [func]
    while stack:
        current = stack.pop()
        for op in walk_ops(current):
            if not kind_of(op, _CALLS, _CALL_KINDS):
                continue
            callee = cast("loop.CallOp | ScalarCallOp", op).callee.data
            if callee == name:
                return True
            if callee not in seen and callee in funcs:
                seen.add(callee)
                stack.append(funcs[callee])
    return False


def recursive_functions(module: ModuleOp) -> set[str]:
    """Names of the loop functions of `module` that can reach themselves."""
    funcs = {f.sym_name.data: f for f in module.body.block.ops if isinstance(f, loop.FuncOp)}
    return {name for name, func in funcs.items() if is_recursive(func, funcs)}


def callees(func: loop.FuncOp) -> set[str]:
    calls = (op for op in walk_ops(func) if kind_of(op, _CALLS, _CALL_KINDS))
    return {cast("loop.CallOp | ScalarCallOp", op).callee.data for op in calls}


def arena_bytes_needed(module: ModuleOp) -> int:
    """The arena one call context needs for any call of the module: the largest sum of
    the planned arenas of the functions a function can reach (itself included). A
    planned function is never recursive, so it is active at most once per call chain."""
    funcs = {f.sym_name.data: f for f in module.body.block.ops if isinstance(f, loop.FuncOp)}
    sizes = {n: getattr(f.attributes.get(loop.ARENA_BYTES), "data", 0) for n, f in funcs.items()}
    edges = {n: callees(f) & set(funcs) for n, f in funcs.items()}
    need = 0
    for start in funcs:
        seen, stack = {start}, [start]
        while stack:
            for callee in edges[stack.pop()] - seen:
                seen.add(callee)
                stack.append(callee)
        need = max(need, sum(sizes[n] for n in seen))
    return need


def unbounded_functions(module: ModuleOp) -> set[str]:
    """Functions whose run time no static bound limits: those with a CFG (a loop of
    blocks may never end), recursive ones, and every function that can reach one."""
    funcs = {f.sym_name.data: f for f in module.body.block.ops if isinstance(f, loop.FuncOp)}
    edges = {n: callees(f) & set(funcs) for n, f in funcs.items()}
    found = {n for n, f in funcs.items() if len(f.body.blocks) > 1 or is_recursive(f, funcs)}
    changed = True
    while changed:
        grown = {n for n in funcs if n not in found and edges[n] & found}
        found |= grown
        changed = bool(grown)
    return found
