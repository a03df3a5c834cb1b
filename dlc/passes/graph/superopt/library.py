"""The rule library: substitutions with their proof status, stored in `rules.json`.

`tools/gen_substitutions.py` writes the file; the `superoptimize` pass reads it and
applies only rules whose status is `proven`. A rule is a pair of multi-output terms
over the same inputs: output i of `lhs` equals output i of `rhs` for every input of the
declared symbolic shapes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from dlc.files import write_atomically
from dlc.passes.graph.superopt.terms import (
    Shape,
    Term,
    concrete,
    evaluate,
    parse,
    parse_shape,
    random_inputs,
    shapes_of,
    show,
    show_shape,
    size,
    variables,
    windowed,
)

RULES_FILE = Path(__file__).with_name("rules.json")
STATUSES = ("proven", "unknown", "refuted")


@dataclass(frozen=True)
class Rule:
    """`lhs == rhs` (output by output) for all `inputs` of their symbolic shapes."""

    name: str
    inputs: dict[str, Shape]
    lhs: tuple[Term, ...]
    rhs: tuple[Term, ...]
    status: str = "unknown"
    axioms: tuple[str, ...] = field(default=())  # the axioms a proof used, when known

    @property
    def proven(self) -> bool:
        return self.status == "proven"

    def text(self) -> str:
        """`lhs => rhs` with outputs separated by `;`."""
        return f"{'; '.join(map(show, self.lhs))} => {'; '.join(map(show, self.rhs))}"

    def ops(self) -> tuple[int, int]:
        return size(self.lhs), size(self.rhs)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "inputs": {k: show_shape(v) for k, v in sorted(self.inputs.items())},
            "lhs": [show(t) for t in self.lhs],
            "rhs": [show(t) for t in self.rhs],
            "status": self.status,
            "axioms": list(self.axioms),
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Rule:
        status = data.get("status", "unknown")
        if status not in STATUSES:
            raise ValueError(f"rule {data.get('name')}: unknown status {status!r}")
        rule = Rule(
            name=str(data["name"]),
            inputs={k: parse_shape(v) for k, v in data["inputs"].items()},
            lhs=tuple(parse(t) for t in data["lhs"]),
            rhs=tuple(parse(t) for t in data["rhs"]),
            status=status,
            axioms=tuple(data.get("axioms", ())),
        )
        if len(rule.lhs) != len(rule.rhs):
            raise ValueError(f"rule {rule.name}: sides have different numbers of outputs")
        if shapes_of(rule.lhs + rule.rhs, rule.inputs) is None:
            raise ValueError(f"rule {rule.name}: ill-typed for its input shapes")
        return rule


def holds_numerically(rule: Rule, trials: int = 3, seed: int = 0, exact: bool = True) -> bool:
    """Whether both sides agree on random inputs for a few random dimension sizes and,
    when the rule convolves or pools, configurations (integers compared exactly, floats
    within rounding); every second trial makes every input negative."""
    rng = np.random.default_rng(seed)
    names = variables(rule.inputs)
    for trial in range(trials):
        sizes = random_sizes(rule, names, rng)
        values = random_inputs(rule.inputs, sizes, rng, np.int64 if exact else np.float64)
        if trial % 2:  # every value negative: max and relu then keep no positive by chance
            values = {k: -np.abs(v) for k, v in values.items()}
        left = evaluate(rule.lhs, rule.inputs, values, sizes)
        right = evaluate(rule.rhs, rule.inputs, values, sizes)
        for a, b in zip(left, right):
            if a.shape != b.shape:
                return False
            if not (np.array_equal(a, b) if exact else np.allclose(a, b, rtol=1e-9, atol=1e-9)):
                return False
    return True


def random_sizes(rule: Rule, names: Sequence[str], rng: np.random.Generator) -> dict[str, int]:
    """Dimension sizes in 1..5; with a configuration (stride and padding 1..2 and 0..1,
    pooling window 2..3 and stride 1..2) under which every window size is ≥ 1."""
    if not windowed(rule.lhs + rule.rhs):
        return {v: int(rng.integers(1, 6)) for v in names}
    shapes = shapes_of(rule.lhs + rule.rhs, rule.inputs)
    assert shapes is not None
    while True:
        sizes = {v: int(rng.integers(1, 6)) for v in names}
        sizes["@stride"], sizes["@pad"] = int(rng.integers(1, 3)), int(rng.integers(0, 2))
        sizes["@pwin"], sizes["@pstride"] = int(rng.integers(2, 4)), int(rng.integers(1, 3))
        if all(n >= 1 for s in shapes.values() for n in concrete(s, sizes)):
            return sizes


def dump(rules: Sequence[Rule], path: Path, header: dict[str, Any]) -> None:
    data = {**header, "rules": [r.to_json() for r in rules]}
    write_atomically(path, (json.dumps(data, indent=1) + "\n").encode("utf-8"))


def read(path: Path) -> list[Rule]:
    data = json.loads(path.read_text())
    return [Rule.from_json(r) for r in data["rules"]]


@cache
def shipped() -> tuple[Rule, ...]:
    """The rules shipped with dlc (every status)."""
    return tuple(read(RULES_FILE))


def applicable(rules: Sequence[Rule]) -> list[Rule]:
    """The rules the search may apply: proven ones only."""
    return [r for r in rules if r.proven]
