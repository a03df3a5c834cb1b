"""`python -m dlc.passes.graph.superopt --list`: the rule library with proof statuses."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from dlc.passes.graph.superopt.library import RULES_FILE, read
from dlc.passes.graph.superopt.terms import show_shape


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dlc.passes.graph.superopt", description=__doc__)
    ap.add_argument("--list", action="store_true", help="print every rule and its status")
    ap.add_argument("--status", choices=("proven", "unknown", "refuted"), help="only these")
    ap.add_argument("--rules", type=Path, default=RULES_FILE, help="a rules.json to read")
    args = ap.parse_args(argv)
    try:
        rules = read(args.rules)
    except (OSError, ValueError, KeyError) as e:
        print(f"error: cannot read {args.rules}: {e}", file=sys.stderr)
        return 1
    counts: dict[str, int] = {}
    for rule in rules:
        counts[rule.status] = counts.get(rule.status, 0) + 1
        if args.list and args.status in (None, rule.status):
            inputs = ", ".join(
                f"{k}: <{show_shape(v) or 'scalar'}>" for k, v in rule.inputs.items()
            )
            print(f"{rule.name:6} {rule.status:8} {rule.text()}   [{inputs}]")
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    print(f"{len(rules)} rules: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
