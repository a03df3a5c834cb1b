"""Run ONNX's node tests (`onnx.backend.test`) against dlc and classify every one.

    python tools/onnx_node_tests.py [-j JOBS] [--timeout SECONDS] [-k REGEX] [--list CLASS]

The node tests are built in memory by onnx's own generator
(`onnx.backend.test.loader.load_node_model_tests`: onnx ≥ 1.23 ships no node test data;
older wheels' data is the same cases). Each test runs in a worker subprocess through
`dlc.onnx.backend` exactly as `BackendTest` runs it (`prepare`, `run`, then
`BackendTest.assert_similar_outputs` with the case's rtol/atol); a worker that dies or
exceeds the timeout is replaced, and its test counts as crashed. Classes:

- passed: dlc's outputs match;
- failed: dlc ran and gave a wrong answer (shape, type or values) — must be zero;
- unsupported: dlc refused the model with a clean `DiagnosticError` naming what is
  missing (the reason is tallied by operator);
- crashed: any other exception, a dead worker or a timeout;
- out of scope: string tensors, sequences and optionals, the `ai.onnx.ml` and
  preview/training domains, float8/float4/int4/int2 types; and two classes of
  operators that dlc's design excludes (`DESIGN_LIMITS`): those whose output shape
  depends on input values (NonZero, Unique, Compress, NonMaxSuppression,
  ImageDecoder's decoded size: dlc compiles static shapes, and the node tests feed
  those values at run time) and random draws (Bernoulli, Random*: the tests compare
  with the draws of NumPy's generator in onnx's reference, which no other generator
  reproduces). `--strict` counts these two classes in scope.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import select
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from typing import Any

OUT_OF_SCOPE_TYPES = {
    "STRING": "string tensors",
    "FLOAT8E4M3FN": "float8",
    "FLOAT8E4M3FNUZ": "float8",
    "FLOAT8E5M2": "float8",
    "FLOAT8E5M2FNUZ": "float8",
    "FLOAT8E8M0": "float8",
    "FLOAT4E2M1": "float4",
    "INT4": "int4",
    "UINT4": "int4",
    "INT2": "int2",
    "UINT2": "int2",
}
SEQUENCE_OPS = re.compile(r"^(Sequence\w*|SplitToSequence|ConcatFromSequence|Optional\w*)$")
OUT_OF_SCOPE_DOMAINS = {
    "ai.onnx.ml": "ai.onnx.ml domain",
    "ai.onnx.preview.training": "preview/training domain",
    "ai.onnx.preview": "preview/training domain",
}
DESIGN_LIMITS = {
    **dict.fromkeys(
        ["NonZero", "Unique", "Compress", "NonMaxSuppression", "ImageDecoder"],
        "output shape depends on input values",
    ),
    **dict.fromkeys(
        [
            "Bernoulli",
            "RandomUniform",
            "RandomUniformLike",
            "RandomNormal",
            "RandomNormalLike",
            "Multinomial",
        ],
        "random draws",
    ),  # fmt: skip
}
"""Operators out of scope by dlc's design (module docstring), with the reason."""
CLASSES = ("passed", "failed", "unsupported", "crashed", "out of scope")


# ---- which tests are out of scope ---------------------------------------------------


def _type_reasons(type_proto: Any) -> Iterator[str]:
    """Out-of-scope reasons of one `TypeProto` (sequences, optionals, maps, element types)."""
    from onnx import TensorProto

    kind = type_proto.WhichOneof("value")
    if kind in ("sequence_type", "optional_type", "map_type"):
        yield "sequences and optionals"
    elif kind in ("tensor_type", "sparse_tensor_type"):
        elem = getattr(type_proto, kind).elem_type
        name = TensorProto.DataType.Name(elem) if elem else ""
        if name in OUT_OF_SCOPE_TYPES:
            yield OUT_OF_SCOPE_TYPES[name]


