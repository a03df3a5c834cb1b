"""`differentiate`: reverse-mode automatic differentiation, source to source.

Turns every `[adjoint @p from S wrt … keeping … seedable]` (or `[gradient …]`)
declaration into a definition with DLVM's signature (shared/DLVM.md §4.1): the
derivatives of the source output with respect to the `wrt` arguments first, then the
kept outputs; the last parameter is the seed when `seedable`, otherwise the seed is
ones of the source type.

Algorithm. The primal body is copied into the adjoint with its control flow unfolded
into a tree: every block is duplicated per path from the entry (acyclic CFGs only;
loops are rejected), so each `return` block ends exactly one path and block
arguments become plain aliases of the values the branch passed. At each return the
ops of its path are swept in reverse with the rules of `adjoint_rules.py`, computing
adjoints only for *active* values (depending on a `wrt` argument and reaching the
source). A call `apply @g` gets an adjoint `@g_grad` (fresh name; all differentiable
arguments, seedable) synthesized and called. Finally unused pure ops are erased, so
the function computes no value it does not use.

Decisions: only float tensors carry gradients. Integer and bool values are constants
(DLVM has no int↔float casts, so integer data reaches float results only through
non-differentiable positions such as masks); the derivative with respect to an integer
argument is zero. Reaching an op without a rule (compares' outputs used as numbers,
`modulo`, `floorDivide`, `truncateDivide`, `digamma`, `random`, calls through
pointers, memory ops…) on a path from a `wrt` argument to the source is a located
error naming the op and the path. Higher-order adjoints work: an adjoint whose primal
is itself an adjoint declaration is built after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr, UnitAttr
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.traits import IsTerminator, Pure

from dlc.diagnostics import DiagnosticError, copy_loc, error_at
from dlc.dialects.graph import (
    BranchEnumOp,
    BranchOp,
    ConditionalOp,
    FuncOp,
    LiteralOp,
    ReturnOp,
    Symbols,
)
from dlc.dialects.graph_literal import LiteralAttr
from dlc.dialects.graph_memory import ApplyOp
from dlc.dialects.graph_types import FunctionType, TensorType, TupleType, dtype_is_float
from dlc.dialects.graph_verify import adjoint_type, is_differentiable, value_name
from dlc.passes.adjoint_rules import Adj, Emitter, differentiable_operands, rule_for

MAX_BLOCK_COPIES = 4096
ADJOINT_DECLS = ("adjoint", "gradient")
DECL_PROPS = ("decl", "primal", "from_index", "wrt", "keeping", "seedable")
MEMORY_WRITES = ("store", "copy", "push")


def has_float(t: object) -> bool:
    """Whether a value of type t can carry a gradient."""
    if isinstance(t, TupleType):
        return any(has_float(e) for e in t.types)
    return isinstance(t, TensorType) and dtype_is_float(t.dt)


def is_adjoint_decl(op: Operation) -> bool:
    return isinstance(op, FuncOp) and op.decl is not None and op.decl.data in ADJOINT_DECLS


def has_adjoint_declarations(module: ModuleOp) -> bool:
    return any(is_adjoint_decl(op) for op in module.body.block.ops)


def differentiated(module: ModuleOp) -> ModuleOp:
    """`module` itself without adjoint declarations, else a differentiated clone."""
    if not has_adjoint_declarations(module):
        return module
    work = module.clone()
    Differentiator(work).run()
    return work


@dataclass(frozen=True)
class DifferentiatePass(ModulePass):
    """Define every adjoint declaration of a graph module (see the module docstring).

    Input: a verified graph module. Afterwards no function is an adjoint declaration,
    synthesized callee adjoints (`@g_grad`) follow their caller's adjoint, and the
    module verifies. Modules without adjoint declarations are unchanged.
    """

    name = "differentiate"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        Differentiator(op).run()


class Differentiator:
    """Works through the module's adjoint declarations, primal before adjoint."""

    def __init__(self, module: ModuleOp):
        self.module = module
        self.symbols = Symbols.of_module(module)
        self.synthesized: dict[tuple[str, int | None], str] = {}
        self.in_progress: set[str] = set()

    def functions(self) -> dict[str, FuncOp]:
        return {f.sym_name.data: f for f in self.module.body.block.ops if isinstance(f, FuncOp)}

    def run(self) -> None:
        while True:
            pending = [f for f in self.module.body.block.ops if is_adjoint_decl(f)]
            if not pending:
                return
            self.define(pending[0])  # type: ignore[arg-type]

    def define(self, adjoint: FuncOp) -> None:
        """Define `adjoint`, first defining its primal when that is an adjoint too."""
        chain = [adjoint]
        while True:
            top = chain[-1]
            primal = self.functions().get(top.primal.data if top.primal else "")
            if primal is None or not is_adjoint_decl(primal):
                break
            if primal in chain:
                raise error_at(
                    top,
                    f"adjoint @{top.sym_name.data} depends on itself through @{primal.sym_name.data}",
                )
            chain.append(primal)
        for func in reversed(chain):
            FunctionDifferentiator(self, func).run()

    def callee_adjoint(self, caller: FuncOp, call: ApplyOp, source: int | None) -> FuncOp:
        """The adjoint of the callee (all differentiable args, seedable), made on demand."""
        callee = call.callee.data
        key = (callee, source)
        funcs = self.functions()
        if key in self.synthesized:
            return funcs[self.synthesized[key]]
        target = funcs.get(callee)
        if target is None or (target.is_declaration and not is_adjoint_decl(target)):
            raise error_at(call, f"cannot differentiate the call to @{callee}: it has no body")
        ftype = target.function_type
        wrt = [i for i, t in enumerate(ftype.args) if has_float(t) and is_differentiable(t)]
        name = fresh_symbol(f"{callee}_grad", funcs)
        decl = FuncOp(
            name,
            FunctionType([], TupleType([])),
            decl=StringAttr("adjoint"),
            primal=StringAttr(callee),
            from_index=None if source is None else _int(source),
            wrt=None if len(wrt) == len(ftype.args) else _ints(wrt),
            seedable=UnitAttr(),
        )
        decl.properties["function_type"] = adjoint_type(decl, self.symbols)
        self.module.body.block.insert_op_after(decl, caller)
        copy_loc(call, decl)
        self.symbols = Symbols.of_module(self.module)
        self.synthesized[key] = name
        return decl


