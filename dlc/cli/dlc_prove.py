"""`dlc-prove`: prove or refute the rewrite rules of a DLVM rule file.

    dlc-prove rules.dl

A rule is a pair of functions `@NAME_lhs` and `@NAME_rhs` with the same signature; each
is checked against the superoptimizer's axioms (dlc/passes/graph/superopt/user_rules.py)
and printed as `NAME: proven`, `NAME: refuted: INPUTS: lhs ..., rhs ...` (inputs on
which the two sides differ) or `NAME: unknown`. Exit status 0 when every rule is
proven, 1 otherwise (or on an error in the file). Apply proven rules with
`superoptimize{rules="rules.dl"}` or `dlc.compile(..., opt_level=3, rules="rules.dl")`.
Needs z3 (the `superopt` extra: `pip install 'dlc[superopt]'`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn


class ProveError(Exception):
    """A user error of dlc-prove: printed as `dlc-prove: error: ...`, exit 1."""


class _Unproven(Exception):
    """Some rule is not proven: exit 1 after the report (no message)."""


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ProveError(message)


def _argument_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(prog="dlc-prove", description=__doc__.splitlines()[0])
    parser.add_argument("file", help="a .dl file of @NAME_lhs / @NAME_rhs function pairs")
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the random inputs that look for counterexamples",
    )
    return parser


def run(argv: Sequence[str] | None) -> None:
    args = _argument_parser().parse_args(argv)
    try:
        import z3  # noqa: F401 -- the prover's solver
    except ImportError:
        raise ProveError("dlc-prove needs z3: pip install 'dlc[superopt]'") from None
    import dlc
    from dlc.passes.graph.superopt.user_rules import check, read_rules

    try:
        with open(args.file, "rb") as f:
            text = f.read()
    except OSError as e:
        raise ProveError(f"cannot read '{args.file}': {e.strerror or e}") from None
    module = dlc.parse(text, args.file)
    statuses = []
    for rule in read_rules(module, args.file):
        verdict = check(rule, module, args.seed)
        statuses.append(verdict.status)
        detail = f": {verdict.counterexample}" if verdict.counterexample else ""
        print(f"{rule.name}: {verdict.status}{detail}", flush=True)
    if any(s != "proven" for s in statuses):
        raise _Unproven


def main(argv: Sequence[str] | None = None) -> int:
    """Run dlc-prove; the exit code (0 all proven, 1 otherwise or a user error, 2 internal)."""
    from dlc.cli import guarded_main

    return guarded_main("dlc-prove", lambda: run(argv), (ProveError,), quiet=(_Unproven,))


if __name__ == "__main__":
    sys.exit(main())