def _graph_reasons(graph: Any) -> Iterator[str]:
    from onnx import AttributeProto

    for value in [*graph.input, *graph.output, *graph.value_info]:
        yield from _type_reasons(value.type)
    for init in graph.initializer:
        yield from _elem_reasons(init.data_type)
    for node in graph.node:
        if node.domain in OUT_OF_SCOPE_DOMAINS:
            yield OUT_OF_SCOPE_DOMAINS[node.domain]
        if SEQUENCE_OPS.match(node.op_type):
            yield "sequences and optionals"
        for attr in node.attribute:
            if attr.type == AttributeProto.TENSOR:
                yield from _elem_reasons(attr.t.data_type)
            elif attr.type == AttributeProto.GRAPH:
                yield from _graph_reasons(attr.g)
            elif attr.name == "to" and attr.type == AttributeProto.INT:
                yield from _elem_reasons(attr.i)
            elif attr.type == AttributeProto.TYPE_PROTO:
                yield from _type_reasons(attr.tp)


def _elem_reasons(elem: int) -> Iterator[str]:
    from onnx import TensorProto

    name = TensorProto.DataType.Name(elem) if elem else ""
    if name in OUT_OF_SCOPE_TYPES:
        yield OUT_OF_SCOPE_TYPES[name]


def out_of_scope(model: Any, strict: bool = False) -> str | None:
    """The first reason `model` is out of scope, or None (`strict`: the operators of
    `DESIGN_LIMITS` are in scope)."""
    for opset in model.opset_import:
        if opset.domain in OUT_OF_SCOPE_DOMAINS:
            return OUT_OF_SCOPE_DOMAINS[opset.domain]
    for function in model.functions:
        for node in function.node:
            if node.domain in OUT_OF_SCOPE_DOMAINS:
                return OUT_OF_SCOPE_DOMAINS[node.domain]
    if not strict:
        ops = [node.op_type for node in model.graph.node if node.domain in ("", "ai.onnx")]
        limits = [DESIGN_LIMITS[op] for op in ops if op in DESIGN_LIMITS]
        if limits:
            return limits[0]
    return next(_graph_reasons(model.graph), None)


# ---- the worker: one test a line on stdin, one JSON result a line on stdout ---------


def load_cases() -> dict[str, Any]:
    from onnx.backend.test.loader import load_node_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {case.name: case for case in load_node_model_tests()}


def run_case(case: Any) -> dict[str, str]:
    """Run one node test as `BackendTest` does; the class and a one-line reason."""
    import numpy as np
    from onnx.backend.test.runner import Runner, _normalize_tensor

    import dlc.onnx.backend as backend
    from dlc.diagnostics import DiagnosticError

    try:
        rep = backend.prepare(case.model, "CPU")
        for inputs, ref_outputs in case.data_sets:
            outputs = rep.run([_normalize_tensor(a) for a in inputs])
            refs = [_normalize_tensor(a) for a in ref_outputs]
            with np.errstate(all="ignore"):
                Runner.assert_similar_outputs(refs, outputs, case.rtol, case.atol)
    except AssertionError as err:
        return {"class": "failed", "reason": str(err).strip().splitlines()[0][:200]}
    except DiagnosticError as err:
        return {"class": "unsupported", "reason": err.message}
    except Exception as err:
        return {"class": "crashed", "reason": f"{type(err).__name__}: {err}"[:300]}
    return {"class": "passed", "reason": ""}


def worker() -> None:
    cases = load_cases()
    out = sys.stdout
    sys.stdout = sys.stderr  # whatever the compiler prints must not break the protocol
    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        result = run_case(cases[line.strip()])
        out.write(json.dumps(result) + "\n")
        out.flush()


# ---- the driver ---------------------------------------------------------------------


