"""`dlc-tune`: tune a program's contractions and fused groups into a tuning database.

    dlc-tune model.dl --entry f --trials 64 --db tune.jsonl [--random | --compare]
             [--plot out.png] [--cluster local:N | ADDRESS] [--only contractions|groups]
    dlc-tune --evaluate --db tune.jsonl     # the cost model's Spearman rho per workload

Shows a progress bar per nest (trials, best GFLOP/s so far, ETA), then a table of
the gains per nest. Apply the records with `dlc-run --tuning-db tune.jsonl`,
`dlc-opt --tuning-db tune.jsonl` or `dlc.compile(..., tuning_db="tune.jsonl")`.
Needs the `tune` extra: `pip install 'dlc[tune]'`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn


class TuneError(Exception):
    """A user error of dlc-tune: printed as `dlc-tune: error: ...`, exit 1."""


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise TuneError(message)


def _argument_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(prog="dlc-tune", description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("file", nargs="?", help="a .dl file")
    add("--entry", "-e", help="the function to tune (default: the only defined one)")
    add("--trials", type=int, default=64, help="measured candidates per nest (default 64)")
    add("--db", default="tune.jsonl", help="the tuning database to append to (JSON lines)")
    search = parser.add_mutually_exclusive_group()
    search.add_argument("--random", action="store_true", help="random search (the baseline)")
    search.add_argument(
        "--compare", action="store_true", help="run model-guided and random search, each --trials"
    )
    add("--plot", metavar="PNG", help="write a plot of best GFLOP/s against trials")
    add(
        "--cluster",
        help="local:N (N measurements at a time here, no sockets) or the tls:// address "
        "of a Dask scheduler of your own",
    )
    add("--seed", type=int, default=0, help="seed of the inputs and the search (default 0)")
    add("--batch", type=int, default=8, help="candidates per model update (default 8)")
    add("--timeout", type=float, default=60.0, help="seconds per candidate (default 60)")
    add("--budget", type=float, default=0.2, help="seconds of timed calls per candidate (0.2)")
    add(
        "--opt-level",
        "-O",
        type=int,
        choices=range(1, 4),
        default=2,
        help="opt level (3: superopt)",
    )
    add(
        "--only",
        choices=("contractions", "groups"),
        help="tune only the contractions, or only the fused groups and lone element-wise "
        "or reduction nests (default: both)",
    )
    add("--no-progress", action="store_true", help="no progress bar")
    add(
        "--evaluate",
        action="store_true",
        help="tune nothing: print the cost model's transfer and online Spearman rho per "
        "workload of --db (this CPU)",
    )
    return parser


def run(argv: Sequence[str] | None) -> None:
    args = _argument_parser().parse_args(argv)
    if args.trials < 1 or args.batch < 1 or args.timeout <= 0 or args.budget < 0:
        raise TuneError("--trials, --batch and --timeout must be positive, --budget not negative")
    try:
        import lightgbm  # noqa: F401
        import tqdm  # noqa: F401
    except ImportError as err:
        raise TuneError(f"{err.name} is missing: pip install 'dlc[tune]'") from None
    if args.evaluate:
        evaluate_db(args.db)
        return
    if args.file is None:
        raise TuneError("the .dl file to tune is missing")
    from dlc.tuner import tune

    search = "random" if args.random else "both" if args.compare else "model"
    try:
        report = tune(
            args.file,
            entry=args.entry,
            trials=args.trials,
            db=args.db,
            search=search,
            cluster=args.cluster,
            seed=args.seed,
            batch=args.batch,
            opt_level=args.opt_level,
            timeout=args.timeout,
            budget=args.budget,
            progress=not args.no_progress,
            plot=args.plot,
            nests=args.only or "all",
        )
    except ValueError as err:
        raise TuneError(str(err)) from None
    if not report.nests:
        print(f"@{report.entry}: no contraction or group to tune (nothing appended to {args.db})")
        return
    print(report.table())
    print(f"records appended to {args.db}")


def evaluate_db(db: str) -> None:
    """`--evaluate`: the ranking quality of the cost model on the records of `db`."""
    from dlc.target import Target
    from dlc.tuner.evaluate import evaluate, evaluation_table

    rows = evaluate(db, Target.host().cpu)
    if not rows:
        raise TuneError(f"{db}: no workload of this CPU with enough measured records")
    print(evaluation_table(rows))


def main(argv: Sequence[str] | None = None) -> int:
    """Run dlc-tune; return the exit code (0 ok, 1 user error, 2 internal error)."""
    from dlc.cli import guarded_main

    return guarded_main("dlc-tune", lambda: run(argv), (TuneError,))


if __name__ == "__main__":
    sys.exit(main())
