"""Time dlc against NumPy and the other installed systems on the BENCHMARKS.md
workloads, in one process.

    python tools/bench.py                  # every workload, every installed peer
    python tools/bench.py --only W0,W4     # a subset
    python tools/bench.py --threads 1      # another thread count for every system
    python tools/bench.py --peers np,tcomp # other columns (tcomp = torch.compile)
    python tools/bench.py --o3 --peers np  # also opt_level=3 (superoptimize) vs 2

The header says how many threads each system runs on, which OpenBLAS kernel NumPy
runs (threadpoolctl) and each peer's version and settings. Per workload: dlc's median
µs per call, then for each peer (np = NumPy, ort = onnxruntime, jax = `jax.jit`,
torch = eager PyTorch, tcomp = `torch.compile`, opt-in because it compiles for
seconds per workload) its median and dlc / peer (below 1: dlc is faster), or why there
is no number ("not installed", "mismatch" when its result differs from NumPy's,
"failed"); dlc's GFLOP/s where FLOPs are defined; dlc's compile time (first: a cold
compile, the compile cache lives in a fresh temporary DLC_CACHE_DIR for the run;
"again": a second compile of the same text, served by the in-memory cache; "disk": a
third one after forgetting the in-memory entries, served by the on-disk cache); the
top-level loop nests per call (`stats()["loop_nests"]`); whether dlc's result matches
NumPy's. A GFLOP/s table of every column follows, then the W4 ceiling: NumPy's matmul
on OpenBLAS's AVX-512 kernel (`OPENBLAS_CORETYPE=SkylakeX`, in a subprocess) at the
bench's thread count and at 1 thread, next to dlc's W4 as a percentage of it.

W10c and W11c are W10 and W11 with their weights bound at compile time
(`dlc.compile(..., constants=...)`, as an ONNX model's initializers are): dlc's
function takes x (and c) only; the peers take every input as in W10 and W11.

W8 (ResNet-50) and W9 (BERT-base encoder layer), whole ONNX models, run only when
named (`--only W8,W9`): tools/bench_models.py says what their table shows.

Peers come with `pip install -e '.[bench]'` (torch: see CONTRIBUTING.md); a missing one is a
column saying so. Medians are over at least 7 timed samples after a warm-up; compare
ratios within one run, never absolute times across runs (shared, noisy machine).
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_host  # noqa: E402
from bench_common import TOLERANCE, Arrays, Peer, Workload, cell, max_error, median_seconds  # noqa: E402
from bench_inception import np_conv2d, np_inception  # noqa: E402
from bench_models import MODELS, run_models  # noqa: E402
from bench_onnx import OnnxRuntimePeer  # noqa: E402
from bench_peers import JaxPeer, NumPyPeer, TorchPeer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PEERS = "np,ort,jax,torch"
ALL_PEERS = "np,ort,jax,torch,tcomp"

# -- NumPy twins, written the fast way (y*y*y, not y**3) ----------------------------


def np_sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


def np_lstm_tail(
    c: np.ndarray, f: np.ndarray, i: np.ndarray, j: np.ndarray, o: np.ndarray
) -> tuple:
    new_c = c * np_sigmoid(f + 1) + np_sigmoid(i) * np.tanh(j)
    return new_c, np.tanh(new_c) * np_sigmoid(o)


def np_lstm_step(x: np.ndarray, c: np.ndarray, *gates: np.ndarray) -> tuple:
    f, i, j, o = (x @ w for w in gates)
    return np_lstm_tail(c, f, i, j, o)


def np_attention(x: np.ndarray, wq: np.ndarray, wk: np.ndarray, wv: np.ndarray) -> np.ndarray:
    q, k, v = x @ wq, x @ wk, x @ wv
    return np_softmax(q @ k.T / np.sqrt(x.shape[1])) @ v


def np_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_softmax_chain(n: int) -> Callable[[np.ndarray], np.ndarray]:
    def chain(x: np.ndarray) -> np.ndarray:
        for _ in range(n):
            x = np_softmax(x)
        return x

    return chain


def np_mlp(
    x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray
) -> np.ndarray:
    h = np.maximum(x @ w1 + b1, 0)
    return np_softmax(h @ w2 + b2, axis=1)


def np_train_step(
    x: np.ndarray, t: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray
) -> tuple:
    z1 = x @ w1 + b1
    h = np.maximum(z1, 0)
    probs = np_softmax(h @ w2 + b2, axis=1)
    dlogits = (probs - t) / x.shape[0]
    dw2, db2 = h.T @ dlogits, dlogits.sum(axis=0, keepdims=True)
    dz1 = (dlogits @ w2.T) * (z1 > 0)
    dw1, db1 = x.T @ dz1, dz1.sum(axis=0, keepdims=True)
    rate = np.float32(0.01)
    return w1 - rate * dw1, b1 - rate * db1, w2 - rate * dw2, b2 - rate * db2


def np_layernorm_gelu(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=1, keepdims=True)
    xc = x - mean
    var = (xc * xc).mean(axis=1, keepdims=True)
    y = xc / np.sqrt(var + np.float32(1e-5)) * gamma + beta
    inner = np.float32(0.7978845608028654) * (y + np.float32(0.044715) * (y * y * y))
    return 0.5 * y * (1 + np.tanh(inner))


# -- inputs ---------------------------------------------------------------------------


def normal(*shapes: tuple[int, ...], scale: float = 1.0) -> Callable[[np.random.Generator], Arrays]:
    def make(rng: np.random.Generator) -> Arrays:
        return [(rng.standard_normal(s) * scale).astype(np.float32) for s in shapes]

    return make


def mlp_inputs(batch: int) -> Callable[[np.random.Generator], Arrays]:
    def make(rng: np.random.Generator) -> Arrays:
        x = rng.standard_normal((batch, 784)).astype(np.float32)
        w1 = (rng.standard_normal((784, 256)) / 28).astype(np.float32)
        b1 = (rng.standard_normal((1, 256)) * 0.1).astype(np.float32)
        w2 = (rng.standard_normal((256, 10)) / 16).astype(np.float32)
        b2 = (rng.standard_normal((1, 10)) * 0.1).astype(np.float32)
        return [x, w1, b1, w2, b2]

    return make


def train_inputs(rng: np.random.Generator) -> Arrays:
    x, w1, b1, w2, b2 = mlp_inputs(64)(rng)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, size=64)]
    return [x, labels, w1, b1, w2, b2]


def layernorm_inputs(rng: np.random.Generator) -> Arrays:
    x = rng.standard_normal((128, 768)).astype(np.float32)
    gamma = (1 + 0.1 * rng.standard_normal((1, 768))).astype(np.float32)
    beta = (0.1 * rng.standard_normal((1, 768))).astype(np.float32)
    return [x, gamma, beta]


def mlp_flops(batch: int) -> float:
    return 2.0 * batch * (784 * 256 + 256 * 10)


WORKLOADS = [
    Workload("W0", "call overhead x+1", "benchmarks/call_overhead.dl", "add_one", normal((1,)), lambda x: x + 1),
    Workload("W1", "LSTM cell tail", "benchmarks/lstm_tail.dl", "lstm_tail", normal(*[(64, 1024)] * 5), np_lstm_tail),
    Workload("W2", "softmax chain x20", "benchmarks/softmax_chain20.dl", "softmax_chain", normal((1000,)), np_softmax_chain(20), chain=20),
    Workload("W2", "softmax chain x200", "benchmarks/softmax_chain200.dl", "softmax_chain", normal((1000,)), np_softmax_chain(200), chain=200),
    Workload("W3", "MLP B=1", "examples/mlp.dl", "mlp", mlp_inputs(1), np_mlp, mlp_flops(1)),
    Workload("W3", "MLP B=64", "benchmarks/mlp_b64.dl", "mlp", mlp_inputs(64), np_mlp, mlp_flops(64)),
    Workload("W4", "matmul 1024^3", "benchmarks/matmul.dl", "matmul", normal((1024, 1024), (1024, 1024)), np.matmul, 2.0 * 1024**3),
    Workload("W5", "conv2d 64x56x56 k3", "benchmarks/conv2d.dl", "conv2d", normal((1, 64, 56, 56), (64, 64, 3, 3), scale=0.1), np_conv2d, 2.0 * 64 * 64 * 9 * 56 * 56),
    Workload("W6", "MLP training step B=64", "benchmarks/mlp_train.dl", "train_step", train_inputs, np_train_step, 3 * mlp_flops(64)),
    Workload("W7", "LayerNorm + GELU", "benchmarks/layernorm_gelu.dl", "layernorm_gelu", layernorm_inputs, np_layernorm_gelu),
    Workload("W10", "LSTM step, 4 gate dots", "benchmarks/lstm_step.dl", "lstm_step", normal(*[(64, 1024)] * 2, *[(1024, 1024)] * 4, scale=0.05), np_lstm_step, 8.0 * 64 * 1024 * 1024),
    Workload("W11", "attention, Q/K/V dots", "benchmarks/attention.dl", "attention", normal((128, 512), *[(512, 512)] * 3, scale=0.05), np_attention, 2.0 * 128 * 512 * (3 * 512 + 2 * 128)),
    Workload("W10c", "W10, weights bound", "benchmarks/lstm_step.dl", "lstm_step", normal(*[(64, 1024)] * 2, *[(1024, 1024)] * 4, scale=0.05), np_lstm_step, 8.0 * 64 * 1024 * 1024, constants=("wf", "wi", "wj", "wo")),
    Workload("W11c", "W11, weights bound", "benchmarks/attention.dl", "attention", normal((128, 512), *[(512, 512)] * 3, scale=0.05), np_attention, 2.0 * 128 * 512 * (3 * 512 + 2 * 128), constants=("wq", "wk", "wv")),
    Workload("W12", "Inception block 3a", "benchmarks/inception.dl", "inception", normal((1, 192, 28, 28), (128, 96, 3, 3), (32, 16, 5, 5), (32, 192, 1, 1), scale=0.1), np_inception, 2.0 * 784 * (192 * 176 + 96 * 128 * 9 + 16 * 32 * 25 + 192 * 32)),
]  # fmt: skip


# -- driver ---------------------------------------------------------------------------


def compile_source(
    text: str, filename: str, threads: int, constants: dict[str, Any] | None = None
) -> tuple[Any, float, float, float]:
    """Compile three times; return the module and the cold, memory-cached and
    disk-cached compile times."""
    import dlc
    from dlc.runtime import cache

    times = []
    compiled = None
    for _ in range(3):
        start = time.perf_counter()
        module = dlc.compile(text, filename=filename, num_threads=threads, constants=constants)
        times.append(time.perf_counter() - start)
        compiled = compiled or module
        if len(times) == 2:
            cache.clear_memory()  # the third compile reads the disk entry
    return compiled, times[0], times[1], times[2]


def time_peer(peer: Peer, w: Workload, inputs: Arrays, want: Any) -> float | str:
    """The peer's median seconds on the workload, or the word its cell shows instead."""
    if not peer.installed():
        return "not installed"
    try:
        prepared = peer.prepare(w, inputs)
        if prepared is None:
            return "-"
        fn, args = prepared
        if max_error(fn(*args), want) >= TOLERANCE:
            return "mismatch"
        return median_seconds(fn, args)
    except Exception as e:  # a twin the peer rejects: report it, keep going
        print(
            f"    ({peer.name} failed on {w.id} {w.title}: {type(e).__name__}: {e})",
            file=sys.stderr,
        )
        return "failed"


