"""Whole models against onnxruntime at several thread counts and on busy cores, in one
run: the model benchmark's table (one row per model, a geometric mean per thread count).

    python tools/bench_model_table.py                          # the default models
    python tools/bench_model_table.py --zoo ~/.cache/dlc-zoo   # with the zoo's exports
    python tools/bench_model_table.py --only resnet50,bert_base --threads 1,2 --loaded

Models: `resnet50`, `mobilenet_v2` and `bert_base` (12 layers, sequence 128) are
built by `benchmarks/onnx_workloads.py`; with `--zoo DIR`, a model exported by
`tools/model_zoo.py` (`DIR/<name>.onnx` with its inputs in `<name>.npz`) is taken
instead of the builder's of the same name, and `efficientnet_b0`, `vit_b_16` and
`gpt2_small` (GPT-2 small, 12 layers, sequence 128) join when exported. A model not
found is a row saying so.

Per model and thread count N: dlc's median ms per call (opt_level 2, `num_threads=N`),
onnxruntime's (`intra_op_num_threads=N`, all graph optimizations, spinning off) and,
when installed, OpenVINO's (`INFERENCE_NUM_THREADS=N`), timed in turns in the same
window (`bench_common.alternating_medians`), and dlc / onnxruntime. With `--loaded`:
one busy process per core runs beside the model while dlc at the default thread count
and dlc at one thread are timed in turns; the column is default / one thread (above
`LOADED_LIMIT`, 1.5, more threads than free cores made the model slower than one
thread would). The last column is dlc's largest difference from onnxruntime relative
to onnxruntime's largest output. Compare ratios, not times, across runs.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
GENERATED = ROOT / "benchmarks" / "generated"
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tools"))

from bench_common import alternating_medians  # noqa: E402
from bench_host import cpu_model  # noqa: E402
from bench_load import busy_processes  # noqa: E402
from bench_models import ort_session  # noqa: E402

LOADED_LIMIT = 1.5
TARGET = 0.9  # the geometric mean of dlc / onnxruntime the model benchmark aims at
ZOO_ONLY = ("efficientnet_b0", "vit_b_16", "gpt2_small")
"""Models that come only from a zoo directory (tools/model_zoo.py exports them)."""


def _image() -> dict[str, np.ndarray]:
    return {"": np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)}


def _tokens() -> dict[str, np.ndarray]:
    import onnx_workloads

    return {"": onnx_workloads.bert_inputs()}


BUILT: dict[str, Callable[[], dict[str, np.ndarray]]] = {
    "resnet50": _image,
    "mobilenet_v2": _image,
    "bert_base": _tokens,
}
"""Models `benchmarks/onnx_workloads.py` builds, with their inputs ("" = the first)."""


@dataclass
class Row:
    """One model's measurements; `ratios[N]` is dlc / onnxruntime at N threads."""

    model: str
    source: str = ""
    compile_s: float = 0.0
    cells: list[str] = field(default_factory=list)
    ratios: dict[int, float] = field(default_factory=dict)
    loaded: float | None = None
    error: str = ""
    missing: str = ""


def locate(name: str, zoo: Path | None) -> tuple[Path, dict[str, np.ndarray], str] | None:
    """The model file, its inputs by name and where it came from; None when absent."""
    if zoo is not None and (zoo / f"{name}.onnx").exists() and (zoo / f"{name}.npz").exists():
        with np.load(zoo / f"{name}.npz", allow_pickle=False) as data:
            return zoo / f"{name}.onnx", {k: data[k] for k in data.files}, "zoo"
    if name not in BUILT:
        return None
    import onnx_workloads

    return onnx_workloads.ensure(name, GENERATED), BUILT[name](), "built"


def openvino_call(path: Path, threads: int, feeds: dict[str, np.ndarray]) -> Callable[[], Any]:
    """A call of the model compiled by OpenVINO on N threads; ImportError when absent."""
    import openvino  # type: ignore[import-not-found]

    compiled = openvino.Core().compile_model(str(path), "CPU", {"INFERENCE_NUM_THREADS": threads})
    request = compiled.create_infer_request()
    return lambda: request.infer(feeds)


