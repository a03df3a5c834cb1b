"""Proofs of substitutions with z3 (the `z3-solver` package, needed only to generate).

Tensors are one uninterpreted sort; every op is an uninterpreted function. Shapes are
tracked by integer functions of a tensor — `rows`, `cols`, and `cut0`/`cut1`, where a
split along 0/1 cuts (TASO records the same from concatenations) — defined for every op
by quantified equations (`rows(matmul(x, y)) = rows(x)`, `cut0(concat0(x, y)) =
rows(x)`, …). Each trusted axiom becomes

    ∀ vars. well-typed(lhs) ∧ well-typed(rhs) → lhs = rhs

so it claims nothing about ill-shaped instances: `ewadd(concat0(x, y), concat0(z, w)) =
concat0(ewadd(x, z), ewadd(y, w))` holds only where x and z (and y and w) have the same
shape, although both sides' concatenations may be well-typed otherwise. A rule is
proven when, for inputs of the rule's symbolic shapes (dimension variables ≥ 1), z3
finds `axioms ∧ lhs_i ≠ rhs_i` unsatisfiable for every output i. Axioms are used only
after passing their own random check (axioms.py); candidates reach the prover only
after agreeing exactly on random integer inputs. Each proof attempt is bounded by
z3's resource limit (`rlimit`, a count of solver steps), not by time, so a rule's
status is the same on every machine and under any load.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dlc.passes.graph.superopt.library import Rule
from dlc.passes.graph.superopt.terms import BINARY, UNARY, Dim, Term, subterms


class Prover:
    """z3 with a fixed list of trusted axioms; `prove(rule)` gives a status."""

    def __init__(self, axioms: Sequence[Rule], rlimit: int = 5_000_000):
        import z3

        self.z3 = z3
        self.sort = z3.DeclareSort("Tensor")
        self.funcs = {op: z3.Function(op, self.sort, self.sort, self.sort) for op in BINARY}
        self.funcs.update({op: z3.Function(op, self.sort, self.sort) for op in UNARY})
        names = ("rows", "cols", "cut0", "cut1")
        self.rows, self.cols, self.cut0, self.cut1 = (
            z3.Function(n, self.sort, z3.IntSort()) for n in names
        )
        self.axioms = list(axioms)
        self.rlimit = rlimit
        self.laws = self.shape_laws() + [self.law(a) for a in self.axioms]

    def term(self, t: Term, env: dict[str, Any]) -> tuple[Any, list[Any]]:
        """The z3 expression of `t` (inputs from `env`) and its well-typedness conditions."""
        built: dict[Term, Any] = dict(env)
        guards: list[Any] = []
        for sub in subterms([t]):
            args = [built[a] for a in sub[1:]]
            built[sub] = self.funcs[sub[0]](*args)
            guards += self.typed(sub[0], args)
        return built[t], guards

    def typed(self, op: str, args: list[Any]) -> list[Any]:
        """When `op` on `args` is well-typed (terms.infer, in z3)."""
        r, c = self.rows, self.cols
        if op in ("ewadd", "ewmul"):
            x, y = args
            return [r(x) == r(y), c(x) == c(y)]
        if op == "matmul":
            return [c(args[0]) == r(args[1])]
        if op == "concat0":
            return [c(args[0]) == c(args[1])]
        if op == "concat1":
            return [r(args[0]) == r(args[1])]
        if op.startswith("split"):
            (t,) = args
            cut, size = (self.cut0, r) if op[5] == "0" else (self.cut1, c)
            return [cut(t) >= 1, cut(t) < size(t)]
        return []

    def shape_laws(self) -> list[Any]:
        """rows, cols and cuts of every op's result (true of every well-typed term; for
        ill-typed ones they only define the shape of a value that does not exist)."""
        z3, T = self.z3, self.sort
        x, y = z3.Const("sx", T), z3.Const("sy", T)
        r, c, k0, k1 = self.rows, self.cols, self.cut0, self.cut1
        f = self.funcs
        same = [(f[op](x, y), x) for op in ("ewadd", "ewmul", "smul")] + [(f["relu"](x), x)]
        laws = []
        for t, like in same:
            laws += [r(t) == r(like), c(t) == c(like), k0(t) == k0(like), k1(t) == k1(like)]
        mm, tr = f["matmul"](x, y), f["transpose"](x)
        laws += [r(mm) == r(x), c(mm) == c(y), k0(mm) == k0(x), k1(mm) == k1(y)]
        laws += [r(tr) == c(x), c(tr) == r(x), k0(tr) == k1(x), k1(tr) == k0(x)]
        c0, c1 = f["concat0"](x, y), f["concat1"](x, y)
        laws += [r(c0) == r(x) + r(y), c(c0) == c(x), k0(c0) == r(x), k1(c0) == k1(x)]
        laws += [r(c1) == r(x), c(c1) == c(x) + c(y), k1(c1) == c(x), k0(c1) == k0(x)]
        s0a, s0b, s1a, s1b = (f[op](x) for op in ("split0a", "split0b", "split1a", "split1b"))
        laws += [r(s0a) == k0(x), c(s0a) == c(x), k1(s0a) == k1(x)]
        laws += [r(s0b) == r(x) - k0(x), c(s0b) == c(x), k1(s0b) == k1(x)]
        laws += [c(s1a) == k1(x), r(s1a) == r(x), k0(s1a) == k0(x)]
        laws += [c(s1b) == c(x) - k1(x), r(s1b) == r(x), k0(s1b) == k0(x)]
        return [z3.ForAll([x, y], law) for law in laws]

    def law(self, axiom: Rule) -> Any:
        z3 = self.z3
        env = {name: z3.Const(f"{axiom.name}.{name}", self.sort) for name in axiom.inputs}
        (lhs, lguards), (rhs, rguards) = self.term(axiom.lhs[0], env), self.term(axiom.rhs[0], env)
        triggers = [t for t in (lhs, rhs) if not z3.is_const(t)]
        body = z3.Implies(z3.And(*lguards, *rguards), lhs == rhs)
        return z3.ForAll(list(env.values()), body, patterns=triggers)

    def dim(self, d: Dim, sizes: dict[str, Any]) -> Any:
        if isinstance(d, str):
            if d not in sizes:
                sizes[d] = self.z3.Int(f"dim.{d}")
            return sizes[d]
        return self.dim(d[0], sizes) + self.dim(d[1], sizes)

    def facts(self, rule: Rule, env: dict[str, Any]) -> list[Any]:
        """The inputs' shapes: dimension variables ≥ 1, rows/cols/cuts of each matrix."""
        sizes: dict[str, Any] = {}
        out: list[Any] = []
        for name, shape in rule.inputs.items():
            if len(shape) != 2:
                continue
            x = env[name]
            out += [self.rows(x) == self.dim(shape[0], sizes)]
            out += [self.cols(x) == self.dim(shape[1], sizes)]
            for cut, d in ((self.cut0, shape[0]), (self.cut1, shape[1])):
                if isinstance(d, tuple):
                    out.append(cut(x) == self.dim(d[0], sizes))
        return out + [v >= 1 for v in sizes.values()]

    def prove(self, rule: Rule) -> str:
        """`proven` when every output pair follows from the axioms, else `unknown`."""
        z3 = self.z3
        env = {name: z3.Const(name, self.sort) for name in sorted(rule.inputs)}
        facts = self.facts(rule, env)
        for lhs, rhs in zip(rule.lhs, rule.rhs):
            solver = z3.Solver()
            solver.set("rlimit", self.rlimit)  # z3's own step count: same on every host
            solver.add(*self.laws, *facts)
            solver.add(self.term(lhs, env)[0] != self.term(rhs, env)[0])
            if solver.check() != z3.unsat:
                return "unknown"
        return "proven"