def o3_cell(w: Workload, text: str, threads: int, inputs: Arrays, want: Any, o2: float) -> str:
    """dlc at opt_level=3 (the superoptimizer on): µs, opt_level 2 / 3, what fired."""
    import dlc

    constants, inputs = w.bound(inputs)
    compiled = dlc.compile(
        text, filename=w.source, num_threads=threads, opt_level=3, constants=constants
    )
    fn = compiled[w.entry]
    error = max_error(fn(*inputs), want)
    o3 = median_seconds(fn, inputs)
    stats = compiled.pass_statistics().get("superoptimize", {})
    fired = stats.get("substitutions applied", 0)
    check = "" if error < TOLERANCE else f" MISMATCH {error:.2g}"
    return f" | O3 {o3 * 1e6:10.1f} O2/O3 {o2 / o3:5.2f}x subst {fired}{check}"


def run_workload(
    w: Workload, peers: list[Peer], threads: int, o3: bool = False
) -> tuple[str, dict[str, float]]:
    """One report line (timings, or why the workload was skipped) and the seconds of
    every column that has a number."""
    from dlc.diagnostics import DiagnosticError

    label = f"{w.id:3} {w.title:24}"
    text = (ROOT / w.source).read_text()
    try:
        inputs = w.inputs(np.random.default_rng(0))
        constants, own = w.bound(inputs)
        compiled, first, second, disk = compile_source(text, w.source, threads, constants)
        fn = compiled[w.entry]
        want = w.numpy(*inputs)
        error = max_error(fn(*own), want)
    except DiagnosticError as e:
        return f"{label} skipped: dlc cannot compile it yet: {e.message}", {}
    except (NotImplementedError, TypeError, ValueError) as e:
        return f"{label} skipped: {type(e).__name__}: {e}", {}
    seconds = {"dlc": median_seconds(fn, own)}
    cells = ""
    for peer in peers:
        result = time_peer(peer, w, inputs, want)
        cells += cell(seconds["dlc"], result)
        if not isinstance(result, str):
            seconds[peer.name] = result
    gflops = f"{w.flops / seconds['dlc'] / 1e9:7.1f}" if w.flops else "      -"
    nests = compiled.stats(w.entry)["loop_nests"]
    check = "ok" if error < TOLERANCE else f"MISMATCH max rel err {error:.2g}"
    line = (
        f"{label} {seconds['dlc'] * 1e6:10.1f}{cells} {gflops}"
        f" {first * 1e3:8.0f} {second * 1e3:8.0f} {disk * 1e3:8.0f} {nests:>5}  {check}"
    )
    if o3:
        line += o3_cell(w, text, threads, inputs, want, seconds["dlc"])
    return line, seconds


