"""Enumeration and fingerprints of tools/gen_substitutions.py (TASO's generator).

A family is a pool of symbolic inputs with sizes for the fingerprints (and, for
convolutions and poolings, one configuration), and the ops to enumerate over: every
graph of up to `max_ops` ops (a split counts as one op with two outputs, as in TASO), in
a canonical order (commutative operands sorted, independent ops in increasing order, no
duplicate op), is evaluated on random int64 inputs (exact); graphs with equal
fingerprints over the same inputs are candidate pairs, each paired with the smallest
graph of its class.
"""

from __future__ import annotations

import itertools
import sys
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dlc.passes.graph.superopt.terms import (  # noqa: E402
    BINARY,
    COMMUTATIVE,
    Shape,
    Term,
    apply_op,
    concrete,
    infer,
    parse_shape,
    random_inputs,
    show,
    size,
    split_point,
    subterms,
)


@dataclass(frozen=True)
class Family:
    """One enumeration: symbolic inputs, their sizes (and configuration), the ops."""

    name: str
    pool: dict[str, str]
    sizes: dict[str, int]
    ops: tuple[str, ...]
    max_ops: int  # at most this many ops, whatever --ops says
    kernels: frozenset[str] = frozenset()  # a `conv` reads images and these kernels


MATRICES = Family(
    "matrices",
    {"x0": "a b", "x1": "a b", "w0": "b c", "w1": "b d", "s": ""},
    {"a": 2, "b": 3, "c": 4, "d": 5},
    (
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
    ),
    3,
)
# NCHW images, OIHW kernels of one window size; one convolution configuration
# (stride 1, padding 1) and one pooling configuration (2×2 windows, stride 1)
IMAGES = Family(
    "images",
    {"x0": "n c h w", "x1": "n c h w", "k0": "o c u v", "k1": "p c u v", "s": ""},
    {"n": 2, "c": 3, "h": 5, "w": 4, "o": 2, "p": 3, "u": 2, "v": 3,
     "@stride": 1, "@pad": 1, "@pwin": 2, "@pstride": 1},
    ("ewadd", "smul", "conv", "maxpool", "concat0", "concat1", "relu", "split0", "split1"),
    3,
    frozenset({"k0", "k1"}),
)  # fmt: skip
# three matrices that chain, (a, b)·(b, c)·(c, d): associativity of products and its
# interplay with transposes, which the matrices family (one inner size per weight)
# cannot state; what rewrites q·kᵀ = (x·wq)·(x·wk)ᵀ into (x·(wq·wkᵀ))·xᵀ, whose inner
# product over constant weights folds at compile time
CHAINS = Family(
    "chains",
    {"x0": "a b", "w0": "b c", "y0": "c d"},
    {"a": 2, "b": 3, "c": 4, "d": 5},
    ("matmul", "transpose"),
    3,
)
FAMILIES = (MATRICES, IMAGES, CHAINS)
MAX_OUTPUTS = 2


class Enumerator:
    """Canonical graphs over the pool, with values memoized per term."""

    def __init__(self, family: Family, max_ops: int, seed: int = 1):
        self.pool: dict[str, Shape] = {k: parse_shape(v) for k, v in family.pool.items()}
        self.sizes = family.sizes
        self.ops = family.ops
        self.max_ops = min(max_ops, family.max_ops)
        self.kernels = family.kernels
        self.shapes: dict[Term, Shape] = dict(self.pool)
        rng = np.random.default_rng(seed)
        self.values: dict[Term, np.ndarray] = dict(random_inputs(self.pool, self.sizes, rng))
        for name, shape in self.pool.items():
            if shape == () and abs(int(self.values[name])) == 1:
                self.values[name] = self.values[name] * 3  # x·s would equal ±x

    def shape(self, op: str, args: Sequence[Term]) -> Shape | None:
        return infer(op, [self.shapes[a] for a in args])

    def node(self, op: str, args: tuple[Term, ...]) -> Term | None:
        """The term `(op, *args)` if well-typed (shape and value memoized)."""
        term = (op, *args)
        if term in self.shapes:
            return term
        if not self.roles_fit(op, args):
            return None
        s = self.shape(op, args)
        if s is None or min(concrete(s, self.sizes), default=1) < 1:
            return None  # ill-typed, or a window larger than its (padded) image
        cut = split_point(op, self.shapes[args[0]], self.sizes) if op.startswith("split") else 0
        self.shapes[term] = s
        self.values[term] = apply_op(op, [self.values[a] for a in args], cut, self.sizes)
        return term

    def roles_fit(self, op: str, args: tuple[Term, ...]) -> bool:
        """A `conv` or `maxpool` reads an image (a value over an input that is not a
        kernel), a `conv`'s kernel reads only kernels and scalars: the same laws over a
        kernel taken for an image are renamings that only cost proving time."""
        if op not in ("conv", "maxpool") or not self.kernels:
            return True
        if not leaves_of(args[0]) - self.kernels:
            return False
        return op == "maxpool" or all(
            a in self.kernels or self.pool[a] == () for a in leaves_of(args[1])
        )

    def steps(self, values: list[Term]) -> Iterator[tuple[Term, ...]]:
        """Every op on existing values: a tuple of the new nodes (two for a split)."""
        for op in self.ops:
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


def leaves_of(t: Term) -> set[str]:
    return {t} if isinstance(t, str) else leaves(t)


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