def _int(v: int):  # noqa: ANN202 -- IntAttr
    from xdsl.dialects.builtin import IntAttr

    return IntAttr(v)


def _ints(vs: list[int]):  # noqa: ANN202 -- ArrayAttr[IntAttr]
    from dlc.dialects.graph_tensor import int_array

    return int_array(vs)


def fresh_symbol(base: str, taken: dict[str, FuncOp]) -> str:
    name, k = base, 1
    while name in taken:
        name, k = f"{base}{k}", k + 1
    return name


class FunctionDifferentiator:
    """Defines one adjoint function from its primal."""

    def __init__(self, owner: Differentiator, adjoint: FuncOp):
        self.owner = owner
        self.adjoint = adjoint
        assert adjoint.primal is not None
        self.primal = owner.functions()[adjoint.primal.data]
        self.source = adjoint.from_index.data if adjoint.from_index is not None else None
        n = len(self.primal.function_type.args)
        self.wrt = [a.data for a in adjoint.wrt.data] if adjoint.wrt is not None else list(range(n))
        self.keeping = [a.data for a in adjoint.keeping.data] if adjoint.keeping is not None else []
        self.seedable = adjoint.seedable is not None
        self.origin: dict[SSAValue, SSAValue] = {}
        self.names: set[str] = set()

    def run(self) -> None:
        if not self.primal.body.blocks:
            raise error_at(
                self.adjoint, f"cannot differentiate @{self.primal.sym_name.data}: it has no body"
            )
        reject_loops(self.primal)
        leaves = self.unfold()
        for key in DECL_PROPS:
            self.adjoint.properties.pop(key, None)
        for leaf, path in leaves:
            self.differentiate_path(leaf, path)
        erase_dead_code(self.adjoint)

    # -- copying the primal as a tree of paths --------------------------------------------

    def fresh(self, name: str | None) -> str | None:
        if not name:
            return None
        new, k = name, 1
        while new in self.names:
            new, k = f"{name}.{k}", k + 1
        self.names.add(new)
        return new

    def unfold(self) -> list[tuple[Block, list[Operation]]]:
        """Copy the primal into the adjoint, one block copy per path; return the leaves."""
        old_entry = self.primal.body.blocks.first
        assert old_entry is not None
        arg_types = list(self.adjoint.function_type.args)
        entry = Block(arg_types=arg_types)
        entry._name = "entry"  # type: ignore[attr-defined]
        self.names.add("entry")
        self.adjoint.body.add_block(entry)
        mapping: dict[SSAValue, SSAValue] = {}
        for old, new in zip(old_entry.args, entry.args, strict=False):
            new._name = self.fresh(old._name)  # type: ignore[attr-defined]
            mapping[old] = new
            self.origin[new] = old
        if self.seedable:
            entry.args[-1]._name = self.fresh("seed")  # type: ignore[attr-defined]
        leaves: list[tuple[Block, list[Operation]]] = []
        work: list[tuple[Block, Block, dict[SSAValue, SSAValue], list[Operation]]] = [
            (old_entry, entry, mapping, [])
        ]
        copies = 0
        while work:
            old, new, vm, path = work.pop()
            copies += 1
            if copies > MAX_BLOCK_COPIES:
                raise error_at(
                    self.adjoint,
                    f"cannot differentiate @{self.primal.sym_name.data}: too many control-flow paths",
                )
            path = path + self.copy_ops(old, new, vm)
            term = old.last_op
            if isinstance(term, ReturnOp):
                leaves.append((new, path))
                continue
            work.extend(self.copy_successors(term, new, vm, path))
        return leaves

    def copy_ops(self, old: Block, new: Block, vm: dict[SSAValue, SSAValue]) -> list[Operation]:
        ops: list[Operation] = []
        for op in old.ops:
            if isinstance(op, BranchOp | ConditionalOp | BranchEnumOp):
                break
            copy = op.clone(value_mapper=vm)
            copy_loc(op, copy)
            for r_old, r_new in zip(op.results, copy.results, strict=False):
                r_new._name = self.fresh(r_old._name)  # type: ignore[attr-defined]
                self.origin[r_new] = self.origin.get(r_old, r_old)
            new.add_op(copy)
            ops.append(copy)
        return ops

    def copy_successors(
        self,
        term: Operation | None,
        new: Block,
        vm: dict[SSAValue, SSAValue],
        path: list[Operation],
    ) -> list[tuple[Block, Block, dict[SSAValue, SSAValue], list[Operation]]]:
        out = []
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
            dests = []
            for case, block in zip(term.cases.data, term.dests, strict=False):
                copy = Block(arg_types=[a.type for a in block.args])
                copy._name = self.fresh(block._name)  # type: ignore[attr-defined]
                self.adjoint.body.add_block(copy)
                vm2 = dict(vm)
                for a_old, a_new in zip(block.args, copy.args, strict=False):
                    a_new._name = self.fresh(a_old._name)  # type: ignore[attr-defined]
                    vm2[a_old] = a_new
                dests.append((case.data, copy))
                out.append((block, copy, vm2, path))
            branch = BranchEnumOp(vm.get(term.value, term.value), dests)
        copy_loc(term, branch)
        new.add_op(branch)
        return out

    def alias_block(
        self,
        block: Block,
        args: tuple[SSAValue, ...] | list[SSAValue],
        vm: dict[SSAValue, SSAValue],
    ) -> tuple[Block, dict[SSAValue, SSAValue]]:
        """A parameterless copy of `block` whose parameters alias the branch operands."""
        copy = Block()
        copy._name = self.fresh(block._name)  # type: ignore[attr-defined]
        self.adjoint.body.add_block(copy)
        vm2 = dict(vm)
        for param, arg in zip(block.args, args, strict=False):
            vm2[param] = vm.get(arg, arg)
        return copy, vm2

    # -- one path ---------------------------------------------------------------------------

    def differentiate_path(self, leaf: Block, path: list[Operation]) -> None:
        ret = leaf.last_op
        assert isinstance(ret, ReturnOp) and ret.value is not None
        entry = self.adjoint.body.blocks.first
        assert entry is not None
        args = list(entry.args)
        e = Emitter(leaf, ret, ret, self.owner.symbols)
        seed: SSAValue = args[-1] if self.seedable else self.ones(e)
        wrt_args = [args[i] for i in self.wrt if has_float(args[i].type)]
        sweep = PathSweep(self, path, wrt_args, ret.value)
        adjoints = sweep.run(e, seed if self.source is None else {self.source: seed})
        results = [self.derivative(e, adjoints, args[i]) for i in self.wrt]
        results += [self.kept(e, ret.value, k) for k in self.keeping]
        out_type = self.adjoint.function_type.output
        tree = ("tuple", tuple(("operand", i) for i in range(len(results))))
        tuple_op = e.insert(LiteralOp(LiteralAttr(tree), out_type, results))
        ret.operands = [tuple_op.results[0]]

    def ones(self, e: Emitter) -> SSAValue:
        out = self.primal.function_type.output
        source = (
            out.types[self.source]
            if isinstance(out, TupleType) and self.source is not None
            else out
        )
        assert isinstance(source, TensorType)
        return e.splat(1, source)

    def derivative(self, e: Emitter, adjoints: dict[SSAValue, Adj], arg: BlockArgument) -> SSAValue:
        adj = adjoints.get(arg)
        if isinstance(adj, SSAValue):
            return adj
        assert isinstance(arg.type, TensorType)
        return e.splat(0, arg.type)

    def kept(self, e: Emitter, value: SSAValue, k: int) -> SSAValue:
        if not isinstance(value.type, TupleType):
            return value
        owner = value.owner
        if isinstance(owner, LiteralOp) and owner.value.data[0] == "tuple":
            element = owner.value.data[1][k]
            if element[0] == "operand":
                return owner.elements[element[1]]
        return e.extract(value, [k])


