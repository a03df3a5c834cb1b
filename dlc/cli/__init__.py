"""dlc's command-line tools: `dlc-opt` (dlc_opt.py), `dlc-run` (dlc_run.py),
`dlc-compile` (dlc_compile.py) and `dlc-tune` (dlc_tune.py)."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from typing import TextIO


def guarded_main(
    tool: str,
    run: Callable[[], object],
    user_errors: tuple[type[Exception], ...],
    quiet: tuple[type[Exception], ...] = (),
) -> int:
    """Run a tool's `run` with dlc's warnings printed plainly and return its exit code:
    0 ok; 1 for a user error (`user_errors`: "TOOL: error: ...", a `DiagnosticError`:
    its located form, `quiet` ones: nothing); 130 on Ctrl-C; 2 for anything else, as
    one "TOOL: internal error" line, never a traceback."""
    from dlc.diagnostics import DiagnosticError

    plain_warnings()
    try:
        run()
    except user_errors as e:
        print(f"{tool}: error: {e}", file=sys.stderr)
        return 1
    except DiagnosticError as e:
        print(e.format(), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except quiet:
        return 1
    except Exception as e:  # noqa: BLE001 -- the last line of defence against tracebacks
        print(f"{tool}: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    return 0


def plain_warnings() -> None:
    """Print dlc's warnings (tuning reports, located `FILE:LINE:COL: warning: ...`) as
    their message alone on stderr, not Python's `file:line: Category: ...` form."""
    default = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if getattr(category, "__module__", "").startswith("dlc."):
            text = str(message)
            print(text if "warning:" in text else f"warning: {text}", file=file or sys.stderr)
            return
        default(message, category, filename, lineno, file, line)

    warnings.showwarning = show