def report_gflops(rows: list[tuple[Workload, dict[str, float]]], names: list[str]) -> None:
    """GFLOP/s of every column, for the workloads with a FLOP count."""
    rows = [(w, s) for w, s in rows if w.flops and s]
    if not rows:
        return
    print(f"\nGFLOP/s\n{'id':3} {'workload':24}" + "".join(f" {n:>8}" for n in names))
    for w, seconds in rows:
        assert w.flops is not None
        values = "".join(
            f" {w.flops / seconds[n] / 1e9:8.1f}" if n in seconds else f" {'-':>8}" for n in names
        )
        print(f"{w.id:3} {w.title:24}{values}")


def report_ceiling(w4: Workload, threads: int) -> None:
    """W4 against NumPy's matmul on OpenBLAS's AVX-512 kernel, at `threads` and 1 thread."""
    print(
        "\nW4 ceiling, GFLOP/s: NumPy's matmul 1024³ in subprocesses on N threads, 'ceiling' on"
        f" OpenBLAS's AVX-512 kernel (OPENBLAS_CORETYPE={bench_host.CEILING_CORETYPE},"
        " OPENBLAS_L2_SIZE unset), 'numpy' on this environment's kernel; dlc on N threads"
    )
    import dlc

    if not bench_host.host_has_avx512():
        print("  not measured: this CPU has no AVX-512")
        return
    print(f"{'N':>7} {'ceiling':>8} {'numpy':>8} {'dlc':>8} {'dlc/ceiling':>11}   ceiling's kernel")
    text = (ROOT / w4.source).read_text()
    inputs = w4.inputs(np.random.default_rng(0))
    assert w4.flops is not None
    for n in sorted({threads, 1}, reverse=True):
        try:
            ceiling, kernel = bench_host.matmul_subprocess(n, bench_host.CEILING_CORETYPE)
            numpy, _ = bench_host.matmul_subprocess(n, None)
        except (RuntimeError, OSError, ValueError) as e:
            print(f"{n:>7} subprocess failed: {e}")
            continue
        fn = dlc.compile(text, filename=w4.source, num_threads=n)[w4.entry]
        gflops = w4.flops / median_seconds(fn, inputs) / 1e9
        kernel = kernel or "unknown (no threadpoolctl)"
        print(
            f"{n:>7} {ceiling:8.1f} {numpy:8.1f} {gflops:8.1f} {gflops / ceiling:10.0%}   {kernel}"
        )


