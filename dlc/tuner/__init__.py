"""The auto-tuner: search schedules of a program's contractions, measured, guided by a
learned cost model, recorded in a tuning database that `dlc.compile(tuning_db=...)`,
`dlc-run --tuning-db` and `dlc-opt --tuning-db` apply.

    report = dlc.tune("model.dl", entry="f", trials=64, db="tune.jsonl")
    print(report.table())

Needs the `tune` extra (lightgbm, tqdm, matplotlib, dask[distributed]). The pieces:
`space.py` (knobs and schedules), `features.py`, `model.py` (LightGBM lambdarank and
simulated annealing), `measure.py` (worker processes), `runner.py` (the loop),
`report.py` (table and plot), `cluster.py` (Dask).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence

from dlc import pipeline
from dlc.tuner.report import TuneReport
from dlc.tuner.runner import Program, Tuner, host_cpu, local_measurer, workdir

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
) -> TuneReport:
    """Tune every contraction of function `entry` of the `.dl` file `path` with
    `trials` measured candidates each and append the records to `db`.

    `search`: "model" (the cost model's simulated annealing, ε-greedy), "random", or
    "both" (each with `trials` trials, for comparison). `cluster`: None (worker
    processes here, one at a time), "local:N" (a Dask LocalCluster of N worker
    processes) or a Dask scheduler address. `plot`: write a PNG of the best GFLOP/s
    against trials. `timeout` (s) per candidate, `budget` (s) of timed calls each.
    `fault` is a test hook (`measure.py`). Raises ValueError for bad arguments,
    `DiagnosticError` for a program that does not compile."""
    if search not in ("model", "random", "both"):
        raise ValueError(f"search must be 'model', 'random' or 'both', got {search!r}")
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
            spaces = program.spaces(tuner.target)
            nests = [tuner.tune_nest(s, trials, list(searches)) for s in spaces]
            if nests:
                tuner.finish(nests, spaces)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    report = TuneReport(program.entry, os.fspath(db), nests)
    if plot is not None:
        report.plot(os.fspath(plot))
    return report
