"""TASO's cost-based backtracking search over proven substitutions.

Patterns (one direction of a rule) match hash-consed nodes with their symbolic shapes;
a queue of graphs by cost (in 1 % steps, found order within a step) is expanded while
new graphs cost less than `alpha` times the best, until the queue, the time budget or
`max_graphs` runs out. Why the steps: docs/design/superoptimizer.md, "Search".
"""

from __future__ import annotations

import heapq
import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from dlc.passes.graph.superopt.graphs import BlockGraph, Node, Pool
from dlc.passes.graph.superopt.library import Rule
from dlc.passes.graph.superopt.terms import (
    COMMUTATIVE,
    SPLITS,
    WINDOWED,
    Shape,
    Term,
    Window,
    concrete,
    shapes_of,
    show_dim,
    split_point,
    subterms,
)

Binding = dict[Term, int]


@dataclass(frozen=True)
class Pattern:
    """One direction of a proven rule."""

    name: str
    inputs: dict[str, Shape]
    src: tuple[Term, ...]
    dst: tuple[Term, ...]
    shapes: dict[Term, Shape]
    kinds: frozenset[str]


def patterns(rules: Sequence[Rule]) -> list[Pattern]:
    out = []
    for rule in rules:
        for name, src, dst in (
            (rule.name, rule.lhs, rule.rhs),
            (rule.name + "'", rule.rhs, rule.lhs),
        ):
            if any(isinstance(t, str) for t in src) or not binds(src, dst):
                continue
            shapes = shapes_of(src + dst, rule.inputs)
            if shapes is None:
                continue
            kinds = frozenset(t[0] for t in subterms(src))
            out.append(Pattern(name, rule.inputs, src, dst, shapes, kinds))
    return out


def binds(src: tuple[Term, ...], dst: tuple[Term, ...]) -> bool:
    """Whether a match of `src` binds everything `dst` needs: its inputs, and the
    configuration of its convolutions and poolings."""
    src_ops = {t[0] for t in subterms(src)}
    dst_terms = subterms(dst)
    inputs = {a for t in dst_terms for a in t[1:] if isinstance(a, str)}
    inputs |= {t for t in dst if isinstance(t, str)}
    src_inputs = {a for t in subterms(src) for a in t[1:] if isinstance(a, str)}
    return inputs <= src_inputs and all(t[0] in src_ops for t in dst_terms if t[0] in WINDOWED)


def unify(pool: Pool, pairs: list[tuple[Term, int]], b: Binding) -> Iterator[Binding]:
    """Bindings that make every (term, node) pair match (terms are at most a few ops)."""
    if not pairs:
        yield b
        return
    (t, n), rest = pairs[0], pairs[1:]
    if t in b:
        if b[t] == n:
            yield from unify(pool, rest, b)
        return
    if isinstance(t, str):
        yield from unify(pool, rest, {**b, t: n})
        return
    node = pool.nodes[n]
    if node.kind != t[0]:
        return
    orders = [t[1:]]
    if t[0] in COMMUTATIVE and t[1] != t[2]:
        orders.append(t[:0:-1])
    for args in orders:
        yield from unify(pool, [*zip(args, node.args), *rest], {**b, t: n})


def sizes_of(p: Pattern, pool: Pool, b: Binding) -> dict[str, int] | None:
    """The dimension sizes a binding implies, if every matched shape agrees with them;
    window sizes are bound by their text and the one configuration of the matched
    convolutions (poolings) as `@conv` (`@pool`)."""
    sizes: dict[str, int] = {}
    for name, shape in p.inputs.items():
        if not bind(shape, pool.nodes[b[name]].shape, sizes, False):
            return None
    dtypes = {pool.nodes[n].dtype for t, n in b.items() if p.shapes[t] != ()}
    if len(dtypes) > 1:
        return None
    for t, n in b.items():
        node = pool.nodes[n]
        if not bind(p.shapes[t], node.shape, sizes, True):
            return None
        if isinstance(t, str):
            continue
        if t[0] in SPLITS and node.attr != split_point(t[0], p.shapes[t[1]], sizes):
            return None
        key = {"conv": "@conv", "maxpool": "@pool"}.get(t[0])
        if key is not None and sizes.setdefault(key, node.attr) != node.attr:
            return None
    try:
        for t in subterms(p.dst):
            concrete(p.shapes[t], sizes)
    except KeyError:
        return None  # a window size of the target that the match does not determine
    return sizes


def bind(shape: Shape, dims: tuple[int, ...], sizes: dict[str, int], windows: bool) -> bool:
    """Bind `shape`'s variables (and window sizes) to `dims`; False on a conflict."""
    if len(shape) != len(dims):
        return False
    for d, v in zip(shape, dims):
        if isinstance(d, str) and sizes.setdefault(d, v) != v:
            return False
        if windows and isinstance(d, Window) and sizes.setdefault(show_dim(d), v) != v:
            return False
    return all(concrete((d,), sizes) == (v,) for d, v in zip(shape, dims) if windows)


def matches(
    p: Pattern, pool: Pool, by_kind: dict[str, list[int]]
) -> Iterator[tuple[Binding, dict[str, int]]]:
    stack: list[tuple[int, Binding]] = [(0, {})]
    while stack:
        i, b = stack.pop()
        if i == len(p.src):
            sizes = sizes_of(p, pool, b)
            if sizes is not None:
                yield b, sizes
            continue
        found = [
            (i + 1, b2)
            for n in by_kind.get(p.src[i][0], ())
            for b2 in unify(pool, [(p.src[i], n)], b)
            if len({b2[t] for t in p.src[: i + 1]}) == i + 1  # distinct outputs
        ]
        stack.extend(reversed(found))  # depth first, in block order


