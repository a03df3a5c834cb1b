"""`dlc.tune`: tune the contractions, fused groups and lone element-wise or reduction
nests of one function and append the records to a tuning database.

Per nest: measure the default, then propose batches (the cost model's simulated annealing
or random search), drop what the lowering rejects, measure the rest in workers, append
every record and retrain; groups are tuned in the context of the tuned contractions.
Details: docs/design/tuner.md.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from dlc import pipeline
from dlc.api import compile_graph_module
from dlc.diagnostics import TrapError
from dlc.passes.tensor.schedule_records import (
    DEFAULT_SCHEDULE,
    Record,
    TuningDatabase,
    append_record,
)
from dlc.program_levels import defined_functions
from dlc.target import Target
from dlc.tuner.features import training_features
from dlc.tuner.measure import Job, Result, measure, outputs, random_inputs
from dlc.tuner.model import CostModel, propose_model, propose_random, spearman
from dlc.tuner.program import Program
from dlc.tuner.space import Point, Space

Measurer = Callable[[list[Job]], list[Result]]


@dataclass
class Trial:
    schedule: str
    seconds: float | None
    status: str


@dataclass
class NestResult:
    """One nest's tuning run: the default time, every trial in order (per search)."""

    summary: str
    key: str
    flops: int
    default_seconds: float
    trials: dict[str, list[Trial]] = field(default_factory=dict)  # "model" / "random"
    spearman: float | None = None  # the warm-started model's ranking of this run

    def best(self, search: str | None = None) -> Trial | None:
        runs = [self.trials[search]] if search else list(self.trials.values())
        ok = [t for run in runs for t in run if t.seconds is not None]
        return min(ok, key=lambda t: t.seconds or 0.0, default=None)

    def curve(self, search: str) -> list[float]:
        """Best GFLOP/s so far after each trial (0 before the first success)."""
        out, best = [], 0.0
        for t in self.trials.get(search, []):
            if t.seconds:
                best = max(best, self.flops / t.seconds / 1e9)
            out.append(best)
        return out

    def trials_to(self, search: str, fraction: float = 0.95) -> int | None:
        """Trials `search` needed to reach `fraction` of the best GFLOP/s found."""
        overall = self.best()
        if overall is None or overall.seconds is None:
            return None
        goal = fraction * self.flops / overall.seconds / 1e9
        return next((n + 1 for n, g in enumerate(self.curve(search)) if g >= goal), None)


def local_measurer(jobs: list[Job]) -> list[Result]:
    """One worker process per job, one after the other (timings do not compete)."""
    return [measure(job) for job in jobs]


