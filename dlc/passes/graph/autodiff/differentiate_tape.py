"""Tapes for the `differentiate` pass: every call's forward value is computed once.

Differentiating `apply @g(…)` needs g's result in the forward part and g's adjoint in the
reverse sweep. If g's adjoint recomputed the forward values of its own calls, a recursion
over a tree would be quadratic in its depth (each level recomputing all levels below).
So a call to a callee with a *tape* runs `@g_fwd`, g's augmented primal: g's body
returning `(result, tape)`, where the tape `$g_tape` is an enum with one case per
control-flow path of g (`?path0`, `?path1`, …) holding, in path order, the result (and
the callee's tape, if it has one) of every *recorded* call on that path. g's adjoint
`@g_grad(args…, tape, seed)` branches on the tape to the path that the forward run took,
replays that path's own ops (its recorded calls read their results from the tape
instead of running again; differentiate_replay.py) and sweeps it in reverse. Each call
thus runs once forward and once in reverse: the gradient costs time linear in the
number of calls. The tape of a recursive function is a recursive enum (heap boxes,
reference counted like any enum value), released when the adjoint is done with it.

A call is recorded when it has a float result and its callee has a body, is no
declaration, has a differentiable float argument, no loop and at most
MAX_BLOCK_COPIES block copies; a callee has a tape when it makes a recorded call (one
that calls nothing replays its own ops in its adjoint, as cheaply as reading them).
Each decision is made once per callee, so `@g_fwd` and every adjoint of g agree on the
layout of `$g_tape`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeGuard

from xdsl.dialects.builtin import ModuleOp, StringAttr, UnitAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue

from dlc.diagnostics import copy_loc
from dlc.dialects.graph import EnumOp, FuncOp, LiteralOp, ReturnOp
from dlc.dialects.graph_literal import LiteralAttr
from dlc.dialects.graph_memory import ApplyOp
from dlc.dialects.graph_types import FunctionType, NominalType, TupleType
from dlc.dialects.graph_verify import is_differentiable
from dlc.passes.graph.autodiff.adjoint_emitter import Emitter
from dlc.passes.graph.autodiff.differentiate_paths import (
    Path,
    PathUnfolder,
    Trail,
    fresh_symbol,
    loop_edge,
    trails,
)
from dlc.passes.graph.autodiff.differentiate_sweep import has_float

if TYPE_CHECKING:
    from dlc.passes.graph.autodiff.differentiator import Differentiator

TAPE_MARK = "dlc.tape"
"""Marks the functions that take or make tapes (augmented primals, taped adjoints): they
serve the adjoints that call them and are no entry points (no C signature)."""
Recorded = dict[Operation, tuple[SSAValue, SSAValue | None]]
"""A recorded call (still in place) -> its result and its callee's tape (None when the
callee has none), computed elsewhere."""
Layout = list[tuple[Trail, list[ApplyOp]]]
"""Per tape case: the primal path and its recorded calls, in order."""


@dataclass
class Tape:
    """A taped callee: its augmented primal and its tape type."""

    fwd: str
    tape: NominalType


class Tapes:
    """The taped callees of one module, their `@g_fwd`s and `$g_tape`s (made on demand)."""

    def __init__(self, owner: Differentiator):
        self.owner = owner
        self.decided: dict[str, Tape | None] = {}
        self.kept: dict[str, bool] = {}
        self.layouts: dict[str, Layout] = {}
        self.pending: list[str] = []

    def recorded(self, op: Operation) -> TypeGuard[ApplyOp]:
        """Whether a tape keeps the result of `op`: a call, with a float result, of a
        function that the pass could differentiate (see the module docstring)."""
        if not isinstance(op, ApplyOp) or not any(has_float(r.type) for r in op.results):
            return False
        callee = op.callee.data
        if callee not in self.kept:
            target = self.owner.functions().get(callee)
            self.kept[callee] = target is not None and self.recordable(target)
        return self.kept[callee]

    def of_call(self, op: Operation) -> Tape | None:
        """The tape of the callee of `op` when the call is recorded and the callee has
        a tape, else None."""
        return self.of(op.callee.data) if self.recorded(op) else None

    def of(self, callee: str) -> Tape | None:
        """The callee's tape: made for callees that record calls (a callee without
        recorded calls replays its own path in its adjoint, as cheaply as a tape)."""
        if callee in self.decided:
            return self.decided[callee]
        funcs = self.owner.functions()
        target = funcs.get(callee)
        tape = None
        if target is not None and any(
            self.recorded(op) for b in target.body.blocks for op in b.ops
        ):
            fwd = fresh_symbol(f"{callee}_fwd", funcs)
            taken = set(funcs) | set(self.owner.symbols.enums) | set(self.owner.symbols.structs)
            name, k = f"{callee}_tape", 1
            while name in taken:
                name, k = f"{callee}_tape{k}", k + 1
            tape = Tape(fwd, NominalType(name, "enum"))
            ftype = target.function_type
            out = TupleType([ftype.output, tape.tape])
            decl = FuncOp(fwd, FunctionType(list(ftype.args), out))
            decl.attributes[TAPE_MARK] = UnitAttr()
            copy_loc(target, decl)
            self.owner.module.body.block.insert_op_after(decl, target)
            self.owner.refresh()
            self.pending.append(callee)
        self.decided[callee] = tape
        return tape

    def recordable(self, f: FuncOp) -> bool:
        t = f.function_type
        if f.decl is not None or not f.body.blocks or not has_float(t.output):
            return False
        if not any(has_float(a) and is_differentiable(a) for a in t.args):
            return False
        return loop_edge(f) is None and trails(f) is not None

    def layout(self, callee: str) -> Layout:
        """The cases of `$callee_tape` (computed once per callee)."""
        if callee not in self.layouts:
            primal = self.owner.functions()[callee]
            paths = trails(primal)
            assert paths is not None
            self.layouts[callee] = [
                (trail, [op for b, _ in trail for op in b.ops if self.recorded(op)])
                for trail in paths
            ]
        return self.layouts[callee]

    def payload(self, calls: list[ApplyOp]) -> list[Attribute]:
        types: list[Attribute] = []
        for call in calls:
            tape = self.of_call(call)
            types += [call.results[0].type, *([tape.tape] if tape is not None else [])]
        return types

    # -- augmented primals -------------------------------------------------------------

    def build_pending(self) -> None:
        """Define the `@g_fwd`s (and declare the `$g_tape`s) asked for so far."""
        while self.pending:
            self.build(self.pending.pop(0))

    def build(self, callee: str) -> None:
        tape = self.decided[callee]
        assert tape is not None
        funcs = self.owner.functions()
        primal, fwd = funcs[callee], funcs[tape.fwd]
        layout = self.layout(callee)
        cases = [(f"path{k}", self.payload(calls)) for k, (_, calls) in enumerate(layout)]
        enum = EnumOp(tape.tape.ident, cases)
        copy_loc(primal, enum)
        self.owner.module.body.block.insert_op_before(enum, fwd)
        self.owner.refresh()
        unfolder = PathUnfolder(primal, fwd, seedable=False)
        leaves = unfolder.unfold()
        recorded = self.record_calls(leaves)
        index = {trail: k for k, (trail, _) in enumerate(layout)}
        for leaf, path in leaves:
            ret = leaf.last_op
            assert isinstance(ret, ReturnOp) and ret.value is not None
            k = index[unfolder.trails[leaf]]
            payload = [v for op in path if op in recorded for v in recorded[op] if v is not None]
            assert len(payload) == len(cases[k][1])
            e = Emitter(leaf, ret, ret, self.owner.symbols)
            elements = tuple(("operand", i) for i in range(len(payload)))
            made = LiteralOp(LiteralAttr(("enum", f"path{k}", elements)), tape.tape, payload)
            pair = (ret.value, e.insert(made).results[0])
            tree = ("tuple", (("operand", 0), ("operand", 1)))
            out = e.insert(LiteralOp(LiteralAttr(tree), fwd.function_type.output, pair))
            ret.operands = [out.results[0]]
        replace_calls(recorded)

    def record_calls(self, leaves: list[tuple[Block, Path]]) -> Recorded:
        """Before each call on the paths whose callee has a tape, call its `@g_fwd`
        instead; the calls stay (for the reverse sweep) until `replace_calls`. Other
        recorded calls are recorded as they are."""
        recorded: Recorded = {}
        for _, path in leaves:
            for op in path:
                if op in recorded or not self.recorded(op):
                    continue
                tape = self.of_call(op)
                if tape is None:
                    recorded[op] = (op.results[0], None)
                    continue
                block = op.parent_block()
                assert isinstance(op, ApplyOp) and block is not None
                ftype = self.owner.symbols.functions[tape.fwd]
                e = Emitter(block, op, op, self.owner.symbols)
                pair = e.emit(
                    ApplyOp, list(op.args), callee=StringAttr(tape.fwd), callee_type=ftype
                )
                recorded[op] = (e.extract(pair, [0]), e.extract(pair, [1]))
        return recorded


def replace_calls(recorded: Recorded) -> None:
    """Each recorded call's uses read its recorded result; the call goes."""
    for op, (value, _) in recorded.items():
        result = op.results[0]
        if value is result:
            continue
        if value._name is None:
            value._name = result._name
        result.replace_all_uses_with(value)
        block = op.parent_block()
        assert block is not None
        block.erase_op(op)


def entry_points(module: ModuleOp) -> dict[str, FuncOp]:
    """The defined functions of a differentiated module, by name, but those that take or
    make tapes (internal to the adjoints that call them)."""
    return {
        f.sym_name.data: f
        for f in module.body.block.ops
        if isinstance(f, FuncOp)
        and f.decl is None
        and f.body.blocks
        and TAPE_MARK not in f.attributes
    }
