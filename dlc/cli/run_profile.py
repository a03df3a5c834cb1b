"""`dlc-run --profile OUT.json`: time every kernel of the entry function's calls.

The module is compiled with `profile=True` (timing marks around every kernel,
`dlc.runtime.profile`); after the first call (whose outputs dlc-run prints) the
function is called again as `--time` would (at least `CALLS` calls, about
`BUDGET_S` seconds), each call timed from Python too. The table of kernels, slowest
first, goes to stdout with the kernels' share of the measured call time; the Chrome
trace (chrome://tracing, ui.perfetto.dev) goes to OUT.json. A path that cannot be
written is refused before anything is compiled.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from dlc.cli.run_io import RunError

CALLS = 7
BUDGET_S = 0.25
MAX_CALLS = 10_000


def check_profile_path(path: str) -> None:
    """A RunError when `path` cannot be written as the trace (checked up front)."""
    where = f"--profile {path}"
    if not path:
        raise RunError("--profile: expected a file name (OUT.json)")
    if os.path.isdir(path):
        raise RunError(f"{where}: is a directory")
    parent = os.path.dirname(path) or "."
    if not os.path.isdir(parent):
        raise RunError(f"{where}: no directory '{parent}'")
    if not os.access(parent, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise RunError(f"{where}: not writable")


def profile_calls(fn: Callable[..., Any], inputs: Sequence[Any]) -> tuple[float, int]:
    """(seconds in calls, calls): CALLS calls at least, about BUDGET_S seconds."""
    total, calls = 0.0, 0
    end = time.perf_counter() + BUDGET_S
    while calls < CALLS or (time.perf_counter() < end and calls < MAX_CALLS):
        start = time.perf_counter()
        fn(*inputs)
        total += time.perf_counter() - start
        calls += 1
    return total, calls


def report(compiled: Any, fn: Callable[..., Any], inputs: Sequence[Any], path: str) -> None:
    """Time calls of `fn`; print the table and the kernels' share of the call time;
    write the trace."""
    compiled.profile()  # from here on: the timed calls only
    seconds, calls = profile_calls(fn, inputs)
    found = compiled.profile()
    print(found.table())
    share = 100 * found.kernel_ns / 1e9 / seconds if seconds else 0.0
    print(
        f"{calls} calls, {seconds / calls * 1e3:.3f} ms per call measured from Python; "
        f"the kernels account for {share:.1f}% of it"
    )
    try:
        found.save(path)
    except OSError as e:
        raise RunError(f"--profile {path}: cannot write: {e.strerror or e}") from None
    print(f"trace: {path} ({len(found.spans)} events; open it in ui.perfetto.dev)")