def reject_loops(func: FuncOp) -> None:
    """A located error at the first branch that closes a cycle of the CFG."""
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
            raise error_at(
                block.last_op,
                f"cannot differentiate @{func.sym_name.data}: the branch to '{nxt._name} closes a loop; "  # type: ignore[attr-defined]
                "loops are not supported by autodiff yet",
            )
        if nxt not in state:
            state[nxt] = 1
            stack.append((nxt, successors(nxt)))


def successors(block: Block) -> list[Block]:
    term = block.last_op
    return list(term.successors) if term is not None else []


class PathSweep:
    """Activity analysis and the reverse sweep over the ops of one path."""

    def __init__(
        self,
        fd: FunctionDifferentiator,
        ops: list[Operation],
        wrt: list[SSAValue],
        output: SSAValue,
    ):
        self.fd, self.ops, self.output = fd, ops, output
        self.varied: set[SSAValue] = set(wrt)
        self.came_from: dict[SSAValue, SSAValue] = {}
        self.useful: set[SSAValue] = {output}

    def analyze(self) -> None:
        for op in self.ops:
            inputs = [v for v in op.operands if v in self.varied]
            if not inputs:
                continue
            if getattr(op, "OPCODE", "") in MEMORY_WRITES:
                raise self.error(op, inputs[0])  # gradients are not tracked through memory
            for r in op.results:
                if has_float(r.type):
                    self.varied.add(r)
                    self.came_from[r] = inputs[0]
        for op in reversed(self.ops):
            if not any(r in self.useful for r in op.results):
                continue
            positions = differentiable_operands(op) or set()
            for i, v in enumerate(op.operands):
                if i in positions and has_float(v.type):
                    self.useful.add(v)
                elif v in self.varied and has_float(v.type):
                    raise self.error(op, v)

    def error(self, op: Operation, through: SSAValue) -> DiagnosticError:
        chain = [through]
        while chain[-1] in self.came_from:
            chain.append(self.came_from[chain[-1]])
        names = [self.name(v) for v in reversed(chain)]
        opcode = getattr(op, "OPCODE", op.name)
        here = [self.name(r) for r in op.results]
        label = f" ({here[0]})" if here else ""
        path = " -> ".join(names + here)
        return error_at(op, f"cannot differentiate through '{opcode}'{label} on the path {path}")

    def name(self, v: SSAValue) -> str:
        return value_name(self.fd.origin.get(v, v))

    def run(self, e: Emitter, seed: Adj) -> dict[SSAValue, Adj]:
        self.analyze()
        adj: dict[SSAValue, Adj] = {}
        if self.output in self.varied:
            adj[self.output] = seed
        for op in reversed(self.ops):
            active = [r for r in op.results if r in self.varied and r in self.useful]
            if not active or adj.get(active[0]) is None:
                continue
            d = adj[active[0]]
            want = {i for i, v in enumerate(op.operands) if v in self.varied and v in self.useful}
            e.where = op
            for i, g in self.contributions(e, op, d, want).items():
                if i in want and g is not None:
                    v = op.operands[i]
                    adj[v] = accumulate(e, adj.get(v), g)
        return adj

    def contributions(self, e: Emitter, op: Operation, d: Adj, want: set[int]) -> dict[int, Adj]:
        if isinstance(op, ApplyOp):
            return self.call_rule(e, op, d, want)
        rule = rule_for(op)
        assert rule is not None
        return rule(e, op, d, want)

    def call_rule(self, e: Emitter, op: ApplyOp, d: Adj, want: set[int]) -> dict[int, Adj]:
        """Call the callee's adjoint once per output that has a gradient."""
        seeds = d.items() if isinstance(d, dict) else [(None, d)]
        out: dict[int, Adj] = {}
        for source, seed in seeds:
            if seed is None:
                continue
            if not isinstance(seed, SSAValue):
                raise error_at(
                    op, f"cannot differentiate the call to @{op.callee.data}: nested tuple results"
                )
            grad = self.fd.owner.callee_adjoint(self.fd.adjoint, op, source)
            e.symbols = self.fd.owner.symbols
            ftype = grad.function_type
            result = e.emit(ApplyOp, [*op.args, seed], callee=grad.sym_name, callee_type=ftype)
            args_type = op.callee_type.args
            wrt = [i for i, t in enumerate(args_type) if has_float(t) and is_differentiable(t)]
            for k, i in enumerate(wrt):
                if i in want:
                    out[i] = accumulate(e, out.get(i), e.extract(result, [k]))
        return out


def accumulate(e: Emitter, a: Adj, b: Adj) -> Adj:
    """a + b for tensors; element-wise merge for tuple adjoints."""
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, dict) and isinstance(b, dict):
        merged = dict(a)
        for k, v in b.items():
            merged[k] = accumulate(e, merged.get(k), v)
        return merged
    assert isinstance(a, SSAValue) and isinstance(b, SSAValue)
    return e.add(a, b)


def erase_dead_code(func: FuncOp) -> None:
    """Erase pure ops whose results are unused, until none is left."""
    changed = True
    while changed:
        changed = False
        for block in func.body.blocks:
            for op in reversed(list(block.ops)):
                if op.has_trait(IsTerminator) or not op.has_trait(Pure):
                    continue
                if all(not r.uses for r in op.results):
                    block.erase_op(op)
                    changed = True
