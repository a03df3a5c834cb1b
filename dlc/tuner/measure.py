"""Measuring one candidate in a worker process that may crash, hang or be wrong.

`measure(job)` runs `python -m dlc.tuner.measure` with a timeout: compile with the
candidate's one-record database, check the outputs against the default schedule's
(`RTOL`), time the fastest of `MIN_CALLS`+ calls; a crash, timeout, compile error or wrong
result is a `failed:` status. `DLC_TUNE_FAULT` injects faults in tests. See docs/design/tuner.md.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

MIN_CALLS = 5
RTOL = {"float16": 1e-2, "float32": 1e-3, "float64": 1e-9}


@dataclass(frozen=True)
class Job:
    """One candidate to measure (paths must be visible to the worker)."""

    source: str  # the program text
    filename: str
    entry: str
    db: str | None  # a tuning database with the candidate's record (None: default)
    schedule: str  # the candidate's schedule text (for DLC_TUNE_FAULT), "" for default
    seed: int
    reference: str | None  # .npz of the default schedule's outputs
    opt_level: int = 2
    target_cpu: str = "host"
    budget: float = 0.2
    timeout: float = 60.0
    fault: str = ""  # DLC_TUNE_FAULT for this worker (tests)


@dataclass(frozen=True)
class Result:
    status: str  # "ok" or "failed: why"
    seconds: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def measure(job: Job) -> Result:
    """Measure `job` in a fresh worker process (module docstring); never raises for
    what the candidate does."""
    env = dict(os.environ, DLC_CACHE="0", PYTHONWARNINGS="ignore")
    env.pop("DLC_TUNE_FAULT", None)
    if job.fault:
        env["DLC_TUNE_FAULT"] = job.fault
    try:
        done = subprocess.run(
            [sys.executable, "-m", "dlc.tuner.measure"],
            input=json.dumps(asdict(job)),
            capture_output=True,
            text=True,
            timeout=job.timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return Result(f"failed: timeout after {job.timeout:g} s")
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name
        return Result(f"failed: crashed ({name})")
    lines = done.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else {}
        return Result(str(answer["status"]), answer.get("seconds"))
    except (ValueError, KeyError, TypeError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return Result(f"failed: worker exited with {done.returncode}: {tail[:200]}")


def random_inputs(func: Any, seed: int) -> list[np.ndarray]:
    """Standard normal floats (integers in [-10, 10]) for each parameter of `func`."""
    from dlc.dialects.graph_types import TensorType
    from dlc.dtypes import random_values

    types = func.function_type.args
    if not all(isinstance(t, TensorType) for t in types):
        raise ValueError(f"@{func.sym_name.data}: dlc-tune passes tensors and scalars only")
    return random_values(((t.dt, t.dims) for t in types), seed)


def outputs(result: Any) -> list[np.ndarray]:
    items = result if isinstance(result, tuple | list) else [result]
    return [np.asarray(x) for x in items]


def mismatch(got: list[np.ndarray], want: list[np.ndarray]) -> str | None:
    """Why `got` is not `want` within the stated tolerance, or None."""
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for n, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.shape != w.shape:
            return f"output {n} has shape {g.shape}, expected {w.shape}"
        if w.dtype.kind != "f":
            if not np.array_equal(g, w):
                return f"output {n} differs"
            continue
        tol = RTOL.get(str(w.dtype), 1e-3) * (float(np.max(np.abs(w), initial=0.0)) + 1.0)
        err = float(np.max(np.abs(g.astype(np.float64) - w), initial=0.0))
        if not err <= tol:  # NaN is wrong too
            return f"wrong result: output {n} differs by {err:.3g} (tolerance {tol:.3g})"
    return None


def _fault(job: Job) -> str:
    spec = os.environ.get("DLC_TUNE_FAULT", "")
    kind, _, text = spec.partition(":")
    return kind if kind and job.schedule and text in job.schedule else ""


def _compiled(module: Any, job: Job) -> tuple[Any, str]:
    """The job's program compiled with its candidate, and the warning that the candidate
    does not fit (the compile then fell back to the default schedule, which measuring
    would time in the candidate's name), or ''."""
    import warnings

    from dlc.api import compile_graph_module

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = compile_graph_module(
            module, opt_level=job.opt_level, target_cpu=job.target_cpu, tuning_db=job.db
        )
    misfits = [str(w.message) for w in caught if "the record does not fit" in str(w.message)]
    return compiled, misfits[0] if misfits else ""


def run_job(job: Job) -> dict[str, Any]:
    """The worker's side: compile, check, time (module docstring)."""
    import ctypes

    from dlc.parser import parse_module
    from dlc.program_levels import defined_functions

    module = parse_module(job.source, job.filename)
    compiled, misfit = _compiled(module, job)
    if misfit:
        return {"status": f"failed: {misfit[:300]}"}
    func = defined_functions(module)[job.entry]
    inputs = random_inputs(func, job.seed)
    fn = compiled[job.entry]
    fault = _fault(job)
    if fault == "crash":
        ctypes.string_at(0)  # a segmentation fault, as a broken kernel would cause
    if fault == "hang":
        time.sleep(3600)
    got = outputs(fn(*inputs))
    if fault == "wrong":
        got = [g + 1 for g in got]
    if job.reference is not None:
        with np.load(job.reference, allow_pickle=False) as ref:
            want = [ref[f"out{n}"] for n in range(len(ref.files))]
        why = mismatch(got, want)
        if why is not None:
            return {"status": f"failed: {why}"}
    times: list[float] = []
    end = time.perf_counter() + job.budget
    while len(times) < MIN_CALLS or time.perf_counter() < end:
        start = time.perf_counter()
        fn(*inputs)
        times.append(time.perf_counter() - start)
    return {"status": "ok", "seconds": min(times)}


def main() -> None:
    job = Job(**json.loads(sys.stdin.read()))
    try:
        answer = run_job(job)
    except Exception as err:  # a compile error of the candidate: reported, not raised
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        answer = {"status": f"failed: {type(err).__name__}: {first[:300]}"}
    print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
