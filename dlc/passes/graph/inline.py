"""`inline`: replace calls by the callee's body."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass

from dlc.dialects.graph import BranchOp, FuncOp, ReturnOp
from dlc.dialects.graph_memory import ApplyOp
from dlc.passes.graph.pass_support import bump, functions


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


def inline_call(call: ApplyOp, callee: FuncOp) -> None:
    """Splice a copy of `callee`'s blocks in place of `call`."""
    body: Region = callee.body.clone()
    entry = body.blocks.first
    assert entry is not None
    for arg, value in zip(entry.args, call.args, strict=True):
        arg.replace_all_uses_with(value)
    returns = [b.last_op for b in body.blocks if isinstance(b.last_op, ReturnOp)]
    block = call.parent_block()
    assert block is not None
    if len(body.blocks) == 1 and len(returns) == 1:  # straight-line callee: no new blocks
        ret = returns[0]
        result = ret.value
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
    types = [call.result.type] if call.result is not None else []
    cont = block.split_before(call.next_op, arg_types=types)
    entry = body.blocks.first
    assert entry is not None
    for arg in list(entry.args):
        entry.erase_arg(arg)
    blocks = list(body.blocks)
    taken = {getattr(b, "_name", None) for b in block.parent.blocks}  # type: ignore[union-attr]
    prefix = call.callee.data
    for b, original in zip(blocks, call_blocks(call), strict=True):
        body.detach_block(b)
        b._name = fresh(f"{prefix}_{getattr(original, '_name', None) or 'bb'}", taken)  # type: ignore[attr-defined]
    cont._name = fresh(f"{prefix}_cont", taken)  # type: ignore[attr-defined]
    block.parent.insert_block_after(blocks, block)  # type: ignore[union-attr]
    for ret in returns:
        parent = ret.parent_block()
        assert parent is not None
        parent.insert_op_before(BranchOp(cont, [ret.value] if ret.value is not None else []), ret)
        parent.erase_op(ret)
    block.add_op(BranchOp(entry, []))
    return cont.args[0] if cont.args else None


@dataclass(frozen=True)
class InlinePass(ModulePass):
    """Inline calls of `!inline` functions (every non-recursive callee with `all=true`).

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

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        recursive = recursive_functions(op)
        table = {f.sym_name.data: f for f in functions(op)}
        wanted = {
            n for n, f in table.items() if n not in recursive and (self.all or f.inline is not None)
        }
        inlined = -1
        while inlined:  # inlined bodies may hold calls to inline too (the call graph is acyclic)
            calls = [c for f in table.values() for c in f.body.walk() if isinstance(c, ApplyOp)]
            calls = [c for c in calls if c.callee.data in wanted]
            for call in calls:
                inline_call(call, table[call.callee.data])
            inlined = len(calls)
            bump(self.name, "calls inlined", inlined)
