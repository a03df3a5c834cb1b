"""The size budget of one compile: how much program `dlc.compile` takes on.

Compile time grows with the program (xDSL builds every op of every level in Python,
about 5 ms an instruction on a loaded 2-core machine), so a small text asking for a
lot of work (1,000 tiny functions calling each other took 102 s) is refused before
any lowering work is spent on it, with a located diagnostic naming the limit and the
option that raises it (`dlc.compile(..., budget=ModuleBudget(max_functions=...))`).
One function's own size has its limit in `lower-graph-to-tensor`
(`MAX_FUNCTION_INSTRUCTIONS`).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp

from dlc.diagnostics import error_at
from dlc.dialects.graph import FuncOp
from dlc.dialects.graph_aggregate import ApplyOp


@dataclass(frozen=True)
class ModuleBudget:
    """What one compile may hold (defaults: about a minute of compile time at most)."""

    max_functions: int = 256
    """Defined functions (synthesized gradients included)."""
    max_instructions: int = 20_000
    """Instructions of all functions together."""
    max_call_depth: int = 64
    """The longest chain of calls between distinct functions (recursion aside)."""


def _raise_hint(field: str) -> str:
    return f"raise it with budget=ModuleBudget({field}=...)"


def check_budget(module: ModuleOp, budget: ModuleBudget) -> None:
    """A located DiagnosticError at the function that goes over a limit of `budget`."""
    funcs = [f for f in module.body.block.ops if isinstance(f, FuncOp) and not f.is_declaration]
    total = 0
    for index, func in enumerate(funcs):
        if index == budget.max_functions:
            raise error_at(
                func,
                f"the module defines more than {budget.max_functions} functions "
                f"({len(funcs)}): {_raise_hint('max_functions')}",
            )
        total += sum(1 for _ in func.body.walk())
        if total > budget.max_instructions:
            raise error_at(
                func,
                f"the module has more than {budget.max_instructions} instructions (at "
                f"@{func.sym_name.data}): {_raise_hint('max_instructions')}",
            )
    _check_call_depth(funcs, budget)


def _check_call_depth(funcs: list[FuncOp], budget: ModuleBudget) -> None:
    """Longest call chain by an iterative depth-first walk (calls back into a function
    on the walk's path, recursion, add nothing)."""
    by_name = {f.sym_name.data: f for f in funcs}
    callees = {
        name: sorted(
            {op.callee.data for op in f.body.walk() if isinstance(op, ApplyOp)} & set(by_name)
        )
        for name, f in by_name.items()
    }
    depth: dict[str, int] = {}
    for root in by_name:
        if root in depth:
            continue
        path, stack = {root}, [(root, iter(callees[root]))]
        while stack:
            name, todo = stack[-1]
            callee = next(todo, None)
            if callee is None:
                stack.pop()
                path.discard(name)
                inner = [depth[c] for c in callees[name] if c in depth]
                depth[name] = 1 + max(inner, default=0)
                if depth[name] > budget.max_call_depth:
                    raise error_at(
                        by_name[name],
                        f"@{name} starts a chain of more than {budget.max_call_depth} "
                        f"nested calls: {_raise_hint('max_call_depth')}",
                    )
                continue
            if callee in depth or callee in path:
                continue
            path.add(callee)
            stack.append((callee, iter(callees[callee])))
