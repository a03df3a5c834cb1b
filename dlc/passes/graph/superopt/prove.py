"""Proofs of substitutions with z3 (the `z3-solver` package, needed only to generate).

Tensors are an uninterpreted sort, ops uninterpreted functions with shape functions;
each axiom holds only for well-typed instances. A rule is proven when z3 finds
`axioms ∧ lhs ≠ rhs` unsatisfiable within a resource limit (solver steps, not time, so
statuses are the same on every host). Details: docs/design/superoptimizer.md, "Proofs".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dlc.passes.graph.superopt.library import Rule
from dlc.passes.graph.superopt.terms import BINARY, UNARY, Dim, Term, Window, show_dim, subterms


class Prover:
    """z3 with a fixed list of trusted axioms; `prove(rule)` gives a status."""

    def __init__(self, axioms: Sequence[Rule], rlimit: int = 5_000_000):
        import z3

        self.z3 = z3
        self.sort = z3.DeclareSort("Tensor")
        self.funcs = {op: z3.Function(op, self.sort, self.sort, self.sort) for op in BINARY}
        self.funcs.update({op: z3.Function(op, self.sort, self.sort) for op in UNARY})
        ints = z3.IntSort()
        self.rank = z3.Function("rank", self.sort, ints)
        self.dims = [z3.Function(f"d{i}", self.sort, ints) for i in range(4)]
        self.rows, self.cols = self.dims[0], self.dims[1]
        self.cut0, self.cut1 = (z3.Function(n, self.sort, ints) for n in ("cut0", "cut1"))
        # a convolution's / a pooling's spatial result size (one configuration per rule)
        self.conv_size = [z3.Function(f"conv{i}", ints, ints, ints) for i in (2, 3)]
        self.pool_size = [z3.Function(f"pool{i}", ints, ints) for i in (2, 3)]
        self.axioms = list(axioms)
        self.rlimit = rlimit
        self.laws = self.shape_laws() + [self.law(a) for a in self.axioms]

    def term(self, t: Term, env: dict[str, Any]) -> tuple[Any, list[Any]]:
        """The z3 expression of `t` (inputs from `env`) and its well-typedness conditions."""
        built = dict[Term, Any](env.items())
        guards: list[Any] = []
        for sub in subterms([t]):
            args = [built[a] for a in sub[1:]]
            built[sub] = self.funcs[sub[0]](*args)
            guards += self.typed(sub[0], args)
        return built[t], guards

    def same(self, x: Any, y: Any, skip: int = -1) -> list[Any]:
        """x and y have the same rank and dimensions (but dimension `skip`)."""
        out = [self.rank(x) == self.rank(y)]
        return out + [d(x) == d(y) for i, d in enumerate(self.dims) if i != skip]

    def typed(self, op: str, args: list[Any]) -> list[Any]:
        """When `op` on `args` is well-typed (terms.infer, in z3)."""
        r, c, rank = self.rows, self.cols, self.rank
        if op in ("ewadd", "ewmul"):
            return self.same(args[0], args[1])
        if op == "smul":
            return [rank(args[1]) == 0]
        if op == "matmul":
            return [rank(args[0]) == 2, rank(args[1]) == 2, c(args[0]) == r(args[1])]
        if op == "transpose":
            return [rank(args[0]) == 2]
        if op in ("concat0", "concat1"):
            return self.same(args[0], args[1], skip=int(op[6]))
        if op == "conv":
            return [rank(args[0]) == 4, rank(args[1]) == 4, c(args[0]) == c(args[1])]
        if op == "maxpool":
            return [rank(args[0]) == 4]
        if op.startswith("split"):
            (t,) = args
            cut, size = (self.cut0, r) if op[5] == "0" else (self.cut1, c)
            return [cut(t) >= 1, cut(t) < size(t)]
        return []

    def shape_laws(self) -> list[Any]:
        """rank, dimensions and cuts of every op's result (true of every well-typed term;
        for ill-typed ones they only define the shape of a value that does not exist)."""
        z3, T = self.z3, self.sort
        x, y = z3.Const("sx", T), z3.Const("sy", T)
        f = self.funcs
        laws = []
        for op in (*BINARY, *UNARY):
            t, bound = (f[op](x, y), [x, y]) if op in BINARY else (f[op](x), [x])
            if op.startswith(("concat", "split")):
                want = self.joined_shape(op, x, y)
            else:
                want = self.result_shape(op, x, y)
            body = z3.And(*(a == b for a, b in zip(self.shape(t), want) if b is not None))
            # the op's term is the only trigger: no law fires on a bare `cut0(x)`
            laws.append(z3.ForAll(bound, body, patterns=[t]))
        return laws

    def shape(self, t: Any) -> list[Any]:
        """[rank, d0..d3, cut0, cut1] of t."""
        return [self.rank(t), *(d(t) for d in self.dims), self.cut0(t), self.cut1(t)]

    def result_shape(self, op: str, x: Any, y: Any) -> list[Any]:
        """`shape` of `op`'s result from its operands' (ops that join or cut nothing)."""
        d, k0, k1 = self.dims, self.cut0, self.cut1
        if op == "matmul":
            return [2, d[0](x), d[1](y), d[2](x), d[3](x), k0(x), k1(y)]
        if op == "transpose":
            return [2, d[1](x), d[0](x), d[2](x), d[3](x), k1(x), k0(x)]
        if op == "conv":
            h, w = (size(d[i](x), d[i](y)) for i, size in zip((2, 3), self.conv_size))
            return [4, d[0](x), d[0](y), h, w, k0(x), k0(y)]
        if op == "maxpool":
            h, w = (size(d[i](x)) for i, size in zip((2, 3), self.pool_size))
            return [4, d[0](x), d[1](x), h, w, k0(x), k1(x)]
        return self.shape(x)  # element-wise

    def joined_shape(self, op: str, x: Any, y: Any) -> list[Any | None]:
        """`shape` of a concatenation's or a split's result."""
        axis = int(op[-1] if op.startswith("concat") else op[5])
        cut = (self.cut0, self.cut1)[axis]
        out: list[Any | None] = list(self.shape(x))
        if op.startswith("concat"):
            out[1 + axis] = self.dims[axis](x) + self.dims[axis](y)
            out[5 + axis] = self.dims[axis](x)
        else:  # a split's part records no cut along its axis
            out[1 + axis] = cut(x) if op.endswith("a") else self.dims[axis](x) - cut(x)
            out[5 + axis] = None
        return out

    def law(self, axiom: Rule) -> Any:
        z3 = self.z3
        env = {name: z3.Const(f"{axiom.name}.{name}", self.sort) for name in axiom.inputs}
        (lhs, lguards), (rhs, rguards) = self.term(axiom.lhs[0], env), self.term(axiom.rhs[0], env)
        triggers = [t for t in (lhs, rhs) if not z3.is_const(t)]
        body = z3.Implies(z3.And(*lguards, *rguards), lhs == rhs)
        return z3.ForAll(list(env.values()), body, patterns=triggers)

    def dim(self, d: Dim, sizes: dict[str, Any]) -> Any:
        if isinstance(d, Window):  # never in a rule's input shapes
            raise ValueError(f"an input shape cannot hold the window size {show_dim(d)}")
        if isinstance(d, str):
            if d not in sizes:
                sizes[d] = self.z3.Int(f"dim.{d}")
            return sizes[d]
        return self.dim(d[0], sizes) + self.dim(d[1], sizes)

    def facts(self, rule: Rule, env: dict[str, Any]) -> list[Any]:
        """The inputs' shapes: dimension variables ≥ 1; rank, dimensions (1 beyond the
        rank) and cuts of each input."""
        sizes: dict[str, Any] = {}
        out: list[Any] = []
        for name, shape in rule.inputs.items():
            x = env[name]
            out.append(self.rank(x) == len(shape))
            for i, size in enumerate(self.dims):
                out.append(size(x) == (self.dim(shape[i], sizes) if i < len(shape) else 1))
            for cut, d in zip((self.cut0, self.cut1), shape):
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
