"""The auto-tuner: search schedules of a program's contractions, fused groups and lone
element-wise or reduction nests, measured, guided by a learned cost model, recorded in a tuning database that `dlc.compile(tuning_db=...)`,
`dlc-run --tuning-db` and `dlc-opt --tuning-db` apply.

    report = dlc.tune("model.dl", entry="f", trials=64, db="tune.jsonl")
    print(report.table())

Needs the `tune` extra (lightgbm, tqdm, matplotlib, dask[distributed]). The pieces:
`space.py` (knobs and schedules), `space_groups.py` and `features_groups.py` (the
same for groups), `program.py` (the program and its spaces), `features.py`, `model.py` (LightGBM lambdarank and
simulated annealing), `measure.py` (worker processes), `runner.py` (the loop),
`report.py` (table and plot), `cluster.py` (Dask).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence

from dlc import pipeline
from dlc.passes.tensor.schedule_records import Record, TuningDatabase
from dlc.tuner.program import Program
from dlc.tuner.report import TuneReport
from dlc.tuner.runner import NestResult, Tuner, host_cpu, local_measurer, workdir

__all__ = ["TuneReport", "tune"]


def tune(
    path: str | os.PathLike[str],
    *,
    entry: str | None = None,
    trials: int = 64,
    db: str | os.PathLike[str] = "tune.jsonl",
    search: str = "model",
    cluster: str | None = None,
    seed: int = 0,
    batch: int = 8,
    opt_level: int = 2,
    target_cpu: str = "host",
    timeout: float = 60.0,
    budget: float = 0.2,
    progress: bool = True,
    plot: str | os.PathLike[str] | None = None,
    fault: str = "",
    nests: str = "all",
) -> TuneReport:
    """Tune every contraction, then every fused group and lone element-wise or
    reduction nest of function `entry` of the `.dl` file `path`, with `trials`
    measured candidates each, and append the records to `db`.

    `search`: "model" (the cost model's simulated annealing, ε-greedy), "random", or
    "both" (each with `trials` trials, for comparison). `cluster`: None (worker
    processes here, one at a time), "local:N" (a Dask LocalCluster of N worker
    processes) or a Dask scheduler address. `plot`: write a PNG of the best GFLOP/s
    against trials. `timeout` (s) per candidate, `budget` (s) of timed calls each.
    `nests`: "all", "contractions" or "groups" (groups and lone nests).
    `fault` is a test hook (`measure.py`). Raises ValueError for bad arguments,
    `DiagnosticError` for a program that does not compile."""
    if search not in ("model", "random", "both"):
        raise ValueError(f"search must be 'model', 'random' or 'both', got {search!r}")
    if nests not in ("all", "contractions", "groups"):
        raise ValueError(f"nests must be 'all', 'contractions' or 'groups', got {nests!r}")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValueError(f"trials must be a positive int, got {trials!r}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive int, got {batch!r}")
    filename = os.fspath(path)
    try:
        with open(filename, encoding="utf-8") as f:
            source = f.read()
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(
            f"cannot read '{filename}': {getattr(err, 'strerror', None) or err}"
        ) from None
    try:
        with open(db, "a", encoding="utf-8"):
            pass
    except OSError as err:
        raise ValueError(
            f"cannot write the tuning database '{os.fspath(db)}': {err.strerror or err}"
        ) from None
    options = pipeline.Options(opt_level=max(1, opt_level), target_cpu=target_cpu)
    program = Program.load(source, filename, entry, options)
    searches: Sequence[str] = ("model", "random") if search == "both" else (search,)
    from dlc.tuner.cluster import measurer_for

    directory = workdir()
    try:
        with measurer_for(cluster) as measurer:
            tuner = Tuner(
                program,
                os.fspath(db),
                directory,
                measurer or local_measurer,
                host_cpu(options),
                seed=seed,
                batch=batch,
                budget=budget,
                timeout=timeout,
                fault=fault,
                progress=progress,
            )
            tuner.prepare()
            results = _tune_contractions(tuner, trials, searches) if nests != "groups" else []
            if nests != "contractions":
                results += _tune_groups(tuner, trials, searches)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    report = TuneReport(program.entry, os.fspath(db), results)
    if plot is not None:
        report.plot(os.fspath(plot))
    return report


def _tune_contractions(tuner: Tuner, trials: int, searches: Sequence[str]) -> list[NestResult]:
    spaces = tuner.program.spaces(tuner.target)
    results = [tuner.tune_nest(s, trials, list(searches)) for s in spaces]
    if results:
        tuner.finish(results, spaces)
    return results


def _tune_groups(tuner: Tuner, trials: int, searches: Sequence[str]) -> list[NestResult]:
    """The groups, in the context of the database's best records of other workloads
    (`runner.py`): scheduled with them, their own keys left out."""
    db = TuningDatabase.load(tuner.db_path, warn=False)
    context: list[Record] = [
        r for (_, cpu), r in db.best.items() if cpu == tuner.target.cpu and r.schedule[:1] != "["
    ]
    tuner.use_context(context)
    spaces = tuner.program.group_spaces(tuner.target, tuner.context_db or "")
    keys = {s.info.key for s in spaces}
    tuner.use_context([r for r in context if r.key not in keys])
    results = [tuner.tune_nest(s, trials, list(searches)) for s in spaces]
    if results:
        tuner.finish(results, spaces)  # type: ignore[arg-type]
    return results
