"""onnx's light CNNs through dlc, the whole set (the test suite runs the quick ones):

1. each `light_<name>.onnx` through `onnx.backend.test.BackendTest` with
   `dlc.onnx.backend` (its weights are `ConstantOfShape` fills; the expected output
   ships beside the model);
2. with `--random`, each with random weights (`benchmarks/onnx_workloads.randomized`)
   against onnxruntime: the largest difference relative to the largest output.

    python tools/onnx_model_tests.py                     # BackendTest, every light model
    python tools/onnx_model_tests.py --random resnet50   # also random weights vs ort

One line per model: pass/FAIL, seconds, and for --random import and compile seconds.
Exit status 1 when a model fails or differs by more than 1e-4.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import unittest
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

LIGHT = [
    "bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
    "squeezenet", "vgg19", "zfnet512",
]  # fmt: skip
TOLERANCE = 1e-4


def backend_test(name: str) -> tuple[bool, str]:
    """Run BackendTest's `test_<name>_cpu`; (passed, the failure's last line)."""
    from onnx.backend.test import BackendTest

    import dlc.onnx.backend as backend

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runner = BackendTest(backend, "light")
    runner.include(f"^test_{name}_cpu$")
    case = runner.test_cases["OnnxBackendRealModelTest"]
    result = unittest.TestResult()
    unittest.TestSuite([case(f"test_{name}_cpu")]).run(result)
    problems = [text for _, text in result.failures + result.errors]
    return not problems, problems[0].strip().splitlines()[-1] if problems else ""


def random_weights(name: str, threads: int) -> str:
    """dlc against onnxruntime on `name` with random weights: a report fragment."""
    import onnx_workloads
    import onnxruntime as ort

    import dlc.onnx
    from dlc.api import compile_graph_module

    model = onnx_workloads.randomized(onnx_workloads.light_model(name), seed=1)
    constants = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in constants]
    rng = np.random.default_rng(0)
    feeds = {
        i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(
            np.float32
        )
        for i in inputs
    }
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])  # fmt: skip
    want = session.run(None, feeds)[0]
    start = time.perf_counter()
    module = dlc.onnx.load(model)
    imported = time.perf_counter() - start
    compiled = compile_graph_module(module, num_threads=threads)
    compile_s = time.perf_counter() - start - imported
    got = compiled[next(iter(compiled.functions))](*feeds.values())
    error = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    verdict = "pass" if error <= TOLERANCE else "FAIL"
    return f"random weights {verdict}: import {imported:.1f} s, compile {compile_s:.1f} s, max rel err {error:.1e}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help=f"of {', '.join(LIGHT)} (default: all)")
    parser.add_argument("--random", action="store_true", help="also random weights vs ort")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    unknown = set(args.models) - set(LIGHT)
    if unknown:
        parser.error(f"unknown models {sorted(unknown)}")
    os.environ.setdefault("ONNX_HOME", tempfile.mkdtemp(prefix="dlc-onnx-home-"))
    failed = False
    for name in args.models or LIGHT:
        start = time.perf_counter()
        passed, why = backend_test(name)
        line = f"{name:14} BackendTest {'pass' if passed else 'FAIL'} {time.perf_counter() - start:6.1f} s"
        line += "" if passed else f" ({why})"
        if args.random:
            extra = random_weights(name, args.threads)
            failed |= "FAIL" in extra
            line += f"; {extra}"
        failed |= not passed
        print(line, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