@dataclass
class View:
    """One graph of the search, indexed for matching and rewriting."""

    roots: tuple[int, ...]
    order: list[int]  # reachable nodes, operands first
    position: dict[int, int]
    users: dict[int, list[int]]
    by_kind: dict[str, list[int]]

    @staticmethod
    def of(pool: Pool, roots: tuple[int, ...]) -> View:
        order = pool.topo(roots)
        users: dict[int, list[int]] = defaultdict(list)
        by_kind: dict[str, list[int]] = defaultdict(list)
        for n in order:
            by_kind[pool.nodes[n].kind].append(n)
            for a in set(pool.nodes[n].args):
                users[a].append(n)
        return View(roots, order, {n: i for i, n in enumerate(order)}, users, by_kind)


def apply(p: Pattern, pool: Pool, view: View, b: Binding, sizes: dict[str, int]) -> tuple[int, ...]:
    """The roots after replacing the matched source outputs by the target's: only the
    users of replaced nodes, transitively, are rebuilt."""
    dtype = pool.nodes[b[p.src[0]]].dtype
    built: dict[Term, int] = {name: b[name] for name in p.inputs if name in b}
    for t in subterms(p.dst):
        attr = split_point(t[0], p.shapes[t[1]], sizes) if t[0] in SPLITS else 0
        attr = sizes["@conv" if t[0] == "conv" else "@pool"] if t[0] in WINDOWED else attr
        shape = concrete(p.shapes[t], sizes)
        built[t] = pool.intern(Node(t[0], tuple(built[a] for a in t[1:]), attr, shape, dtype))
    subst = {b[s]: built[d] for s, d in zip(p.src, p.dst)}
    affected = set(subst)
    stack = list(subst)
    while stack:
        for u in view.users.get(stack.pop(), ()):
            if u not in affected:
                affected.add(u)
                stack.append(u)
    new: dict[int, int] = {}
    for n in sorted(affected, key=view.position.__getitem__):
        if n in subst:
            new[n] = subst[n]
            continue
        node = pool.nodes[n]
        args = tuple(map(new.get, node.args, node.args))  # new.get(a, a) for each operand
        new[n] = n if args == node.args else pool.intern(replace(node, args=args))
    return tuple(new.get(r, r) for r in view.roots)


@dataclass
class Result:
    roots: tuple[int, ...]
    cost_before: float
    cost_after: float
    fired: list[str]  # pattern names along the path to the best graph
    graphs_seen: int


def successors(
    pool: Pool, view: View, pats: Sequence[Pattern], deadline: float
) -> Iterator[tuple[tuple[int, ...], str]]:
    """(roots, pattern name) for every pattern at every match in `view`, until `deadline`."""
    for p in pats:
        if not p.kinds <= view.by_kind.keys():
            continue
        for b, sizes in matches(p, pool, view.by_kind):
            if time.monotonic() >= deadline:
                return
            yield apply(p, pool, view, b, sizes), p.name


class Costs:
    """Graph costs: the sum of node costs, memoized per node; nodes over constants that
    fold-constants folds after the search cost nothing."""

    def __init__(self, pool: Pool, node_cost: Callable[[Node, tuple[tuple[int, ...], ...]], float]):
        self.pool, self.node_cost = pool, node_cost
        self.memo: dict[int, float] = {}

    def __call__(self, roots: tuple[int, ...]) -> float:
        total = 0.0
        for n in self.pool.topo(roots):
            if n not in self.memo:
                node = self.pool.nodes[n]
                shapes = tuple(self.pool.nodes[a].shape for a in node.args)
                self.memo[n] = 0.0 if self.pool.constant[n] else self.node_cost(node, shapes)
            total += self.memo[n]
        return total


STEP = 0.01
"""The queue's cost resolution: graphs whose costs differ by less are expanded in the
order they were found (module docstring)."""


def cost_step(c: float) -> int:
    """The queue rank of cost `c`: its logarithm in steps of `STEP`."""
    return math.floor(math.log(max(c, 1.0)) / math.log1p(STEP))


def search(
    graph: BlockGraph,
    pats: Sequence[Pattern],
    node_cost: Callable[[Node, tuple[tuple[int, ...], ...]], float],
    alpha: float = 1.05,
    budget_s: float = 5.0,
    max_graphs: int = 2000,
) -> Result:
    """The cheapest equivalent graph found (see the module docstring)."""
    pool, cost = graph.pool, Costs(graph.pool, node_cost)
    start, deadline = graph.roots, time.monotonic() + budget_s
    best, best_cost = start, cost(start)
    parent: dict[tuple[int, ...], tuple[tuple[int, ...], str] | None] = {start: None}
    queue = [(cost_step(best_cost), 0, best_cost, start)]
    while queue and time.monotonic() < deadline and len(parent) < max_graphs:
        _, _, c, roots = heapq.heappop(queue)
        if c < best_cost:
            best, best_cost = roots, c
        for new, name in successors(pool, View.of(pool, roots), pats, deadline):
            if new in parent or not graph.valid(new):
                continue
            parent[new] = (roots, name)
            c2 = cost(new)
            if c2 < alpha * best_cost:
                heapq.heappush(queue, (cost_step(c2), len(parent), c2, new))
    fired: list[str] = []
    step = parent[best]
    while step is not None:
        fired.append(step[1])
        step = parent[step[0]]
    return Result(best, cost(start), best_cost, fired[::-1], len(parent))
