"""Control-flow unfolding (and call-graph facts) for the `differentiate` pass.

The primal body is copied into the adjoint as a tree: every block is duplicated once per
path from the entry (acyclic CFGs only; `reject_loops` gives the located error for
loops), so each `return` block ends one path (its `Trail`) and block arguments alias
the values the branch passed. The reverse sweep then runs over each path's ops."""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from dlc.diagnostics import copy_loc, error_at
from dlc.dialects.cfg import successors
from dlc.dialects.graph import BranchEnumOp, BranchOp, ConditionalOp, FuncOp, ReturnOp
from dlc.dialects.graph_memory import ApplyOp
from dlc.dialects.graph_verify import block_name

MAX_BLOCK_COPIES = 4096
ADJOINT_DECLS = ("adjoint", "gradient")

Path = list[Operation]
Trail = tuple[tuple[Block, int], ...]
"""A path through the primal: each block with the index of the successor taken (-1 at
the `return`)."""
Pending = tuple[Block, Block, dict[SSAValue, SSAValue], Path, Trail]  # old, copy, map, ops
Successor = tuple[Block, Block, dict[SSAValue, SSAValue], Path]


class PathUnfolder:
    """Copies `primal`'s blocks into `adjoint` (whose entry block must be empty), one
    block copy per path from the entry; `origin` maps each copied value to the primal's."""

    def __init__(self, primal: FuncOp, adjoint: FuncOp, seedable: bool):
        self.primal, self.adjoint, self.seedable = primal, adjoint, seedable
        self.origin: dict[SSAValue, SSAValue] = {}
        self.names: set[str] = set()
        self.trails: dict[Block, Trail] = {}
        """The primal path that each leaf (copied `return` block) ends."""

    def fresh(self, name: str | None) -> str | None:
        """`name`, or `name.k` when taken (None stays anonymous)."""
        if not name:
            return None
        new, k = name, 1
        while new in self.names:
            new, k = f"{name}.{k}", k + 1
        self.names.add(new)
        return new

    def unfold(self) -> list[tuple[Block, Path]]:
        """Copy the primal into the adjoint, one block copy per path; return the leaves
        (each copied `return` block with the ops of its path)."""
        old_entry = self.primal.body.blocks.first
        assert old_entry is not None
        work: list[Pending] = [(old_entry, *self.copy_entry(old_entry), [], ())]
        leaves: list[tuple[Block, Path]] = []
        copies = 0
        while work:
            old, new, vm, path, trail = work.pop()
            copies += 1
            if copies > MAX_BLOCK_COPIES:
                raise error_at(
                    self.adjoint,
                    f"cannot differentiate @{self.primal.sym_name.data}: too many control-flow paths",
                )
            path = path + self.copy_ops(old, new, vm)
            term = old.last_op
            if isinstance(term, ReturnOp):
                self.trails[new] = (*trail, (old, -1))
                leaves.append((new, path))
                continue
            succs = self.copy_successors(term, new, vm, path)
            work.extend((*s, (*trail, (old, k))) for k, s in enumerate(succs))
        return leaves

    def copy_entry(self, old_entry: Block) -> tuple[Block, dict[SSAValue, SSAValue]]:
        """The adjoint's entry block (the adjoint's parameters) and the argument map."""
        entry = Block(arg_types=list(self.adjoint.function_type.args))
        entry._name = "entry"
        self.names.add("entry")
        self.adjoint.body.add_block(entry)
        mapping: dict[SSAValue, SSAValue] = {}
        for old, new in zip(old_entry.args, entry.args, strict=False):
            new._name = self.fresh(old._name)
            mapping[old] = new
            self.origin[new] = old
        if self.seedable:
            entry.args[-1]._name = self.fresh("seed")
        return entry, mapping

    def copy_ops(self, old: Block, new: Block, vm: dict[SSAValue, SSAValue]) -> Path:
        """Clone old's ops up to its branch into `new`, with fresh names."""
        ops: list[Operation] = []
        for op in old.ops:
            if isinstance(op, BranchOp | ConditionalOp | BranchEnumOp):
                break
            copy = op.clone(value_mapper=vm)
            copy_loc(op, copy)
            for r_old, r_new in zip(op.results, copy.results, strict=False):
                r_new._name = self.fresh(r_old._name)
                self.origin[r_new] = self.origin.get(r_old, r_old)
            new.add_op(copy)
            ops.append(copy)
        return ops

    def copy_successors(
        self,
        term: Operation | None,
        new: Block,
        vm: dict[SSAValue, SSAValue],
        path: Path,
    ) -> list[Successor]:
        """Branch from `new` to fresh copies of term's successors (in the order of
        `term.successors`); return them as work."""
        out: list[Successor] = []
        if isinstance(term, BranchOp):
            dest = self.alias_block(term.dest, term.args, vm)
            out.append((term.dest, dest[0], dest[1], path))
            branch: Operation = BranchOp(dest[0], [])
        elif isinstance(term, ConditionalOp):
            then = self.alias_block(term.then_block, term.then_args, vm)
            other = self.alias_block(term.else_block, term.else_args, vm)
            out += [
                (term.then_block, then[0], then[1], path),
                (term.else_block, other[0], other[1], path),
            ]
            branch = ConditionalOp(vm.get(term.cond, term.cond), then[0], [], other[0], [])
        else:
            assert isinstance(term, BranchEnumOp)
            branch = self.copy_enum_branch(term, vm, path, out)
        copy_loc(term, branch)
        new.add_op(branch)
        return out

    def copy_enum_branch(
        self, term: BranchEnumOp, vm: dict[SSAValue, SSAValue], path: Path, out: list[Successor]
    ) -> BranchEnumOp:
        """`branchEnum` keeps its payload block arguments; the cases get fresh copies."""
        dests = []
        for case, block in zip(term.cases.data, term.dests, strict=False):
            copy = Block(arg_types=[a.type for a in block.args])
            copy._name = self.fresh(block_name(block))
            self.adjoint.body.add_block(copy)
            vm2 = dict(vm)
            for a_old, a_new in zip(block.args, copy.args, strict=False):
                a_new._name = self.fresh(a_old._name)
                vm2[a_old] = a_new
            dests.append((case.data, copy))
            out.append((block, copy, vm2, path))
        return BranchEnumOp(vm.get(term.value, term.value), dests)

    def alias_block(
        self,
        block: Block,
        args: tuple[SSAValue, ...] | list[SSAValue],
        vm: dict[SSAValue, SSAValue],
    ) -> tuple[Block, dict[SSAValue, SSAValue]]:
        """A parameterless copy of `block` whose parameters alias the branch operands."""
        copy = Block()
        copy._name = self.fresh(block_name(block))
        self.adjoint.body.add_block(copy)
        vm2 = dict(vm)
        for param, arg in zip(block.args, args, strict=False):
            vm2[param] = vm.get(arg, arg)
        return copy, vm2


