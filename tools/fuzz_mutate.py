"""Mutation fuzzer: mangled `.dl` sources through `dlc.parse`, `dlc.compile` and the run.

    python tools/fuzz_mutate.py --seed 0 --count 100000 [--timeout S] [--out DIR]

The corpus is every `.dl` file of the repository (each `// -----` chunk of the lit
tests on its own). Each mutant is one to three byte or token mutations of a corpus
entry (flip, insert, delete or duplicate bytes; delete, duplicate, swap or replace
tokens, numbers made extreme: 0, -1, 2**63, 1e39, nan, huge shapes). A worker process
parses it, compiles it (no externs allowed) and calls every function whose parameters
are tensors on random inputs, with an alarm stopping endless programs.

Allowed outcomes: success, `DiagnosticError`, `TrapError`, `IndexError`, and a program
stopped by the alarm. Anything else is a finding: another exception (with its
traceback), a worker killed by a signal (a crash), or a compile that does not finish
in `--timeout` seconds (a hang). Findings are written to DIR (the mutant, the outcome)
and summarized by class; exit status 1 if there is any.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import signal
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TOKEN = re.compile(r"%[\w.]+|@[\w.]+|'[\w.]+|\$[\w.]+|-?\d+(?:\.\d+)?(?:e-?\d+)?|\w+|\S")
EXTREMES = (
    "0",
    "-1",
    "1",
    "9223372036854775808",
    "-9223372036854775809",
    "1e39",
    "nan",
    "inf",
    "-0.0",
    "65536",
    "4294967296",
    "1000000000",
)
RUN_SECONDS = 2.0
ALLOWED = ("DiagnosticError", "TrapError", "IndexError")


def corpus() -> list[str]:
    """Every `.dl` program of the repository, lit chunks split."""
    texts: list[str] = []
    for path in sorted(ROOT.glob("**/*.dl")):
        if ".venv" in path.parts or "Output" in path.parts:
            continue
        texts.extend(c for c in path.read_text().split("// -----") if c.strip())
    return texts


def mutate(text: str, rng: np.random.Generator, pool: list[str]) -> str:
    """One to three random byte or token mutations of `text`."""
    for _ in range(int(rng.integers(1, 4))):
        text = _token_mutation(text, rng, pool) if rng.random() < 0.7 else _byte_mutation(text, rng)
    return text


def _byte_mutation(text: str, rng: np.random.Generator) -> str:
    data = bytearray(text.encode("utf-8", "surrogatepass"))
    if not data:
        return text
    i = int(rng.integers(len(data)))
    kind = int(rng.integers(4))
    if kind == 0:
        data[i] ^= 1 << int(rng.integers(8))
    elif kind == 1:
        data.insert(i, int(rng.integers(256)))
    elif kind == 2:
        del data[i : i + int(rng.integers(1, 16))]
    else:
        j = min(len(data), i + int(rng.integers(1, 64)))
        data[i:i] = data[i:j]
    return data.decode("utf-8", "replace")


def _token_mutation(text: str, rng: np.random.Generator, pool: list[str]) -> str:
    spans = [m.span() for m in TOKEN.finditer(text)]
    if not spans:
        return text
    start, end = spans[int(rng.integers(len(spans)))]
    token = text[start:end]
    kind = int(rng.integers(5))
    if kind == 0:
        new = ""
    elif kind == 1:
        new = token + " " + token
    elif kind == 2:
        new = pool[int(rng.integers(len(pool)))]
    elif kind == 3 or token[:1].isdigit() or token[:1] == "-":
        new = EXTREMES[int(rng.integers(len(EXTREMES)))]
    else:
        other = spans[int(rng.integers(len(spans)))]
        new = text[other[0] : other[1]]
    return text[:start] + new + text[end:]


def _inputs(func: object, rng: np.random.Generator) -> list[np.ndarray] | None:
    from dlc.dialects.graph_types import NATIVE_DTYPES, TensorType, numpy_dtype

    args = []
    for t in func.function_type.args:  # type: ignore[attr-defined]
        if not isinstance(t, TensorType) or t.dt not in NATIVE_DTYPES or t.is_dynamic:
            return None  # not run: no inputs for it (a symbolic size has no value here)
        if t.num_elements > 1 << 20:
            return None
        dtype = numpy_dtype(t.dt)
        if dtype.kind == "f":
            args.append(rng.standard_normal(t.dims).astype(dtype))
        elif dtype.kind == "b":
            args.append(rng.random(t.dims) < 0.5)
        else:
            args.append(rng.integers(-3, 8, size=t.dims).astype(dtype))
    return args


class _Alarm(Exception):
    pass


def _on_alarm(signum: int, frame: object) -> None:
    raise _Alarm


def check(text: str) -> str:
    """The outcome of one mutant in this process: "ok", "allowed:<class>", "alarm", or
    "finding:<class>: <message>\\n<traceback>"."""
    import dlc
    from dlc.dialects.graph import FuncOp

    signal.signal(signal.SIGALRM, _on_alarm)
    try:
        module = dlc.parse(text, "mutant.dl")
        mod = dlc.compile(text, filename="mutant.dl")
        rng = np.random.default_rng(0)
        for func in module.body.block.ops:
            if not isinstance(func, FuncOp) or func.sym_name.data not in mod.functions:
                continue
            args = _inputs(func, rng)
            if args is None:
                continue
            signal.setitimer(signal.ITIMER_REAL, RUN_SECONDS)
            try:
                mod[func.sym_name.data](*args)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        return "ok"
    except _Alarm:
        return "alarm"
    except Exception as err:  # noqa: BLE001 -- classifying is the point
        name = type(err).__name__
        if name in ALLOWED:
            return f"allowed:{name}"
        detail = "".join(traceback.format_exception(err))
        return f"finding:{name}: {str(err).splitlines()[0] if str(err) else ''}\n{detail}"


def _worker(tasks: mp.Queue, results: mp.Queue) -> None:
    os.environ.setdefault("DLC_CACHE", "0")
    while True:
        item = tasks.get()
        if item is None:
            return
        index, text = item
        results.put((index, check(text)))


def _start(ctx: mp.context.BaseContext) -> tuple[mp.Process, mp.Queue, mp.Queue]:
    tasks, results = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=_worker, args=(tasks, results), daemon=True)
    proc.start()
    return proc, tasks, results


def run(seed: int, count: int, timeout: float, out: Path | None, log: bool = True) -> Counter:
    """Fuzz `count` mutants one worker at a time (a crash or hang costs a restart);
    returns outcome counts; findings are written to `out`."""
    rng = np.random.default_rng(seed)
    texts = corpus()
    pool = [m.group() for t in texts for m in TOKEN.finditer(t)]
    ctx = mp.get_context("spawn")
    proc, tasks, results = _start(ctx)
    counts: Counter = Counter()
    start = time.monotonic()
    for index in range(count):
        text = mutate(texts[int(rng.integers(len(texts)))], rng, pool)
        tasks.put((index, text))
        outcome = _result(proc, results, timeout)
        if outcome.startswith(("signal", "hang")):
            proc.kill()
            proc, tasks, results = _start(ctx)
        kind = outcome.split("\n", 1)[0].split(":", 2)
        counts[":".join(kind[:2]) if kind[0] in ("allowed", "finding") else kind[0]] += 1
        if not outcome.startswith(("ok", "allowed", "alarm")) and out is not None:
            _write(out, seed, index, text, outcome)
        if log and (index + 1) % 1000 == 0:
            print(
                f"{index + 1} mutants, {time.monotonic() - start:.0f} s: {dict(counts)}", flush=True
            )
    tasks.put(None)
    proc.join(timeout=5)
    return counts


def _result(proc: mp.Process, results: mp.Queue, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return results.get(timeout=0.2)[1]
        except Exception:  # noqa: BLE001 -- queue.Empty: still working, or dead
            if not proc.is_alive():
                return f"signal:{-proc.exitcode if proc.exitcode else proc.exitcode}"
    return f"hang:{timeout:.0f}s"


def _write(out: Path, seed: int, index: int, text: str, outcome: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"mutant-{seed}-{index}"
    stem.with_suffix(".dl").write_text(text, errors="surrogatepass")
    stem.with_suffix(".txt").write_text(outcome)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds before a hang")
    ap.add_argument("--out", type=Path, default=Path("fuzz_findings"))
    args = ap.parse_args(argv)
    start = time.monotonic()
    counts = run(args.seed, args.count, args.timeout, args.out)
    seconds = time.monotonic() - start
    print(f"{args.count} mutants in {seconds:.0f} s ({args.count / seconds:.1f}/s)")
    for outcome, n in counts.most_common():
        print(f"  {n:7d}  {outcome}")
    bad = sum(n for k, n in counts.items() if not k.startswith(("ok", "allowed", "alarm")))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
