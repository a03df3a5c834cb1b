"""A GPT-2-style decoder generating greedily with a growing KV cache: one compile for
every step, checked against onnxruntime token by token.

    python tools/bench_decoder.py                          # 4 layers, hidden 256, 128 tokens
    python tools/bench_decoder.py --layers 2 --tokens 32 --threads 1

The model is `onnx_decoder.gpt2_decoder` (random weights; one call takes new tokens,
their positions, an attention bias and every layer's past keys and values, returns the
logits and the grown caches). It is compiled once with `dlc.compile_onnx(model, dynamic=True)` (a
fresh, empty compile cache: a cold compile), then runs a random prompt of `--prompt`
tokens in one call (a causal attention bias) and generates `--tokens` tokens, each the
argmax of the previous call's last logits, the first from the prompt's call, the others
one call each with the cache grown by one. dlc and onnxruntime (`intra_op_num_threads` =
`--threads`, spinning off) each keep their own cache; every call runs on both with the
same tokens, in turns, `--repeat` times (the median is the call's time), and fails
unless both pick the same next token and their logits and caches agree within
`--tolerance` of the largest logit. At the end the module's statistics must say one
compile (`stats(f)["compiles"]`) and as many sizes as calls. Printed: the compile time,
the prompt's ms, the median ms per generated token of dlc and onnxruntime over each
quarter of the generation (by the cache length) and over all of it, and the largest
difference.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tools"))

from bench_models import ort_session  # noqa: E402
from bench_models import timed as timed_compile  # noqa: E402


def timed_step(step: Any, args: list[Any], repeat: int) -> tuple[Any, float]:
    """The result of `step(*args)` and the median seconds of `repeat` calls."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = step(*args)
        times.append(time.perf_counter() - start)
    return result, statistics.median(times)


def generate(function: Any, ort: Any, model: Any, options: argparse.Namespace) -> dict[str, Any]:
    """Run the prompt in one call, then generate token by token with both (module doc);
    the prompt's times, the per-step times and the largest relative difference, or
    `failed` naming the call that disagreed."""
    import onnx_decoder

    names = [i.name for i in ort.get_inputs()]
    ours, theirs = onnx_decoder.empty_cache(model), onnx_decoder.empty_cache(model)
    vocab = model.graph.output[0].type.tensor_type.shape.dim[-1].dim_value
    rng = np.random.default_rng(options.seed)
    tokens, past, worst, steps = (
        [int(t) for t in rng.integers(0, vocab, options.prompt)],
        0,
        0.0,
        [],
    )
    for call in range(options.tokens):
        args = onnx_decoder.step_inputs(tokens, past)
        feed = dict(zip(names, [*args, *theirs], strict=True))
        got, dlc_s = timed_step(function, [*args, *ours], options.repeat)
        want, ort_s = timed_step(ort.run, [None, feed], options.repeat)
        scale = float(np.max(np.abs(want[0])))
        error = max(float(np.max(np.abs(g - w))) for g, w in zip(got, want, strict=True)) / scale
        worst = max(worst, error)
        chosen, expected = int(np.argmax(got[0][0, -1])), int(np.argmax(want[0][0, -1]))
        if chosen != expected or error > options.tolerance:
            return {"failed": f"call {call}: token {chosen} vs {expected}, difference {error:.1e}"}
        steps.append((dlc_s, ort_s))
        ours, theirs = list(got[1:]), list(want[1:])
        past, tokens = past + len(tokens), [chosen]
    return {"prompt": steps[0], "steps": steps[1:], "error": worst}


def report(prompt: tuple[float, float], steps: list[tuple[float, float]], first: int) -> None:
    """The prompt's ms, then the median ms per token of dlc and onnxruntime by quarter
    of the generation (`first`: the cache length at the first step)."""
    print("          calls | dlc ms/token | ort ms/token | dlc/ort")
    d, o = (1e3 * t for t in prompt)
    print(f"  {'prompt':>13} | {d:12.3f} | {o:12.3f} | {d / o:7.2f}   (ms for the prompt)")
    n = len(steps)
    parts = [(k * n // 4, (k + 1) * n // 4) for k in range(4)] + [(0, n)]
    for lo, hi in parts:
        if hi <= lo:
            continue
        d = 1e3 * statistics.median(s[0] for s in steps[lo:hi])
        o = 1e3 * statistics.median(s[1] for s in steps[lo:hi])
        label = f"{first + lo:3d}-{first + hi - 1:3d}" if (lo, hi) != (0, n) else "steps"
        print(f"  {label:>13} | {d:12.3f} | {o:12.3f} | {d / o:7.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=1000)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--prompt", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tolerance", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    options = parser.parse_args(argv)
    os.environ["DLC_CACHE_DIR"] = tempfile.mkdtemp(prefix="dlc-bench-decoder-")
    import onnx
    import onnx_decoder

    import dlc

    model = onnx_decoder.gpt2_decoder(
        layers=options.layers, hidden=options.hidden, heads=options.heads, vocab=options.vocab,
        positions=options.prompt + options.tokens,
    )  # fmt: skip
    path = Path(os.environ["DLC_CACHE_DIR"]) / "decoder.onnx"
    onnx.save(model, str(path))
    module, wall, cpu = timed_compile(
        lambda: dlc.compile_onnx(model, dynamic=True, num_threads=options.threads)
    )
    name = model.graph.name
    print(
        f"decoder: {options.layers} layers, hidden {options.hidden}, {options.heads} heads, "
        f"vocab {options.vocab}; compiled once in {wall:.1f} s ({cpu:.1f} s CPU)"
    )
    result = generate(getattr(module, name), ort_session(path, options.threads), model, options)
    if "failed" in result:
        print(f"FAILED: {result['failed']}")
        return 1
    stats = module.stats(name)
    print(
        f"{options.tokens} tokens after a prompt of {options.prompt}, each matching onnxruntime "
        f"(largest difference {result['error']:.1e} of the largest logit); compiles "
        f"{stats['compiles']}, sizes called {stats['sizes_called']}"
    )
    report(result["prompt"], result["steps"], options.prompt)
    return 0 if stats["compiles"] == 1 and stats["sizes_called"] == options.tokens else 1


if __name__ == "__main__":
    sys.exit(main())
