"""Public architectures through dlc, as a user brings them: each model of
`model_zoo_models.MODELS` exported by `torch.onnx.export` with random weights (batch 1,
static shapes), imported, compiled and run by dlc and compared with onnxruntime.

    pip install -e '.[zoo]'                   # torch, torchvision, timm, transformers
    python tools/model_zoo.py                 # every model
    python tools/model_zoo.py resnet18 bert   # some
    python tools/model_zoo.py --markdown docs/models.md --budget 900

The ONNX files and their inputs are cached in `~/.cache/dlc-zoo` (`--cache`): an
export takes a few seconds to a minute, and the files are what a user would hand to
dlc. Each export and each check runs in a subprocess of its own with a time budget
(`--budget` seconds), so a crash, a hang or an out-of-memory kill costs one row.
The check runs without torch in the process: its peak RSS (the import, compile and
one run of dlc, after onnx and onnxruntime are loaded) is dlc's.

One row per model: status (`ok`, `mismatch`, `import`, `compile`, `run`, `export`,
`timeout`, `crash`; `imported` with `--import-only`), the largest error relative to the largest onnxruntime output (over
all outputs), compile seconds, peak RSS and the first line of any error. Exit status 1
when a model that onnxruntime runs does not pass (`--tolerance`, 1e-4).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_host import cpu_model  # noqa: E402

TOLERANCE = 1e-4
OPSET = 17


def export(name: str, cache: Path) -> None:
    """Export `name` to `cache/<name>.onnx` with its inputs in `<name>.npz` (in a
    subprocess of the sweep: torch is imported here only)."""
    import numpy as np
    import torch
    from model_zoo_models import MODELS

    torch.manual_seed(0)
    module, args, names = MODELS[name][1]()
    path = cache / f"{name}.onnx"
    with torch.no_grad():
        try:  # the TorchScript exporter (Shape chains, every Resize attribute)
            torch.onnx.export(
                module, args, str(path), input_names=names, opset_version=OPSET, dynamo=False
            )
        except Exception:  # noqa: BLE001 - then the dynamo exporter
            torch.onnx.export(
                module, args, str(path), input_names=names, opset_version=18, dynamo=True,
                external_data=False,
            )  # fmt: skip
    np.savez(cache / f"{name}.npz", **{n: a.numpy() for n, a in zip(names, args, strict=True)})


def check(name: str, cache: Path, opt_level: int | None) -> dict:
    """Import, compile and run `cache/<name>.onnx` with dlc and onnxruntime: a row
    (`opt_level` None: import only, status `imported`)."""
    import resource

    import numpy as np
    import onnx
    import onnxruntime as ort

    import dlc.onnx
    from dlc.api import compile_graph_module

    model = onnx.load(str(cache / f"{name}.onnx"))
    with np.load(cache / f"{name}.npz", allow_pickle=False) as data:
        inputs = {k: data[k] for k in data.files}
    row: dict = {"model": name}
    stage = "import"
    try:
        module = dlc.onnx.load(model)
        if opt_level is None:
            return {**row, "status": "imported"}
        stage = "compile"
        start = time.perf_counter()
        compiled = compile_graph_module(module, opt_level=opt_level)
        row["compile_s"] = time.perf_counter() - start
        row["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        stage = "run"
        func = compiled[compiled.functions[0]]
        got = func(*[inputs[i.name] for i in model.graph.input if i.name in inputs])
    except Exception as err:  # noqa: BLE001 - a refusal or a failure: the row says which
        return {**row, "status": stage, "error": first_line(err)}
    got = list(got) if isinstance(got, tuple) else [got]
    try:  # after dlc, so the peak RSS above is dlc's
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        want = session.run(None, inputs)
    except Exception as err:  # noqa: BLE001 - a model onnxruntime does not run
        return {**row, "status": "ort", "error": first_line(err)}
    scale = max(float(np.abs(w).max()) if w.size else 0.0 for w in want) or 1.0
    diff = max(
        float(np.abs(np.asarray(g, np.float64) - w).max()) if w.size else 0.0
        for g, w in zip(got, want, strict=True)
    )
    row["max_rel_error"] = diff / scale
    return row


def first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return (text[0] if text else type(err).__name__)[:200]


def _child(args: list[str], budget: float) -> tuple[str, str]:
    """Run this script with `args` in a subprocess: ("", stdout) or (status, message)."""
    command = ["nice", "-n", "10", sys.executable, __file__, *args]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DLC_CACHE": "0"}  # compile times
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=budget, env=env)
    except subprocess.TimeoutExpired:
        return "timeout", f"over the budget of {budget:.0f} s"
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip()]
        return "crash", (lines[-1] if lines else f"exit status {done.returncode}")[:200]
    return "", done.stdout


def sweep(
    names: Sequence[str], cache: Path, budget: float, opt_level: int | None, log: Path | None
) -> list[dict]:
    """Check each model (exported first when not cached); each row is printed and
    appended to `log` as it comes (an interrupted sweep keeps its rows)."""
    rows = []
    for name in names:
        if not (cache / f"{name}.onnx").exists() or not (cache / f"{name}.npz").exists():
            status, message = _child(["--export", name, "--cache", str(cache)], budget)
            if status:
                rows.append({"model": name, "status": "export", "error": message})
                _record(rows[-1], log)
                continue
        args = ["--check", name, "--cache", str(cache)]
        args += ["--import-only"] if opt_level is None else ["--opt-level", str(opt_level)]
        status, out = _child(args, budget)
        row = {"model": name, "status": status, "error": out} if status else json.loads(out)
        rows.append(row)
        _record(row, log)
    return rows


def _record(row: dict, log: Path | None) -> None:
    print(json.dumps(row), flush=True)
    if log is not None:
        with log.open("a") as f:
            f.write(json.dumps(row) + "\n")


def settle(row: dict, tolerance: float) -> dict:
    """The row's final status: `ok` or `mismatch` for a model that ran."""
    if "max_rel_error" in row:
        row["status"] = "ok" if row["max_rel_error"] <= tolerance else "mismatch"
    return row


