"""`inline`: replace calls by the callee's body."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass

from dlc.analysis.levels import require_level
from dlc.diagnostics import copy_loc
from dlc.dialects.graph import BranchOp, FuncOp, ReturnOp
from dlc.dialects.graph_memory import ApplyOp
from dlc.passes.graph.pass_support import functions
from dlc.passes.statistics import PassStatistics


def recursive_functions(module: ModuleOp) -> set[str]:
    """Functions that can reach themselves through direct calls."""
    calls = {
        f.sym_name.data: {op.callee.data for op in f.body.walk() if isinstance(op, ApplyOp)}
        for f in functions(module)
    }
    recursive: set[str] = set()
    for start in calls:
        seen: set[str] = set()
        stack = list(calls[start])
        while stack:
            name = stack.pop()
            if name == start:
                recursive.add(start)
                break
            if name not in seen:
                seen.add(name)
                stack.extend(calls.get(name, ()))
    return recursive


def value_names(region: Region) -> set[str | None]:
    """The DLVM names (`%x`) of the block arguments and results in `region`."""
    names: set[str | None] = set()
    for block in region.blocks:
        names.update(getattr(a, "_name", None) for a in block.args)
        for op in block.walk():
            names.update(getattr(r, "_name", None) for r in op.results)
    return names


def rename_values(body: Region, taken: set[str | None]) -> None:
    """Give each named value of `body` a name not in `taken` (`y` -> `y_0`, ...): the
    names of a function's values are unique, also after a callee is inlined twice."""
    for block in body.blocks:
        values = [*block.args, *(r for op in block.walk() for r in op.results)]
        for value in values:
            name = getattr(value, "_name", None)
            if name:
                value._name = fresh(name, taken)


def inline_call(call: ApplyOp, callee: FuncOp) -> None:
    """Splice a copy of `callee`'s blocks in place of `call`."""
    body: Region = callee.body.clone()
    for original, copy in zip(callee.body.walk(), body.walk(), strict=True):
        copy_loc(original, copy)  # traps and diagnostics name the callee's lines
    entry = body.blocks.first
    assert entry is not None
    caller = call.parent_op()
    while caller is not None and not isinstance(caller, FuncOp):
        caller = caller.parent_op()
    assert caller is not None
    rename_values(body, value_names(caller.body))
    for arg, value in zip(entry.args, call.args, strict=True):
        arg.replace_all_uses_with(value)
    returns = [b.last_op for b in body.blocks if isinstance(b.last_op, ReturnOp)]
    block = call.parent_block()
    assert block is not None
    if len(body.blocks) == 1 and len(returns) == 1:  # straight-line callee: no new blocks
        ret = returns[0]
        result = ret.value
        if result is not None and result.owner in entry.ops and call.result is not None:
            result._name = getattr(call.result, "_name", None)
        entry.erase_op(ret, safe_erase=False)
        for op in list(entry.ops):
            op.detach()
            block.insert_op_before(op, call)
    else:
        result = split_for_call(call, body, returns)
    if call.result is not None and result is not None:
        call.result.replace_all_uses_with(result)
    block.erase_op(call)


def fresh(base: str, taken: set[str | None]) -> str:
    """`base`, or `base_0`, `base_1`, ... when taken (DLVM's fresh-name rule)."""
    name, i = base, 0
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    taken.add(name)
    return name


def call_blocks(call: ApplyOp) -> list[Block]:
    """The blocks of the callee of `call`, whose names the inlined copies take."""
    module = call.parent_op()
    while module is not None and not isinstance(module, ModuleOp):
        module = module.parent_op()
    assert module is not None
    callee = next(
        f for f in module.ops if isinstance(f, FuncOp) and f.sym_name.data == call.callee.data
    )
    return list(callee.body.blocks)


def split_for_call(call: ApplyOp, body: Region, returns: list[ReturnOp]) -> SSAValue | None:
    """caller: ops; call; rest  ->  ops; branch 'entry' ... return v -> branch 'cont(v); 'cont(%r): rest."""
    block = call.parent_block()
    assert block is not None and call.next_op is not None
    region = block.parent
    assert region is not None, "the call is inside a function body"
    types = [call.result.type] if call.result is not None else []
    cont = block.split_before(call.next_op, arg_types=types)
    entry = body.blocks.first
    assert entry is not None
    for arg in list(entry.args):
        entry.erase_arg(arg)
    blocks = list(body.blocks)
    taken = {getattr(b, "_name", None) for b in region.blocks}
    prefix = call.callee.data
    for b, original in zip(blocks, call_blocks(call), strict=True):
        body.detach_block(b)
        b._name = fresh(f"{prefix}_{getattr(original, '_name', None) or 'bb'}", taken)
    cont._name = fresh(f"{prefix}_cont", taken)
    region.insert_block_after(blocks, block)
    for ret in returns:
        parent = ret.parent_block()
        assert parent is not None
        parent.insert_op_before(BranchOp(cont, [ret.value] if ret.value is not None else []), ret)
        parent.erase_op(ret)
    block.add_op(BranchOp(entry, []))
    return cont.args[0] if cont.args else None


@dataclass(frozen=True)
class InlinePass(PassStatistics, ModulePass):
    """Inline calls of `!inline` functions, of every non-recursive function with at most
    `max-ops` instructions, or of every non-recursive callee with `all=true`.

    Input: a graph-level module. A straight-line callee's ops replace the call; a
    multi-block callee splits the caller's block after the call into a continuation
    block taking the result as its argument, the callee's blocks are inserted after
    the caller's block, the call becomes `branch` to the callee's entry (its arguments
    substituted) and each `return v` becomes `branch 'cont(v)`. Recursive functions
    (calling themselves through any cycle) and declarations are never inlined; callees
    stay in the module. Statistics: "calls inlined".
    """

    name = "inline"

    all: bool = False
    max_ops: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "graph", self.name)
        recursive = recursive_functions(op)
        table = {f.sym_name.data: f for f in functions(op)}
        wanted = {n for n, f in table.items() if n not in recursive and self.wants(f)}
        inlined = -1
        while inlined:  # inlined bodies may hold calls to inline too (the call graph is acyclic)
            calls = [c for f in table.values() for c in f.body.walk() if isinstance(c, ApplyOp)]
            calls = [c for c in calls if c.callee.data in wanted]
            for call in calls:
                inline_call(call, table[call.callee.data])
            inlined = len(calls)
            self.count("calls inlined", inlined)

    def wants(self, func: FuncOp) -> bool:
        """Whether calls of (non-recursive) `func` are inlined."""
        if self.all or func.inline is not None:
            return True
        return sum(1 for _ in func.body.walk()) <= self.max_ops