def make_peers(names: str, threads: int, cores: int) -> list[Peer]:
    factories: dict[str, Callable[[], Peer]] = {
        "np": lambda: NumPyPeer(threads),
        "ort": lambda: OnnxRuntimePeer(threads),
        "jax": lambda: JaxPeer(threads, cores),
        "torch": lambda: TorchPeer(threads),
        "tcomp": lambda: TorchPeer(threads, compiled=True),
    }
    unknown = set(names.split(",")) - factories.keys()
    if unknown:
        raise SystemExit(f"bench: unknown peers {sorted(unknown)}; known: {ALL_PEERS}")
    return [factories[name]() for name in names.split(",")]


def print_header(peers: list[Peer], threads: int, cores: int) -> None:
    import dlc

    cpu = bench_host.cpu_model()
    avx512 = "yes" if bench_host.host_has_avx512() else "no"
    print(
        f"threads: {threads} ({cores} cores this process may use); each system's line below says how"
    )
    print(f"cpu: {cpu}; AVX-512: {avx512}")
    print(f"dlc {dlc.__version__}: compiled with num_threads={threads}")
    openblas_env = " ".join(
        f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("OPENBLAS_")
    )
    print(f"blas: numpy {np.__version__}, {bench_host.numpy_blas()}; env: {openblas_env or 'none'}")
    for peer in peers:
        print(f"{peer.name:5} = {peer.status()}")
    columns = "".join(f" {peer.name + ' µs':>10} {'dlc/' + peer.name:>9}" for peer in peers)
    print(
        f"\n{'id':3} {'workload':24} {'dlc µs':>10}{columns} {'GFLOP/s':>7}"
        f" {'cold ms':>8} {'again ms':>8} {'disk ms':>8} {'nests':>5}  check"
    )


