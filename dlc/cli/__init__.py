"""dlc's command-line tools: `dlc-opt` (dlc_opt.py), `dlc-run` (dlc_run.py) and
`dlc-tune` (dlc_tune.py)."""

from __future__ import annotations

import sys
import warnings


def plain_warnings() -> None:
    """Print dlc's warnings (tuning reports, located `FILE:LINE:COL: warning: ...`) as
    their message alone on stderr, not Python's `file:line: Category: ...` form."""
    default = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001, ANN202
        if getattr(category, "__module__", "").startswith("dlc."):
            text = str(message)
            print(text if "warning:" in text else f"warning: {text}", file=file or sys.stderr)
            return
        default(message, category, filename, lineno, file, line)

    warnings.showwarning = show