def _feeds(session: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    names = [i.name for i in session.get_inputs()]
    if list(inputs) == [""]:
        return {names[0]: inputs[""]}
    return {n: inputs[n] for n in names}


def measure(name: str, zoo: Path | None, threads: Sequence[int], loaded: bool) -> Row:
    """Compile `name` at each thread count, check it and time it against the peers."""
    import dlc.onnx
    from dlc.api import compile_graph_module
    from dlc.diagnostics import DiagnosticError

    row = Row(name)
    found = locate(name, zoo)
    if found is None:
        row.missing = "not found (export it with tools/model_zoo.py, then --zoo)"
        return row
    path, inputs, row.source = found
    try:
        module = dlc.onnx.load(path)
        start = time.perf_counter()
        compiled = {n: compile_graph_module(module, num_threads=n) for n in threads}
        row.compile_s = (time.perf_counter() - start) / len(threads)
    except DiagnosticError as e:
        row.missing = f"dlc cannot compile it: {e.message}"
        return row
    fns = {n: c[next(iter(c.functions))] for n, c in compiled.items()}
    session = ort_session(path, threads[0])
    feeds = _feeds(session, inputs)
    args = list(feeds.values())
    want = session.run(None, feeds)[0]
    got = fns[threads[0]](*args)
    got = np.asarray(got[0] if isinstance(got, tuple) else got)
    scale = float(np.max(np.abs(want))) or 1.0
    row.error = f"{float(np.max(np.abs(got - want))) / scale:.1e}"
    for n in threads:
        session = ort_session(path, n)
        calls = [lambda f=fns[n]: f(*args), lambda s=session: s.run(None, feeds)]
        try:
            calls.append(openvino_call(path, n, feeds))
        except Exception:  # noqa: BLE001 - absent, or a model it does not take: "-"
            pass
        times = alternating_medians(calls)
        row.ratios[n] = times[0] / times[1]
        vino = f"{times[2] * 1e3:8.2f}" if len(times) > 2 else f"{'-':>8}"
        row.cells.append(f"{times[0] * 1e3:8.2f} {times[1] * 1e3:8.2f} {vino} {row.ratios[n]:6.2f}")
    if loaded:
        from dlc.runtime.native import default_threads

        for n in {1, default_threads()} - fns.keys():
            compiled_n = compile_graph_module(module, num_threads=n)
            fns[n] = compiled_n[next(iter(compiled_n.functions))]
        row.loaded = loaded_ratio(fns[1], fns[default_threads()], args)
    return row


def loaded_ratio(
    one: Callable[..., Any], default: Callable[..., Any], args: list[np.ndarray]
) -> float:
    """dlc at the default thread count / dlc at one thread, timed in turns with one busy
    process per core beside them (both compiled before the busy processes start)."""
    fns = [one, default]
    hogs = busy_processes(len(os.sched_getaffinity(0)))
    try:
        t_one, t_default = alternating_medians([lambda f=f: f(*args) for f in fns])
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    return t_default / t_one


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def report(rows: Sequence[Row], threads: Sequence[int], loaded: bool) -> str:
    """The table: a line per model, then per thread count the geometric mean of dlc /
    onnxruntime, the models above 1.1 and the worst loaded ratio."""
    heads = " ".join(
        f"{f'{n}t dlc ms':>8} {'ort ms':>8} {'ov ms':>8} {'ratio':>6}" for n in threads
    )
    lines = [f"{'model':16} {'from':5} {'compile s':>9} {heads}"
             + (f" {'loaded':>6}" if loaded else "") + "  max rel err"]  # fmt: skip
    for r in rows:
        if r.missing:
            lines.append(f"{r.model:16} {r.missing}")
            continue
        extra = f" {r.loaded:6.2f}" if r.loaded is not None else ""
        lines.append(f"{r.model:16} {r.source:5} {r.compile_s:9.1f} {' '.join(r.cells)}"
                     f"{extra}  {r.error}")  # fmt: skip
    measured = [r for r in rows if r.ratios]
    for n in threads:
        if measured:
            ratios = [r.ratios[n] for r in measured]
            above = [r.model for r in measured if r.ratios[n] > 1.1]
            lines.append(f"{n} thread(s): geomean dlc/ort {geomean(ratios):.2f} (target "
                         f"{TARGET}) over {len(ratios)} models; above 1.1: "
                         f"{', '.join(above) or 'none'}")  # fmt: skip
    worst = [r.loaded for r in measured if r.loaded is not None]
    if worst:
        lines.append(f"loaded: worst default / one thread {max(worst):.2f} (limit {LOADED_LIMIT})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated model names")
    parser.add_argument("--zoo", type=Path, help="tools/model_zoo.py's cache directory")
    parser.add_argument("--threads", default="1,2", help="thread counts, e.g. 1,2")
    parser.add_argument("--loaded", action="store_true", help="add the busy-cores column")
    args = parser.parse_args(argv)
    os.environ.setdefault("DLC_CACHE_DIR", tempfile.mkdtemp(prefix="dlc-bench-cache-"))
    names = args.only.split(",") if args.only else [*BUILT, *ZOO_ONLY]
    threads = [int(t) for t in args.threads.split(",")]
    print(f"{cpu_model()}; opt_level 2; times are medians of calls in turns (ms)")
    rows = []
    for name in names:
        rows.append(measure(name, args.zoo, threads, args.loaded))
        print(report(rows[-1:], threads, args.loaded).splitlines()[1], flush=True)
    print(report(rows, threads, args.loaded))
    return 0


if __name__ == "__main__":
    sys.exit(main())