def reject_loops(func: FuncOp) -> None:
    """A located error at the first branch that closes a cycle of the CFG."""
    closing = loop_edge(func)
    if closing is not None:
        block, nxt = closing
        raise error_at(
            block.last_op,
            f"cannot differentiate @{func.sym_name.data}: the branch to '{block_name(nxt)} "
            "closes a loop; loops are not supported by autodiff yet",
        )


def loop_edge(func: FuncOp) -> tuple[Block, Block] | None:
    """The first CFG edge (block, successor) that closes a cycle, else None."""
    entry = func.body.blocks.first
    assert entry is not None
    state: dict[Block, int] = {entry: 1}  # 1 = on the DFS stack, 2 = done
    stack: list[tuple[Block, list[Block]]] = [(entry, successors(entry))]
    while stack:
        block, succs = stack[-1]
        if not succs:
            state[block] = 2
            stack.pop()
            continue
        nxt = succs.pop(0)
        if state.get(nxt) == 1:
            return block, nxt
        if nxt not in state:
            state[nxt] = 1
            stack.append((nxt, successors(nxt)))
    return None


def trails(f: FuncOp) -> list[Trail] | None:
    """Every path of `f`'s (acyclic) CFG from the entry to a `return`, or None when
    unfolding `f` would take more than MAX_BLOCK_COPIES block copies."""
    entry = f.body.blocks.first
    assert entry is not None
    out: list[Trail] = []
    work: list[tuple[Block, Trail]] = [(entry, ())]
    copies = 0
    while work:
        block, trail = work.pop()
        copies += 1
        if copies > MAX_BLOCK_COPIES:
            return None
        term = block.last_op
        if isinstance(term, ReturnOp):
            out.append((*trail, (block, -1)))
            continue
        assert term is not None
        succs = [(s, (*trail, (block, k))) for k, s in enumerate(term.successors)]
        work += reversed(succs)  # the first successor's paths first
    return out


def is_adjoint_decl(op: Operation) -> bool:
    return isinstance(op, FuncOp) and op.decl is not None and op.decl.data in ADJOINT_DECLS


def differentiated_later(module: ModuleOp) -> set[str]:
    """The functions that the adjoint declarations' primals are or call, transitively."""
    funcs = {f.sym_name.data: f for f in module.body.block.ops if isinstance(f, FuncOp)}
    work = [f.primal.data for f in funcs.values() if is_adjoint_decl(f) and f.primal]
    seen: set[str] = set()
    while work:
        name = work.pop()
        if name in seen or name not in funcs:
            continue
        seen.add(name)
        f = funcs[name]
        work += [f.primal.data] if is_adjoint_decl(f) and f.primal else []
        work += [op.callee.data for op in f.walk() if isinstance(op, ApplyOp)]
    return seen


def fresh_symbol(base: str, taken: dict[str, FuncOp]) -> str:
    name, k = base, 1
    while name in taken:
        name, k = f"{base}{k}", k + 1
    return name
