"""Run the whole lit suite (test/lit) from pytest, so one `pytest` runs everything."""

import os
import subprocess
import sys
from pathlib import Path

LIT_DIR = Path(__file__).resolve().parents[1] / "lit"


def test_lit_suite_passes() -> None:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    proc = subprocess.run(
        # `python -m lit` does not work with every lit release; lit.main.main does.
        [sys.executable, "-c", "import lit.main; lit.main.main()", "-v", str(LIT_DIR)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    report = proc.stdout[-20000:] + proc.stderr[-5000:]
    assert proc.returncode == 0, f"lit failed (exit {proc.returncode}):\n{report}"
    assert "Passed" in proc.stdout, f"lit ran no tests:\n{report}"
