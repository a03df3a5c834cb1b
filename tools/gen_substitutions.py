"""Generate dlc's graph substitutions (TASO's generator and verifier) into rules.json.

    python tools/gen_substitutions.py                 # regenerate the shipped file
    python tools/gen_substitutions.py --ops 2 -o x.json  # a reduced configuration

Stages, each timed and counted in the file's header and on stdout:

1. per family (tools/substitution_enumeration.py: matrices; NCHW images with OIHW
   kernels, convolutions and max pooling), enumerate every graph of up to `--ops` ops
   and fingerprint it on random int64 inputs (exact); graphs with equal fingerprints
   over the same inputs are candidate pairs, each paired with the smallest graph of
   its class;
2. prune: renamings of same-shaped inputs, pairs that share a subgraph over inputs
   (an instance of a smaller rule), pairs with a side that is a bare input in the
   wrong direction;
3. re-check each candidate on random integers for other dimension sizes (and
   configurations), then prove it with z3 from the axioms that survived their own
   random check (dlc.passes.graph.superopt.axioms), each guarded by the shapes under
   which it holds (dlc.passes.graph.superopt.prove), on `--jobs` processes; every
   proof is bounded by z3's step count, so the statuses do not depend on the number
   of processes or the machine's load;
4. in order, drop the candidates a single step of a smaller proven rule (of any
   family) already performs, and those an earlier family states already (the same
   rule up to names); every other candidate is written with its status (the `superoptimize`
   pass applies only `proven` ones).

Candidates whose sides have at most two ops each come first (every family's, then
every family's larger ones), so a reduced configuration (`--ops 2`) writes the first
rules of the full file, byte for byte. Needs `z3-solver` (in the test extra). The
output is deterministic for a given configuration (fixed seeds, sorted order).
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import re
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from substitution_enumeration import (  # noqa: E402
    FAMILIES,
    Enumerator,
    Family,
    candidates,
    leaves,
)

from dlc.passes.graph.superopt.axioms import AXIOMS, checked_axioms  # noqa: E402
from dlc.passes.graph.superopt.graphs import Leaf, Node, Pool  # noqa: E402
from dlc.passes.graph.superopt.library import RULES_FILE, Rule, dump, holds_numerically  # noqa: E402
from dlc.passes.graph.superopt.prove import Prover  # noqa: E402
from dlc.passes.graph.superopt.search import Pattern, View, apply, matches, patterns  # noqa: E402
from dlc.passes.graph.superopt.terms import (  # noqa: E402
    SPLITS,
    Shape,
    Term,
    concrete,
    shapes_of,
    show,
    size,
    split_point,
    subterms,
)

Pair = tuple[tuple[Term, ...], tuple[Term, ...]]
SMALL = 2  # ops per side of the candidates verified first


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
    """The smallest `plain_text` of the rule over renamings of same-shaped inputs."""
    return min(
        plain_text([rename(t, m) for t in lhs], [rename(t, m) for t in rhs], pool) for m in maps
    )


def plain_text(lhs: Sequence[Term], rhs: Sequence[Term], pool: dict[str, Shape]) -> str:
    """The rule's text (its output pairs sorted) with inputs, then dimension variables,
    renamed in order of first appearance: equal for the same rule stated by two
    families."""
    pairs = sorted(zip(lhs, rhs, strict=True), key=lambda p: (show(p[0]), show(p[1])))
    words = re.findall(r"[A-Za-z_]\w*", " ".join(show(t) for p in pairs for t in p))
    names = list(dict.fromkeys(w for w in words if w in pool))
    fresh = {n: f"i{k}" for k, n in enumerate(names)}
    dims: dict[str, str] = {}
    shapes = [" ".join(dims.setdefault(str(d), f"d{len(dims)}") for d in pool[n]) for n in names]
    renamed = [(show(rename(a, fresh)), show(rename(b, fresh))) for a, b in pairs]
    return repr((renamed, shapes))


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

    def __init__(self, pool_shapes: dict[str, Shape], sizes: dict[str, int], kept: list[Pattern]):
        self.pool = Pool()
        self.inputs = pool_shapes
        self.sizes = sizes
        self.leaf: dict[str, int] = {}
        for name, shape in sorted(pool_shapes.items()):
            self.pool.leaves.append(Leaf(None, -1))  # type: ignore[arg-type]
            node = Node("leaf", (), len(self.pool.leaves) - 1, concrete(shape, sizes), "f32")
            self.leaf[name] = self.pool.intern(node)
        self.patterns = kept  # shared by every family: one list of the kept rules

    def roots(self, terms: Sequence[Term]) -> tuple[int, ...]:
        shapes = shapes_of(terms, self.inputs)
        assert shapes is not None
        ids: dict[Term, int] = dict(self.leaf)
        for t in subterms(terms):
            # the one configuration of convolutions and poolings is attr 0
            cut = split_point(t[0], shapes[t[1]], self.sizes) if t[0] in SPLITS else 0
            dims = concrete(shapes[t], self.sizes)
            node = Node(t[0], tuple(ids[a] for a in t[1:]), cut, dims, "f32")
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


PROVER: Prover | None = None  # one per worker process


def start_worker(axioms: list[str], rlimit: int) -> None:
    global PROVER
    PROVER = Prover([Rule.from_json(json.loads(a)) for a in axioms], rlimit)


def prove_text(rule: str) -> str:
    assert PROVER is not None
    return PROVER.prove(Rule.from_json(json.loads(rule)))


def prove_all(rules: list[Rule], axioms: list[Rule], rlimit: int, jobs: int) -> list[str]:
    """Each rule's proof status, on `jobs` processes (rules and axioms travel as JSON)."""
    texts = [json.dumps(r.to_json()) for r in rules]
    args = ([json.dumps(a.to_json()) for a in axioms], rlimit)
    if jobs <= 1:
        start_worker(*args)
        return [prove_text(t) for t in texts]
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(
        jobs, mp_context=context, initializer=start_worker, initargs=args
    ) as ex:
        return list(ex.map(prove_text, texts))