@dataclass
class Tuner:
    """The state of one `dlc.tune` run (module docstring)."""

    program: Program
    db_path: str
    workdir: Path
    measurer: Measurer
    target: Target
    seed: int = 0
    batch: int = 8
    epsilon: float = 0.1
    budget: float = 0.2
    timeout: float = 60.0
    fault: str = ""
    progress: bool = True
    reference: str = ""
    model: CostModel = field(default_factory=CostModel)
    default_times: list[float] = field(default_factory=list)
    context: list[Record] = field(default_factory=list)  # in every candidate's database
    context_db: str | None = None  # the default's database (None: no records)

    def use_context(self, records: list[Record]) -> None:
        """Measure from now on with `records` in every database (module docstring);
        the default is another program then: its times start again."""
        self.context, self.default_times = list(records), []
        self.context_db = None
        if records:
            self.context_db = str(self.workdir / f"context-{time.monotonic_ns()}.jsonl")
            for r in records:
                append_record(self.context_db, r)

    def prepare(self) -> None:
        """The default schedule's outputs on the run's inputs, as the reference."""
        compiled = compile_graph_module(
            self.program.graph,
            opt_level=self.program.options.opt_level,
            target_cpu=self.program.options.target_cpu,
        )
        func = defined_functions(self.program.graph)[self.program.entry]
        try:
            got = outputs(compiled[self.program.entry](*random_inputs(func, self.seed)))
        except (TrapError, IndexError) as err:
            raise ValueError(f"@{self.program.entry} fails on random inputs: {err}") from None
        self.reference = str(self.workdir / "reference.npz")
        arrays: dict[str, Any] = {f"out{n}": g for n, g in enumerate(got)}
        np.savez(self.reference, **arrays)

    def job(self, db: str | None, schedule: str) -> Job:
        p = self.program
        return Job(
            p.source,
            p.filename,
            p.entry,
            db,
            schedule,
            self.seed,
            self.reference,
            p.options.opt_level,
            p.options.target_cpu,
            self.budget,
            self.timeout,
            self.fault,
        )

    def record(self, space: Space, schedule: str, result: Result, search: str) -> Record:
        feats = space.features(space.parse(schedule)) if schedule else []
        return Record(
            key=space.info.key,
            target=self.target.cpu,
            schedule=schedule,
            seconds=result.seconds if result.ok else None,
            status=result.status,
            nest=space.info.summary,
            time=time.time(),
            search=search,
            features=feats,
        )

    def groups(
        self, length: int, exclude: str | None = None
    ) -> dict[str, list[tuple[list[float], float | None]]]:
        """Training data: this target's records with `length` features (one kind of
        space), per workload key."""
        db = TuningDatabase.load(self.db_path, warn=False)
        out: dict[str, list[tuple[list[float], float | None]]] = {}
        for r in db.all_records:
            feats = training_features(r)
            if r.target == self.target.cpu and feats and len(feats) == length and r.key != exclude:
                out.setdefault(r.key, []).append((feats, r.seconds if r.ok else None))
        return out

    def measure_default(self) -> float:
        """Time the default schedule once more; the fastest of all its measurements so
        far (every nest of the run shares it: the same program without records)."""
        result = self.measurer([self.job(self.context_db, "")])[0]
        if not result.ok or result.seconds is None:
            raise ValueError(f"the default schedule fails in a worker: {result.status}")
        self.default_times.append(result.seconds)
        return min(self.default_times)

    def finish(self, results: list[NestResult], spaces: list[Space]) -> None:
        """After the last nest: the default once more, every nest's default time the
        fastest of the run, and a `default` record per nest (the default competes too:
        where no candidate beats it, compiles keep the policy)."""
        fastest = self.measure_default()
        for result, space in zip(results, spaces, strict=True):
            result.default_seconds = fastest
            record = self.record(space, "", Result("ok", fastest), "default")
            append_record(self.db_path, replace(record, schedule=DEFAULT_SCHEDULE))

    def tune_nest(self, space: Space, trials: int, searches: list[str]) -> NestResult:
        default = self.measure_default()
        result = NestResult(space.info.summary, space.info.key, space.info.flops, default)
        for search in searches:
            result.trials[search] = self.search(space, trials, search)
        measured = [
            (space.features(space.parse(t.schedule)), t.seconds)
            for run in result.trials.values()
            for t in run
            if t.seconds
        ]
        transfer = CostModel(self.seed)
        training = self.groups(space.feature_count, exclude=space.info.key)
        if len(measured) >= 3 and transfer.fit(training):
            scores = transfer.predict([f for f, _ in measured])
            result.spearman = spearman(scores, [-s for _, s in measured])
        return result

    def search(self, space: Space, trials: int, search: str) -> list[Trial]:
        rng = random.Random(self.seed)
        self.model = CostModel(self.seed)
        length = space.feature_count
        self.model.fit(self.groups(length))  # transfer: warm start from the database
        visited: set[Point] = set()
        fastest: list[tuple[float, Point]] = []  # measured points, fastest first
        done: list[Trial] = []
        bar = _progress(trials, f"{space.info.summary} [{search}]", self.progress)
        while len(done) < trials:
            count = min(self.batch, trials - len(done))
            if search == "model" and self.model.trained:
                points = propose_model(
                    space,
                    self._scorer(space),
                    count,
                    visited,
                    rng,
                    self.epsilon,
                    starts=[p for _, p in fastest],
                )
            else:
                points = propose_random(space, count, visited, rng)
            if not points:
                break  # the space is exhausted
            visited.update(points)
            measured = self.measure_points(space, points, search)
            done += measured
            fastest += [(t.seconds, p) for t, p in zip(measured, points) if t.seconds]
            fastest.sort()
            self.model.fit(self.groups(length))
            best = max((space.info.flops / t.seconds / 1e9 for t in done if t.seconds), default=0.0)
            bar.update(len(done) - bar.n)
            bar.set_postfix_str(f"best {best:.1f} GFLOP/s")
        bar.close()
        return done

    def measure_points(self, space: Space, points: list[Point], search: str) -> list[Trial]:
        jobs: list[tuple[str, Job | Result]] = []
        for n, point in enumerate(points):
            text = str(space.schedule(point))
            db = str(self.workdir / f"candidate-{time.monotonic_ns()}-{n}.jsonl")
            for r in self.context:
                append_record(db, r)
            append_record(db, self.record(space, text, Result("ok", 1.0), search))
            why = self.program.validate(db)
            jobs.append((text, Result(f"failed: invalid: {why}") if why else self.job(db, text)))
        pending = [j for _, j in jobs if isinstance(j, Job)]
        # the default once per batch as well: the best of many candidates is a lucky
        # measurement, and the default deserves as many chances on a noisy machine
        answered = self.measurer([*pending, self.job(self.context_db, "")])
        default = answered.pop()
        if default.ok and default.seconds is not None:
            self.default_times.append(default.seconds)
        answers = iter(answered)
        out: list[Trial] = []
        for text, job in jobs:
            result = next(answers) if isinstance(job, Job) else job
            if isinstance(job, Job) and job.db is not None:
                Path(job.db).unlink(missing_ok=True)
            append_record(self.db_path, self.record(space, text, result, search))
            out.append(Trial(text, result.seconds if result.ok else None, result.status))
        return out

    def _scorer(self, space: Space) -> Callable[[list[Point]], np.ndarray]:
        def score(points: list[Point]) -> np.ndarray:
            rows = [space.features(space.schedule(p)) for p in points]
            return self.model.predict(rows)

        return score


class _Bar(Protocol):
    """What the tuner uses of a progress bar (tqdm's, or `_NoBar`)."""

    n: int

    def update(self, k: int) -> None: ...

    def set_postfix_str(self, text: str) -> None: ...

    def close(self) -> None: ...


class _NoBar:
    n = 0

    def update(self, k: int) -> None:
        self.n += k

    def set_postfix_str(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, desc: str, enabled: bool) -> _Bar:
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="trial")


def workdir() -> Path:
    """A private directory for candidates and the reference (mode 0700)."""
    return Path(tempfile.mkdtemp(prefix="dlc-tune-"))


def host_cpu(options: pipeline.Options) -> Target:
    return Target.from_cpu(options.target_cpu)


__all__ = ["NestResult", "Program", "Tuner", "host_cpu", "local_measurer", "workdir"]