class Worker:
    """A worker subprocess with at most one test in flight."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-X", "faulthandler", __file__, "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        self.name: str | None = None
        self.started = 0.0
        self.ready = False

    def send(self, name: str) -> None:
        assert self.proc.stdin is not None
        self.name, self.started = name, time.monotonic()
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def drive(names: list[str], jobs: int, timeout: float) -> dict[str, dict[str, str]]:
    """Run `names` on `jobs` workers; the result of every test."""
    results: dict[str, dict[str, str]] = {}
    pending = list(reversed(names))
    workers = [Worker() for _ in range(min(jobs, len(names)))]
    while len(results) < len(names):
        for w in workers:
            if w.ready and w.name is None and pending:
                w.send(pending.pop())
        streams = {w.proc.stdout: w for w in workers if w.proc.stdout is not None}
        readable, _, _ = select.select(list(streams), [], [], 1.0)
        for stream in readable:
            w = streams[stream]
            line = stream.readline()
            if not line:  # the worker died
                _replace(workers, w, results, "crashed", "the worker process died")
            elif line.strip() == "ready":
                w.ready = True
            else:
                assert w.name is not None
                results[w.name] = json.loads(line)
                _progress(len(results), len(names))
                w.name = None
        for w in list(workers):
            if w.name is not None and time.monotonic() - w.started > timeout:
                _replace(workers, w, results, "crashed", f"timed out after {timeout:.0f} s")
    for w in workers:
        w.kill()
    return results


def _replace(workers: list[Worker], w: Worker, results: dict, cls: str, reason: str) -> None:
    if w.name is not None:
        results[w.name] = {"class": cls, "reason": reason}
    w.kill()
    workers[workers.index(w)] = Worker()


def _progress(done: int, total: int) -> None:
    if sys.stderr.isatty() and (done % 20 == 0 or done == total):
        print(f"\r{done}/{total}", end="" if done < total else "\n", file=sys.stderr)


def unsupported_op(reason: str) -> str:
    """The operator (or input/type problem) an unsupported reason is about."""
    match = re.search(r"\(([A-Za-z0-9_]+)\): operator \S+ is not supported", reason)
    if match:
        return match.group(1)
    match = re.search(r"element type (\w+) is not supported", reason)
    if match:
        return f"element type {match.group(1)}"
    match = re.search(r"\(([A-Za-z0-9_]+)\): (.*)", reason)
    if match:
        detail = re.sub(r"'[^']*'", "'…'", match.group(2))
        return f"{match.group(1)}: {detail[:70]}"
    return re.sub(r"'[^']*'", "'…'", reason.splitlines()[0])[:80]


def report(results: dict[str, dict[str, str]], top: int) -> str:
    counts = collections.Counter(r["class"] for r in results.values())
    total = len(results)
    in_scope = total - counts["out of scope"]
    lines = [
        f"ONNX node tests (onnx {_onnx_version()}): {counts['passed']} passed / "
        f"{in_scope} in scope / {total} total",
        "  " + ", ".join(f"{c}: {counts[c]}" for c in CLASSES),
        "out of scope:",
    ]
    reasons = collections.Counter(
        r["reason"] for r in results.values() if r["class"] == "out of scope"
    )
    lines += [f"  {n:5d}  {reason}" for reason, n in reasons.most_common()]
    ops = collections.Counter(
        unsupported_op(r["reason"]) for r in results.values() if r["class"] == "unsupported"
    )
    lines.append(f"most common unsupported (tests blocked, top {top}):")
    lines += [f"  {n:5d}  {op}" for op, n in ops.most_common(top)]
    for cls in ("failed", "crashed"):
        bad = sorted(n for n, r in results.items() if r["class"] == cls)
        if bad:
            lines.append(f"{cls}:")
            lines += [f"  {n}: {results[n]['reason']}" for n in bad]
    return "\n".join(lines)


def _onnx_version() -> str:
    import onnx

    return onnx.__version__


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-j", "--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per test")
    parser.add_argument("-k", "--filter", default="", help="only tests matching REGEX")
    parser.add_argument("--top", type=int, default=30, help="unsupported reasons listed")
    parser.add_argument("--list", choices=CLASSES, help="also list the tests of a class")
    parser.add_argument("--json", help="write every test's class and reason to this file")
    parser.add_argument(
        "--strict", action="store_true", help="count the operators of DESIGN_LIMITS in scope"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker()
        return
    cases = load_cases()
    results: dict[str, dict[str, str]] = {}
    to_run = []
    for name, case in sorted(cases.items()):
        if args.filter and not re.search(args.filter, name):
            continue
        reason = out_of_scope(case.model, args.strict)
        if reason is not None:
            results[name] = {"class": "out of scope", "reason": reason}
        else:
            to_run.append(name)
    started = time.monotonic()
    results.update(drive(to_run, args.jobs, args.timeout))
    print(report(results, args.top))
    print(f"({len(to_run)} tests run in {time.monotonic() - started:.0f} s)")
    if args.list:
        print(f"{args.list}:")
        for name in sorted(n for n, r in results.items() if r["class"] == args.list):
            print(f"  {name}: {results[name]['reason']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