def generate(
    max_ops: int,
    rlimit: int,
    log: bool = True,
    families: Sequence[Family] = FAMILIES,
    jobs: int = 2,
) -> tuple[list[Rule], dict]:
    """The rules of one configuration and the header (counts and seconds per stage)."""
    stats: dict = {"config": {"ops": max_ops, "rlimit": rlimit}}
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    trusted, rejected = checked_axioms(AXIOMS)
    stats["axioms"] = {"trusted": len(trusted), "rejected": [r.name for r in rejected]}
    seconds["axioms"] = round(time.perf_counter() - t, 2)
    work: list[tuple[str, Enumerator, list[Pair]]] = []
    later: list[tuple[str, Enumerator, list[Pair]]] = []
    for family in families:
        en, kept, counts = enumerate_family(family, max_ops)
        stats["config"][family.name] = {"pool": family.pool, "sizes": family.sizes}
        stats[family.name] = counts
        small = [p for p in kept if max(size(p[0]), size(p[1])) <= SMALL]
        work.append((family.name, en, small))
        later.append((family.name, en, [p for p in kept if p not in small]))
    rules = verify(work + later, trusted, rlimit, jobs, stats, seconds)
    stats["seconds"] = seconds
    if log:
        for family in families:
            print(
                f"{family.name}: " + ", ".join(f"{k}: {v}" for k, v in stats[family.name].items())
            )
        print(f"seconds: {seconds}")
    return rules, stats


def enumerate_family(family: Family, max_ops: int) -> tuple[Enumerator, list[Pair], dict]:
    """A family's candidates after pruning, and its counts (with seconds per stage)."""
    t = time.perf_counter()
    en = Enumerator(family, max_ops)
    count, pairs = candidates(en)
    middle = time.perf_counter()
    kept = prune(en, pairs)
    counts = {
        "ops": en.max_ops,
        "enumerated": count,
        "candidates": len(pairs),
        "distinct, sharing no subgraph": len(kept),
        "implied by a smaller rule": 0,
        "after pruning": 0,
        "proven": 0,
        "unknown": 0,
        "refuted": 0,
        "seconds": {
            "enumerate+fingerprint": round(middle - t, 2),
            "prune": round(time.perf_counter() - middle, 2),
        },
    }
    return en, kept, counts


def verify(
    work: list[tuple[str, Enumerator, list[Pair]]],
    axioms: list[Rule],
    rlimit: int,
    jobs: int,
    stats: dict,
    seconds: dict[str, float],
) -> list[Rule]:
    """Every candidate's status, then, in order, the rules that no single step of a
    smaller proven rule implies and no earlier family states (counted into `stats`)."""
    t = time.perf_counter()
    drafts = [[make_rule(en, 0, lhs, rhs) for lhs, rhs in pairs] for _, en, pairs in work]
    holds = [[holds_numerically(r, trials=4, seed=7) for r in rs] for rs in drafts]
    seconds["numeric check"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    todo = [r for rs, hs in zip(drafts, holds) for r, h in zip(rs, hs) if h]
    proofs = iter(prove_all(todo, axioms, rlimit, jobs))
    statuses = [[next(proofs) if h else "refuted" for h in hs] for hs in holds]
    seconds[f"prove ({jobs} processes)"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    implied: dict[str, Implied] = {}
    kept: list[Pattern] = []
    out: list[Rule] = []
    written: dict[str, str] = {}  # canonical text -> family, of the rules kept so far
    for (name, en, pairs), states in zip(work, statuses):
        check = implied.setdefault(name, Implied(en.pool, en.sizes, kept))
        counts = stats[name]
        for (lhs, rhs), status in zip(pairs, states):  # smallest first
            key = plain_text(lhs, rhs, en.pool)
            if check(lhs, rhs) or written.get(key, name) != name:
                # one step of a smaller rule, or another family's rule restated
                counts["implied by a smaller rule"] += 1
                continue
            written[key] = name
            rule = Rule(f"r{len(out)}", make_rule(en, 0, lhs, rhs).inputs, lhs, rhs, status)
            if rule.proven:
                check.keep(rule)
            out.append(rule)
            counts["after pruning"] += 1
            counts[status] += 1
    seconds["implied"] = round(time.perf_counter() - t, 2)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", type=int, default=3, help="ops per graph (default 3)")
    ap.add_argument("--rlimit", type=int, default=5_000_000, help="z3 resource limit per output")
    ap.add_argument("--jobs", type=int, default=2, help="prover processes (default 2)")
    ap.add_argument("-o", "--output", type=Path, default=RULES_FILE)
    args = ap.parse_args(argv)
    rules, stats = generate(args.ops, args.rlimit, jobs=args.jobs)
    dump(rules, args.output, {"generator": "tools/gen_substitutions.py", **stats})
    print(f"wrote {len(rules)} rules to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
