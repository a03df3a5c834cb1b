"""`cfg-canonicalize`: DLVM's CFGCanonicalization (unique exit, join blocks, loop forms).

The three steps of DLVM's pass, without DLVM's stale-argument and void bugs. Every
block this pass inserts is a *forwarder*: it has the parameter types of the block it
precedes and only branches to it, passing its parameters in order. Redirecting edges into
a forwarder therefore keeps every branch argument list valid (no stale arguments) and
never changes what a function computes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block
from xdsl.passes import ModulePass

from dlc.analysis.graph_cfg import CFG, Loop, natural_loops, region
from dlc.analysis.levels import require_level
from dlc.dialects.cfg import successors
from dlc.dialects.graph import BranchEnumOp, BranchOp, FuncOp, ReturnOp, is_void
from dlc.passes.graph.inline import fresh
from dlc.passes.graph.pass_support import edges, functions, rebuild_terminator
from dlc.passes.statistics import PassStatistics

# -- step 1: unique exit ------------------------------------------------------------


def unique_exit(func: FuncOp) -> int:
    """Several `return v` -> `branch 'exit(v)`; 'exit(%exit_value): return %exit_value.
    A void function's exit block takes no parameter (DLVM passed one anyway)."""
    returns = [b.last_op for b in func.body.blocks if isinstance(b.last_op, ReturnOp)]
    if len(returns) < 2:
        return 0
    output = func.function_type.output
    exit_block = Block(arg_types=[] if is_void(output) else [output])
    exit_block._name = fresh("exit", block_names(func))
    if exit_block.args:
        exit_block.args[0]._name = fresh("exit_value", value_names(func))
    exit_block.add_op(ReturnOp(exit_block.args[0] if exit_block.args else None))
    func.body.add_block(exit_block)
    for ret in returns:
        block = ret.parent_block()
        assert block is not None
        block.insert_op_before(
            BranchOp(exit_block, [ret.value] if ret.value is not None else []), ret
        )
        block.erase_op(ret)
    return 1


# -- names and forwarders ---------------------------------------------------------------


def block_names(func: FuncOp) -> set[str | None]:
    return {getattr(b, "_name", None) for b in func.body.blocks}


def value_names(func: FuncOp) -> set[str | None]:
    names = {getattr(a, "_name", None) for b in func.body.blocks for a in b.args}
    return names | {getattr(r, "_name", None) for op in func.body.walk() for r in op.results}


def block_name(block: Block) -> str:
    return getattr(block, "_name", None) or "bb"


def insert_forwarder(func: FuncOp, target: Block, base: str, before: Block | None) -> Block:
    """A fresh block `'base(%p_0…): branch 'target(%p_0…)` (the target's parameter types,
    fresh names after its parameter names), placed before `before` (last when None)."""
    forwarder = Block(arg_types=[a.type for a in target.args])
    forwarder._name = fresh(base, block_names(func))
    taken = value_names(func)
    for new, old in zip(forwarder.args, target.args, strict=True):
        new._name = fresh(getattr(old, "_name", None) or "arg", taken)
    forwarder.add_op(BranchOp(target, list(forwarder.args)))
    if before is None:
        func.body.add_block(forwarder)
    else:
        func.body.insert_block_before(forwarder, before)
    return forwarder


def redirect(sources: Iterable[Block], target: Block, new: Block) -> None:
    """Every edge from one of `sources` into `target` goes to `new` instead (same
    arguments: `new` has `target`'s parameter types)."""
    for source in set(sources):
        term = source.last_op
        assert term is not None
        if target not in term.successors:
            continue
        if isinstance(term, BranchEnumOp):
            cases = [
                (case.data, new if dest is target else dest)
                for case, dest in zip(term.cases, term.dests, strict=True)
            ]
            replacement = BranchEnumOp(term.value, cases)
            source.insert_op_before(replacement, term)
            source.erase_op(term)
            continue
        old = edges(term)
        assert old is not None, f"unexpected terminator {term.name}"
        rebuild_terminator(term, [(new if b is target else b, args) for b, args in old])


# -- step 2: join blocks ----------------------------------------------------------------


def form_join(func: FuncOp, cfg: CFG, block: Block) -> bool:
    """Insert `'<block>_join` before block's post-dominator P when at least two edges
    from block's region reach P and P has predecessors outside the region."""
    join = cfg.post_dominator(block)
    if len(successors(block)) < 2 or join is None or join is cfg.entry:
        return False
    inside = region(cfg, block, join)
    into = [p for p in cfg.preds[join] if p in inside]
    if len(into) < 2 or len(into) == len(cfg.preds[join]):
        return False
    last = max(into, key=list(func.body.blocks).index)
    forwarder = insert_forwarder(func, join, f"{block_name(block)}_join", last.next_block)
    redirect(into, join, forwarder)
    return True


