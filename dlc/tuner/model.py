"""The learned cost model and the searches it guides (AutoTVM's loop).

`CostModel` is a LightGBM ranker (`objective="lambdarank"`) over the features of
`dlc.tuner.features`, trained on measured records grouped by workload: within a
workload, a record's relevance is `round(30 * best / seconds)` (30 for the fastest,
0 for a failed candidate). A ranking objective fits what the search needs (which
candidate is faster, not by how much) and lets records of workloads of very different
sizes train one model, so a model trained on earlier workloads warm-starts a new one
(transfer).

`propose_model` runs simulated annealing on the model's scores (chains of one-knob
moves, a temperature falling from 1 to 0, the best unvisited points kept) and mixes
in random points with probability `epsilon` (ε-greedy exploration); `propose_random`
is the random-search baseline.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

import numpy as np

from dlc.tuner.space import Point, Space

RELEVANCE_LEVELS = 30


class CostModel:
    """A lambdarank gradient-boosted tree model over loop-nest features."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.booster: object | None = None

    @property
    def trained(self) -> bool:
        return self.booster is not None

    def fit(self, groups: dict[str, list[tuple[list[float], float | None]]]) -> bool:
        """Train on (features, seconds or None for a failure) per workload key; False
        (and untrained) while there is too little to rank."""
        import lightgbm

        rows: list[list[float]] = []
        labels: list[int] = []
        sizes: list[int] = []
        for measured in groups.values():
            times = [s for _, s in measured if s]
            if len(measured) < 2 or not times:
                continue
            best = min(times)
            for feats, seconds in measured:
                rows.append(feats)
                labels.append(round(RELEVANCE_LEVELS * best / seconds) if seconds else 0)
            sizes.append(len(measured))
        if len(rows) < 8 or len(set(labels)) < 2:
            return False
        params = {
            "objective": "lambdarank",
            "learning_rate": 0.1,
            "num_leaves": 15,
            "min_data_in_leaf": 2,
            "min_data_in_bin": 1,
            "seed": self.seed,
            "deterministic": True,
            "num_threads": 1,
            "verbose": -1,
        }
        data = lightgbm.Dataset(np.asarray(rows), np.asarray(labels), group=sizes, params=params)
        model = lightgbm.train(params, data, num_boost_round=100)
        self.booster = model
        return True

    def predict(self, rows: Sequence[list[float]]) -> np.ndarray:
        """Scores (higher: predicted faster)."""
        assert self.booster is not None
        return np.asarray(self.booster.predict(np.asarray(rows)))  # type: ignore[attr-defined]


def propose_random(
    space: Space, count: int, visited: set[Point], rng: random.Random, tries: int = 2000
) -> list[Point]:
    """Up to `count` unvisited valid points, uniformly at random."""
    out: list[Point] = []
    for _ in range(tries):
        if len(out) >= count:
            break
        point = space.random_point(rng)
        if point not in visited and point not in out and space.schedule(point) is not None:
            out.append(point)
    return out


def propose_model(
    space: Space,
    score: Callable[[list[Point]], np.ndarray],
    count: int,
    visited: set[Point],
    rng: random.Random,
    epsilon: float = 0.1,
    chains: int = 24,
    steps: int = 60,
    starts: Sequence[Point] = (),
) -> list[Point]:
    """`count` points: the best unvisited ones simulated annealing finds on `score`,
    each replaced by a random point with probability `epsilon`. Chains start at
    `starts` (the fastest points measured so far, as AutoTVM's do), then at random
    points."""
    current = list(starts[: chains // 2])
    current += propose_random(space, chains - len(current), set(current), rng)
    if not current:
        return []
    values = score(current)
    best: dict[Point, float] = {}
    for step in range(steps):
        temperature = 1.0 - step / steps
        moved = [_valid_neighbour(space, p, rng) for p in current]
        new_values = score(moved)
        for n, (p, v) in enumerate(zip(moved, new_values, strict=True)):
            if p not in visited:
                best[p] = float(v)
            delta = float(v - values[n])
            if delta > 0 or rng.random() < math.exp(delta / max(temperature, 1e-3)):
                current[n], values[n] = p, v
    ranked = [p for p, _ in sorted(best.items(), key=lambda item: -item[1])]
    out: list[Point] = []
    explore = propose_random(space, count, visited, rng)
    for p in ranked:
        if len(out) >= count:
            break
        if rng.random() < epsilon and explore:
            p = explore.pop()
        if p not in out and p not in visited:
            out.append(p)
    out += [p for p in explore if p not in out][: count - len(out)]
    return out


def _valid_neighbour(space: Space, point: Point, rng: random.Random) -> Point:
    for _ in range(10):
        moved = space.neighbour(point, rng)
        if space.schedule(moved) is not None:
            return moved
    return point


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties)."""

    def ranks(v: Sequence[float] | np.ndarray) -> np.ndarray:
        arr = np.asarray(v, dtype=np.float64)
        order = arr.argsort()
        r = np.empty(len(arr))
        r[order] = np.arange(len(arr))
        for value in np.unique(arr):
            same = arr == value
            r[same] = r[same].mean()
        return r

    rx, ry = ranks(x), ranks(y)
    if len(rx) < 2 or rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])