def markdown(rows: list[dict], families: dict[str, str], command: str) -> str:
    passed = sum(r["status"] == "ok" for r in rows)
    imported = sum(r["status"] == "imported" for r in rows)
    more = f"; {imported} more import, not compiled in this run" if imported else ""
    lines = [
        f"{passed} of {len(rows) - imported} models pass{more} ({time.strftime('%Y-%m-%d')}, "
        f"{cpu_model()}; `{command}`).",
        "",
        "| model | family | status | max rel. error | compile s | peak RSS MB | first error line |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        error = r.get("max_rel_error")
        cells = [
            r["model"],
            families.get(r["model"], ""),
            r["status"],
            f"{error:.1e}" if error is not None else "",
            f"{r['compile_s']:.1f}" if "compile_s" in r else "",
            f"{r['rss_mb']:.0f}" if "rss_mb" in r else "",
            r.get("error", "").replace("|", "\\|"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="model names (default: all)")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "dlc-zoo")
    parser.add_argument("--budget", type=float, default=900.0, help="seconds per step")
    parser.add_argument("--opt-level", type=int, default=2)
    parser.add_argument("--import-only", action="store_true", help="no compile and run")
    parser.add_argument("--tolerance", type=float, default=TOLERANCE)
    parser.add_argument("--json", type=Path, help="append the rows to this JSON-lines file")
    parser.add_argument("--markdown", type=Path, help="write the table here")
    parser.add_argument(
        "--from-json", type=Path, help="no sweep: the table of the rows in this file (--json)"
    )
    parser.add_argument("--export", help=argparse.SUPPRESS)
    parser.add_argument("--check", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.export:
        export(args.export, args.cache)
        return 0
    if args.check:
        level = None if args.import_only else args.opt_level
        print(json.dumps(check(args.check, args.cache, level)))
        return 0
    from model_zoo_models import MODELS

    unknown = [n for n in args.models if n not in MODELS]
    if unknown:
        parser.error(f"unknown models: {', '.join(unknown)} (known: {', '.join(MODELS)})")
    if args.from_json:
        latest = {}
        for line in args.from_json.read_text().splitlines():
            if not line.startswith("{"):
                continue  # a sweep's printed log holds other lines
            row = json.loads(line)
            latest[row["model"]] = row  # the last row of each model
        rows = [settle(latest[n], args.tolerance) for n in MODELS if n in latest]
    else:
        args.cache.mkdir(parents=True, exist_ok=True)
        names = args.models or list(MODELS)
        level = None if args.import_only else args.opt_level
        rows = sweep(names, args.cache, args.budget, level, args.json)
        rows = [settle(r, args.tolerance) for r in rows]
    if args.markdown:
        command = "python tools/model_zoo.py " + " ".join(argv or sys.argv[1:])
        families = {n: family for n, (family, _) in MODELS.items()}
        args.markdown.write_text(markdown(rows, families, command.strip()))
    print(f"{cpu_model()}: {sum(r['status'] == 'ok' for r in rows)} of {len(rows)} pass")
    return 0 if all(r["status"] in ("ok", "ort", "imported") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
