"""Run the whole lit suite (test/lit) from pytest, so one `pytest` runs everything.

The suite runs in `SHARDS` shards, one test each (lit's `--num-shards`: shard k runs
the tests k, k + SHARDS, ... of the suite in lexical order, so the shards together
run every test once). Under pytest-xdist each shard is a work unit of its own
(`conftest.py` schedules them first), so the workers share the suite instead of one
of them running it alone at the end; each shard's lit then runs one test at a time.

`DLC_LIT_FORKSERVER=1` makes lit.cfg.py run `dlc-opt` and `filecheck` through a fork
server (test/lit/forkserver.py): each RUN line's tool is a process forked from one that
has imported it, instead of a new interpreter spending most of its time on imports.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

LIT_DIR = Path(__file__).resolve().parents[1] / "lit"
SHARDS = 8


@pytest.mark.parametrize("shard", range(1, SHARDS + 1))
def test_lit_shard_passes(shard: int) -> None:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env["DLC_LIT_FORKSERVER"] = "1"
    # One lit worker per xdist worker (each holds a core); all cores without xdist.
    jobs = ["-j1"] if "PYTEST_XDIST_WORKER" in os.environ else []
    proc = subprocess.run(
        # `python -m lit` does not work with every lit release; lit.main.main does.
        [sys.executable, "-c", "import lit.main; lit.main.main()", "-v", *jobs]
        # The same order in every shard's process (not the last run's timings), and no
        # timings file written by shards running at once.
        + ["--order=lexical", "--skip-test-time-recording"]
        + [f"--num-shards={SHARDS}", f"--run-shard={shard}", str(LIT_DIR)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    report = proc.stdout[-20000:] + proc.stderr[-5000:]
    assert proc.returncode == 0, f"lit shard {shard} failed (exit {proc.returncode}):\n{report}"
    assert "Passed" in proc.stdout, f"lit shard {shard} ran no tests:\n{report}"