def main(argv: Sequence[str] | None = None) -> int:
    from dlc.runtime.native import default_threads

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated workload ids, e.g. W0,W3")
    parser.add_argument("--threads", type=int, default=default_threads(),
                        help="threads of every system (default: DLC_NUM_THREADS, else the cores)")  # fmt: skip
    parser.add_argument("--peers", default=DEFAULT_PEERS, help=f"columns, of {ALL_PEERS}")
    parser.add_argument("--o3", action="store_true",
                        help="also time opt_level=3 (superoptimize) and print opt_level 2 / 3")  # fmt: skip
    args = parser.parse_args(argv)
    wanted = set(args.only.split(",")) if args.only else None
    if "DLC_CACHE_DIR" not in os.environ:  # cold first compiles, nothing left behind
        os.environ["DLC_CACHE_DIR"] = tempfile.mkdtemp(prefix="dlc-bench-cache-")
        atexit.register(shutil.rmtree, os.environ["DLC_CACHE_DIR"], ignore_errors=True)
    cores = len(os.sched_getaffinity(0))
    peers = make_peers(args.peers, args.threads, cores)
    rows = []
    with bench_host.blas_threads(args.threads):
        print_header(peers, args.threads, cores)
        for w in WORKLOADS:
            if wanted is None or w.id in wanted:
                line, seconds = run_workload(w, peers, args.threads, args.o3)
                print(line, flush=True)
                rows.append((w, seconds))
        report_gflops(rows, ["dlc", *(peer.name for peer in peers)])
        run_models({m.id for m in MODELS} & wanted if wanted else set(), args.threads)
    if wanted is None or "W4" in wanted:
        report_ceiling(next(w for w in WORKLOADS if w.id == "W4"), args.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
