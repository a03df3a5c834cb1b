"""Generate dlc's graph substitutions (TASO's generator and verifier) into rules.json.

    python tools/gen_substitutions.py                 # regenerate the shipped file
    python tools/gen_substitutions.py --ops 2 -o x.json  # a reduced configuration

Stages, each timed and counted in the file's header and on stdout:

1. enumerate every graph of up to `--ops` ops (a split counts as one op with two
   outputs, as in TASO) over a fixed pool of symbolic inputs, in a canonical order
   (commutative operands sorted, independent ops in increasing order, no duplicate op);
2. fingerprint each graph by evaluating its outputs on random int64 inputs (exact);
   graphs with equal fingerprints over the same inputs are candidate pairs, each
   paired with the smallest graph of its class;
3. prune: renamings of same-shaped inputs, pairs that share a subgraph over inputs
   (an instance of a smaller rule), pairs with a side that is a bare input in the
   wrong direction, pairs a single step of a smaller kept rule already performs;
4. re-check each candidate on random integers for other dimension sizes, then prove
   it with z3 from the axioms that survived their own random check
   (dlc.passes.graph.superopt.axioms), each guarded by the shapes under which it holds
   (dlc.passes.graph.superopt.prove). Every candidate is written with its status;
   the `superoptimize` pass applies only `proven` ones.

Needs `z3-solver` (in the test extra). The output is deterministic for a given
configuration (fixed seeds, sorted order).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dlc.passes.graph.superopt.axioms import AXIOMS, checked_axioms  # noqa: E402
from dlc.passes.graph.superopt.graphs import Leaf, Node, Pool  # noqa: E402
from dlc.passes.graph.superopt.library import RULES_FILE, Rule, dump, holds_numerically  # noqa: E402
from dlc.passes.graph.superopt.prove import Prover  # noqa: E402
from dlc.passes.graph.superopt.search import Pattern, View, apply, matches, patterns  # noqa: E402
from dlc.passes.graph.superopt.terms import (  # noqa: E402
    BINARY,
    COMMUTATIVE,
    SPLITS,
    Shape,
    Term,
    apply_op,
    concrete,
    infer,
    parse_shape,
    random_inputs,
    shapes_of,
    show,
    size,
    split_point,
    subterms,
)

POOL = {"x0": "a b", "x1": "a b", "w0": "b c", "w1": "b d", "s": ""}
SIZES = {"a": 2, "b": 3, "c": 4, "d": 5}
OPS = (
    "ewadd",
    "ewmul",
    "smul",
    "matmul",
    "concat0",
    "concat1",
    "transpose",
    "relu",
    "split0",
    "split1",
)
MAX_OUTPUTS = 2


class Enumerator:
    """Canonical graphs over the pool, with values memoized per term."""

    def __init__(self, pool: dict[str, Shape], max_ops: int, seed: int = 1):
        self.pool = pool
        self.max_ops = max_ops
        self.shapes: dict[Term, Shape] = dict(pool)
        rng = np.random.default_rng(seed)
        self.values: dict[Term, np.ndarray] = dict(random_inputs(pool, SIZES, rng))

    def shape(self, op: str, args: Sequence[Term]) -> Shape | None:
        return infer(op, [self.shapes[a] for a in args])

    def node(self, op: str, args: tuple[Term, ...]) -> Term | None:
        """The term `(op, *args)` if well-typed (shape and value memoized)."""
        term = (op, *args)
        if term in self.shapes:
            return term
        s = self.shape(op, args)
        if s is None:
            return None
        cut = split_point(op, self.shapes[args[0]], SIZES) if op.startswith("split") else 0
        self.shapes[term] = s
        self.values[term] = apply_op(op, [self.values[a] for a in args], cut)
        return term

    def steps(self, values: list[Term]) -> Iterator[tuple[Term, ...]]:
        """Every op on existing values: a tuple of the new nodes (two for a split)."""
        for op in OPS:
            if op.startswith("split"):
                for v in values:
                    a, b = self.node(op + "a", (v,)), self.node(op + "b", (v,))
                    if a is not None and b is not None:
                        yield (a, b)
                continue
            arity = 2 if op in BINARY else 1
            for args in itertools.product(values, repeat=arity):
                if op in COMMUTATIVE and show(args[0]) > show(args[1]):
                    continue
                t = self.node(op, tuple(args))
                if t is not None:
                    yield (t,)

    def graphs(self) -> Iterator[tuple[Term, ...]]:
        """Outputs of every canonical graph (0 ops: each input alone), maybe repeated."""
        for name in self.pool:
            yield (name,)
        stack: list[tuple[tuple[Term, ...], ...]] = [()]
        while stack:
            done = stack.pop()
            if len(done) >= self.max_ops:
                continue
            nodes = tuple(n for step in done for n in step)
            for new in self.steps([*self.pool, *nodes]):
                if any(t in nodes for t in new) or (done and not in_order(done[-1], new)):
                    continue
                stack.append((*done, new))
                outs = outputs((*nodes, *new))
                if len(outs) == 1 or (len(outs) <= MAX_OUTPUTS and self.distinct(outs)):
                    yield outs

    def distinct(self, outs: tuple[Term, ...]) -> bool:
        """No output of a multi-output graph is an input's value or another output's (such
        graphs only restate smaller single-output rules)."""
        seen = [self.values[n].tobytes() for n in self.pool]
        for t in outs:
            v = self.values[t].tobytes()
            if v in seen:
                return False
            seen.append(v)
        return True

    def fingerprint(self, outs: tuple[Term, ...]) -> tuple:
        used = frozenset(a for t in outs for a in ([t] if isinstance(t, str) else leaves(t)))
        keyed = sorted((str(self.shapes[t]), hash(self.values[t].tobytes())) for t in outs)
        return (used, tuple(keyed))


def in_order(prev: tuple[Term, ...], new: tuple[Term, ...]) -> bool:
    """An op that reads nothing of the previous op comes after it in text order (every
    graph has such a topological order: the smallest-first one)."""
    if any(p in n[1:] for p in prev for n in new):
        return True
    return show(new[0]) > show(prev[0])


def leaves(t: Term) -> set[str]:
    out: set[str] = set()
    for sub in subterms([t]):
        out.update(a for a in sub[1:] if isinstance(a, str))
    return out


def outputs(nodes: tuple[Term, ...]) -> tuple[Term, ...]:
    """The nodes no other node reads (a split's halves stay together, in order)."""
    read = {a for n in nodes for a in n[1:]}
    return tuple(n for n in nodes if n not in read)


def aligned(en: Enumerator, src: tuple[Term, ...], dst: tuple[Term, ...]) -> tuple[Term, ...]:
    """`dst`'s outputs reordered so that output i has the value of `src`'s output i."""
    left = list(dst)
    out: list[Term] = []
    for t in src:
        match = next(
            d
            for d in left
            if en.shapes[d] == en.shapes[t] and np.array_equal(en.values[d], en.values[t])
        )
        left.remove(match)
        out.append(match)
    return tuple(out)


def renamings(pool: dict[str, Shape]) -> list[dict[str, str]]:
    """Every permutation of inputs that keeps shapes."""
    groups: dict[Shape, list[str]] = defaultdict(list)
    for name, shape in sorted(pool.items()):
        groups[shape].append(name)
    maps: list[dict[str, str]] = [{}]
    for names in groups.values():
        maps = [{**m, **dict(zip(names, p))} for m in maps for p in itertools.permutations(names)]
    return maps


def rename(t: Term, m: dict[str, str]) -> Term:
    if isinstance(t, str):
        return m.get(t, t)
    built: dict[Term, Term] = {}
    for sub in subterms([t]):
        built[sub] = (sub[0], *(built.get(a, m.get(a, a)) for a in sub[1:]))  # type: ignore[arg-type]
    return built[t]


def canonical_text(
    lhs: Sequence[Term], rhs: Sequence[Term], pool: dict[str, Shape], maps: list[dict[str, str]]
) -> str:
    """The smallest text of the rule over renamings of same-shaped inputs, with inputs
    then dimension variables renamed in order of first appearance (outputs sorted)."""
    texts = []
    for m in maps:
        pairs = sorted(zip((show(rename(t, m)) for t in lhs), (show(rename(t, m)) for t in rhs)))
        text = repr(pairs)
        names = sorted({n for n in pool if n in text}, key=lambda n: text.index(n))
        fresh = {n: f"i{k}" for k, n in enumerate(names)}
        dims: dict[str, str] = {}
        shapes = []
        for n in names:
            for d in pool[n]:
                dims.setdefault(str(d), "abcdefgh"[len(dims)])
            shapes.append(" ".join(dims[str(d)] for d in pool[n]))
        for n, f in fresh.items():
            text = text.replace(n, f)
        texts.append(text + repr(shapes))
    return min(texts)


def candidates(en: Enumerator) -> tuple[int, list[tuple[tuple[Term, ...], tuple[Term, ...]]]]:
    """(graphs enumerated, pairs (graph, smallest graph of its fingerprint class))."""
    classes: dict[tuple, dict[tuple[Term, ...], None]] = defaultdict(dict)
    count = 0
    for outs in en.graphs():
        count += 1
        classes[en.fingerprint(outs)][outs] = None
    pairs = []
    for members in classes.values():
        ranked = sorted(members, key=lambda g: (size(g), len(g), [show(t) for t in g]))
        best = ranked[0]
        pairs.extend((g, aligned(en, g, best)) for g in ranked[1:])
    return count, pairs


def prune(
    en: Enumerator, pairs: list[tuple[tuple[Term, ...], tuple[Term, ...]]]
) -> list[tuple[tuple[Term, ...], tuple[Term, ...]]]:
    """Drop renamings, pairs sharing a subgraph, and pairs whose sides differ in length."""
    maps = renamings(en.pool)
    seen: set[str] = set()
    kept = []
    # smallest first, so that a configuration's rules do not depend on enumeration order
    pairs = sorted(pairs, key=lambda p: (size(p[0]) + size(p[1]), [show(t) for t in p[0] + p[1]]))
    for lhs, rhs in pairs:
        if len(lhs) != len(rhs) or all(isinstance(t, str) for t in lhs):
            continue
        common = set(subterms(lhs)) & set(subterms(rhs))
        if common:
            continue  # an instance of the smaller rule with the shared part as an input
        key = canonical_text(lhs, rhs, en.pool, maps)
        if key in seen:
            continue
        seen.add(key)
        kept.append((lhs, rhs))
    return kept


class Implied:
    """Whether one step of an already kept rule turns a candidate's lhs into its rhs."""

    def __init__(self, pool_shapes: dict[str, Shape]):
        self.pool = Pool()
        self.inputs = pool_shapes
        self.leaf: dict[str, int] = {}
        for name, shape in sorted(pool_shapes.items()):
            self.pool.leaves.append(Leaf(None, -1))  # type: ignore[arg-type]
            node = Node("leaf", (), len(self.pool.leaves) - 1, concrete(shape, SIZES), "f32")
            self.leaf[name] = self.pool.intern(node)
        self.patterns: list[Pattern] = []

    def roots(self, terms: Sequence[Term]) -> tuple[int, ...]:
        shapes = shapes_of(terms, self.inputs)
        assert shapes is not None
        ids: dict[Term, int] = dict(self.leaf)
        for t in subterms(terms):
            cut = split_point(t[0], shapes[t[1]], SIZES) if t[0] in SPLITS else 0
            node = Node(t[0], tuple(ids[a] for a in t[1:]), cut, concrete(shapes[t], SIZES), "f32")
            ids[t] = self.pool.intern(node)
        return tuple(ids[t] for t in terms)

    def __call__(self, lhs: tuple[Term, ...], rhs: tuple[Term, ...]) -> bool:
        start, goal = self.roots(lhs), self.roots(rhs)
        view = View.of(self.pool, start)
        for p in self.patterns:
            if not p.kinds <= view.by_kind.keys():
                continue
            for b, sizes in matches(p, self.pool, view.by_kind):
                if apply(p, self.pool, view, b, sizes) == goal:
                    return True
        return False

    def keep(self, rule: Rule) -> None:
        self.patterns += patterns([rule])


def make_rule(en: Enumerator, index: int, lhs: tuple[Term, ...], rhs: tuple[Term, ...]) -> Rule:
    used = sorted(set().union(*(leaves(t) if not isinstance(t, str) else {t} for t in lhs)))
    return Rule(f"r{index}", {n: en.pool[n] for n in used}, lhs, rhs)


def verify(
    en: Enumerator, kept: list[tuple[tuple[Term, ...], tuple[Term, ...]]], prover: Prover
) -> tuple[list[Rule], int]:
    """(rules with their status, candidates dropped as implied by a smaller proven rule)."""
    implied = Implied(en.pool)
    out: list[Rule] = []
    dropped = 0
    for lhs, rhs in kept:  # smallest first: a rule is implied only by smaller ones
        if implied(lhs, rhs):
            dropped += 1
            continue
        rule = make_rule(en, len(out), lhs, rhs)
        if not holds_numerically(rule, trials=3, seed=7):
            status = "refuted"
        else:
            status = prover.prove(rule)
        rule = Rule(rule.name, rule.inputs, rule.lhs, rule.rhs, status)
        if rule.proven:
            implied.keep(rule)
        out.append(rule)
    return out, dropped


def generate(max_ops: int, rlimit: int, log: bool = True) -> tuple[list[Rule], dict]:
    """The rules of one configuration and the header (counts and seconds per stage)."""
    stats: dict = {"config": {"ops": max_ops, "pool": POOL, "sizes": SIZES, "rlimit": rlimit}}

    def stage(name: str, start: float) -> float:
        now = time.perf_counter()
        stats.setdefault("seconds", {})[name] = round(now - start, 2)
        return now

    t = time.perf_counter()
    trusted, rejected = checked_axioms(AXIOMS)
    stats["axioms"] = {"trusted": len(trusted), "rejected": [r.name for r in rejected]}
    t = stage("axioms", t)
    en = Enumerator({k: parse_shape(v) for k, v in POOL.items()}, max_ops)
    count, pairs = candidates(en)
    stats["enumerated"], stats["candidates"] = count, len(pairs)
    t = stage("enumerate+fingerprint", t)
    kept = prune(en, pairs)
    stats["distinct, sharing no subgraph"] = len(kept)
    t = stage("prune", t)
    out, dropped = verify(en, kept, Prover(trusted, rlimit))
    stats["implied by a smaller rule"] = dropped
    stats["after pruning"] = len(out)
    stats["proven"] = sum(r.proven for r in out)
    stats["refuted"] = sum(r.status == "refuted" for r in out)
    stage("implied+verify", t)
    if log:
        keys = ("enumerated", "candidates", "distinct, sharing no subgraph")
        keys += ("implied by a smaller rule", "after pruning")
        for key in (*keys, "proven", "refuted", "seconds"):
            print(f"{key}: {stats[key]}")
    return out, stats


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", type=int, default=3, help="ops per graph (default 3)")
    ap.add_argument("--rlimit", type=int, default=5_000_000, help="z3 resource limit per output")
    ap.add_argument("-o", "--output", type=Path, default=RULES_FILE)
    args = ap.parse_args(argv)
    rules, stats = generate(args.ops, args.rlimit)
    dump(rules, args.output, {"generator": "tools/gen_substitutions.py", **stats})
    print(f"wrote {len(rules)} rules to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
