"""The reverse sweep of the `differentiate` pass over the ops of one control-flow path.

Activity analysis first: a value is *varied* when it depends on a `wrt` argument and
*useful* when the source output depends on it; only values that are both get adjoints.
A varied value reaching an operand position without a rule (see
`differentiable_operands`) is a located error naming the op and the path from the
argument. Then the ops are visited in reverse, each rule adding its contributions to
the operands' adjoints; calls get their callee's synthesized adjoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.ir import Operation, SSAValue
from xdsl.traits import IsTerminator, Pure

from dlc.diagnostics import DiagnosticError, error_at
from dlc.dialects.graph import FuncOp
from dlc.dialects.graph_memory import ApplyOp
from dlc.dialects.graph_types import TensorType, TupleType, dtype_is_float
from dlc.dialects.graph_verify import is_differentiable, value_name
from dlc.passes.graph.autodiff.adjoint_rules import Adj, Emitter, differentiable_operands, rule_for

if TYPE_CHECKING:
    from dlc.passes.graph.autodiff.differentiator import FunctionDifferentiator

MEMORY_WRITES = ("store", "copy", "push")


def has_float(t: object) -> bool:
    """Whether a value of type t can carry a gradient."""
    if isinstance(t, TupleType):
        return any(has_float(e) for e in t.types)
    return isinstance(t, TensorType) and dtype_is_float(t.dt)


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
            recorded = self.fd.recorded.get(op)
            tape = [recorded[1]] if recorded is not None and recorded[1] is not None else []
            owner = self.fd.owner
            grad = owner.callee_adjoint(self.fd.adjoint, op, source, bool(tape), self.fd.tape_free)
            e.symbols = owner.symbols
            ftype = grad.function_type
            args = [*op.args, *tape, seed]
            result = e.emit(ApplyOp, args, callee=grad.sym_name, callee_type=ftype)
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
