"""Proofs of substitutions with z3 (the `z3-solver` package, needed only to generate).

Tensors are one uninterpreted sort; every op is an uninterpreted function; each
trusted axiom is a universally quantified equation. A rule `lhs => rhs` is proven when
z3 finds `axioms ∧ lhs_i ≠ rhs_i` unsatisfiable for every output i, its inputs being
fresh constants. The sort carries no shapes, so the axioms (checked numerically on
well-shaped inputs only) are read as laws of well-shaped terms; a candidate reaches the
prover only after it agreed exactly on random integer inputs, and the shipped rules are
re-checked on random floats by the tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dlc.passes.graph.superopt.library import Rule
from dlc.passes.graph.superopt.terms import BINARY, UNARY, Term, subterms


class Prover:
    """z3 with a fixed list of trusted axioms; `prove(rule)` gives a status."""

    def __init__(self, axioms: Sequence[Rule], timeout_ms: int = 2000):
        import z3

        self.z3 = z3
        self.sort = z3.DeclareSort("Tensor")
        self.funcs = {op: z3.Function(op, self.sort, self.sort, self.sort) for op in BINARY}
        self.funcs.update({op: z3.Function(op, self.sort, self.sort) for op in UNARY})
        self.axioms = list(axioms)
        self.timeout_ms = timeout_ms
        self.laws = [self.law(a) for a in self.axioms]

    def term(self, t: Term, env: dict[str, Any]) -> Any:
        """The z3 expression of `t` (inputs from `env`), built bottom-up."""
        built: dict[Term, Any] = dict(env)
        for sub in subterms([t]):
            built[sub] = self.funcs[sub[0]](*(built[a] for a in sub[1:]))
        return built[t]

    def law(self, axiom: Rule) -> Any:
        env = {name: self.z3.Const(f"{axiom.name}.{name}", self.sort) for name in axiom.inputs}
        eq = self.term(axiom.lhs[0], env) == self.term(axiom.rhs[0], env)
        return self.z3.ForAll(list(env.values()), eq)

    def prove(self, rule: Rule) -> str:
        """`proven` when every output pair follows from the axioms, else `unknown`."""
        z3 = self.z3
        env = {name: z3.Const(name, self.sort) for name in sorted(rule.inputs)}
        for lhs, rhs in zip(rule.lhs, rule.rhs):
            solver = z3.Solver()
            solver.set("timeout", self.timeout_ms)
            solver.add(*self.laws)
            solver.add(self.term(lhs, env) != self.term(rhs, env))
            if solver.check() != z3.unsat:
                return "unknown"
        return "proven"