def form_joins(func: FuncOp) -> int:
    """Step 2 for each reachable branching block, in layout order."""
    cfg = CFG.of(func)
    order = [b for b in func.body.blocks if b in cfg.idom]
    created = 0
    for block in order:
        if form_join(func, cfg, block):
            created += 1
            cfg = CFG.of(func)
    return created


# -- step 3: loops ----------------------------------------------------------------------


def form_preheader(func: FuncOp, cfg: CFG, loop: Loop) -> bool:
    """Hoist the outside predecessors into `'<header>_preheader` unless there is exactly
    one, ending in an unconditional `branch`."""
    outside = [p for p in cfg.preds[loop.header] if p not in loop.body]
    if loop.header is cfg.entry or not outside:
        return False
    if len(outside) == 1 and isinstance(outside[0].last_op, BranchOp):
        return False
    forwarder = insert_forwarder(
        func, loop.header, f"{block_name(loop.header)}_preheader", loop.header
    )
    redirect(outside, loop.header, forwarder)
    return True


def form_latch(func: FuncOp, cfg: CFG, loop: Loop) -> bool:
    """Several back edges -> one `'<header>_latch` after the last back-edge block."""
    if len(loop.latches) < 2:
        return False
    last = max(loop.latches, key=list(func.body.blocks).index)
    base = f"{block_name(loop.header)}_latch"
    forwarder = insert_forwarder(func, loop.header, base, last.next_block)
    redirect(loop.latches, loop.header, forwarder)
    return True


def form_dedicated_exits(func: FuncOp, cfg: CFG, loop: Loop) -> bool:
    """An exit target with predecessors outside the loop gets a `'<header>_exit`
    forwarder (after the loop's last block in layout order) taking the loop's edges."""
    exits = []
    for block in loop.body:
        exits += [s for s in successors(block) if s not in loop.body and s not in exits]
    for target in sorted(exits, key=list(func.body.blocks).index):
        if target is cfg.entry or all(p in loop.body for p in cfg.preds[target]):
            continue
        sources = [p for p in cfg.preds[target] if p in loop.body]
        last = max(loop.body, key=list(func.body.blocks).index)
        base = f"{block_name(loop.header)}_exit"
        forwarder = insert_forwarder(func, target, base, last.next_block)
        redirect(sources, target, forwarder)
        return True
    return False


LOOP_STEPS: dict[str, Callable[[FuncOp, CFG, Loop], bool]] = {
    "preheaders created": form_preheader,
    "latches created": form_latch,
    "dedicated exits created": form_dedicated_exits,
}


def canonicalize_loops(func: FuncOp, counts: dict[str, int]) -> None:
    """Apply the first needed loop step to the innermost loop needing one, until none is
    needed (every step inserts one forwarder and removes one defect)."""
    limit = 4 * len(func.body.blocks) * max(1, len(func.body.blocks)) + 8
    for _ in range(limit):
        cfg = CFG.of(func)
        if not any(
            step(func, cfg, loop) and _count(counts, key)
            for loop in natural_loops(cfg)
            for key, step in LOOP_STEPS.items()
        ):
            return
    raise AssertionError(
        f"cfg-canonicalize: loop forming did not converge in @{func.sym_name.data}"
    )


def _count(counts: dict[str, int], key: str) -> bool:
    counts[key] = counts.get(key, 0) + 1
    return True


@dataclass(frozen=True)
class CFGCanonicalizePass(PassStatistics, ModulePass):
    """Make every function's control flow "reversible" (DLVM CFGCanonicalization).

    1. Unique exit: two or more `return`s become `branch 'exit(v)` into a fresh block
       `'exit(%exit_value: R): return %exit_value` (parameterless for void functions,
       where DLVM passed a stale argument).
    2. Join blocks: for each block B with two or more successors (in layout order)
       whose immediate post-dominator P is also entered from outside B's region (the
       blocks B dominates that B reaches before P) while the region has two or more
       edges into P, a fresh `'<B>_join(%p_0…)` forwarding its parameters to P is
       inserted after the last of those region blocks (DLVM: before P) and the
       region's edges go to it instead.
    3. Loops (natural loops, innermost first): a `'<header>_preheader` receiving the
       outside edges unless the header has exactly one outside predecessor ending in an
       unconditional `branch` (none is made for a loop headed by the entry block); a
       unique `'<header>_latch` when there are several back-edge blocks; dedicated exit
       blocks `'<header>_exit` in front of exit targets that also have predecessors
       outside the loop.
    Every inserted block forwards its parameters unchanged, so branch arguments stay
    consistent and results are unchanged. Fresh names append `_0`, `_1`, …. Running the
    pass twice changes nothing the second time. Statistics: "exit blocks created",
    "join blocks created", "preheaders created", "latches created",
    "dedicated exits created".
    """

    name = "cfg-canonicalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "graph", self.name)
        for func in functions(op):
            self.count("exit blocks created", unique_exit(func))
            self.count("join blocks created", form_joins(func))
            counts: dict[str, int] = {}
            canonicalize_loops(func, counts)
            for key in LOOP_STEPS:
                self.count(key, counts.get(key, 0))
