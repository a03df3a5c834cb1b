"""The speedup a model's parallel loops allow on N threads, from its schedules alone.

    python tools/thread_balance.py --zoo ~/.cache/dlc-zoo resnet50 bert_base --threads 2,4
    python tools/thread_balance.py model.onnx --target haswell

Each nest with a parallel loop runs its iterations in libgomp's dynamic chunks
(`CHUNKS_PER_THREAD` per thread, dlc/lowering/loop_to_llvm/parallel.py); the last
iteration of a blocked loop may be a short block. Handing the chunks in order to
whichever thread is free first gives the busiest thread's share of the nest; the
model's ideal speedup on N threads is its work (`schedule_policy.work`, summed over
the scheduled nests) over the work weighted by those shares (nests without a parallel
loop count whole). Fork and join costs, memory bandwidth and other processes are left
out: the number says how evenly the schedules split, measured on any host, busy or
not (2-thread wall times on a shared 2-core host say little). Nests with an empty
schedule (a product's epilogue members, small plain nests) are left out.
"""

from __future__ import annotations

import argparse
import heapq
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))


def busiest_share(sizes: Sequence[int], threads: int, per_thread: int = 4) -> float:
    """The share of the iterations' total size (`sizes`, in order) the busiest of
    `threads` threads runs, chunks of ceil(len / (threads * per_thread)) iterations
    handed out in order to the thread free first."""
    count = len(sizes)
    size = max(1, -(-count // (threads * per_thread)))
    free = [(0, t) for t in range(threads)]
    for start in range(0, count, size):
        done, t = heapq.heappop(free)
        heapq.heappush(free, (done + sum(sizes[start : start + size]), t))
    total = sum(sizes)
    return max(done for done, _ in free) / total if total else 1.0


def nest_shares(module: object, threads: int) -> list[tuple[int, float]]:
    """(work, busiest thread's share) of each scheduled compute of a tensor-level module."""
    from dlc.dialects import tensor
    from dlc.lowering.loop_to_llvm.parallel import CHUNKS_PER_THREAD
    from dlc.passes.tensor.schedule_policy import work

    found = []
    for op in module.walk():  # type: ignore[attr-defined]
        if not isinstance(op, tensor.ComputeOp) or op.schedule is None:
            continue
        schedule = op.schedule
        if str(schedule) == "#schedule.nest<>":
            continue
        loops = schedule.loops(op.domain, op.reduction_extents)
        chosen = [lp for lp in loops if lp.name in schedule.parallel_loops]
        if not chosen or threads == 1:
            found.append((work(op), 1.0))
            continue
        lp = chosen[0]
        count = -(-lp.block // lp.step)
        sizes = [lp.step] * (count - 1) + [lp.block - lp.step * (count - 1)]
        found.append((work(op), busiest_share(sizes, threads, CHUNKS_PER_THREAD)))
    return found


def ideal_speedup(shares: Sequence[tuple[int, float]]) -> float:
    total = sum(w for w, _ in shares)
    busiest = sum(w * s for w, s in shares)
    return total / busiest if busiest else 1.0


def _tensor_level(name: str, zoo: Path | None, target: str) -> object:
    import dlc.onnx
    from dlc.api import compile_graph_module

    path = Path(name)
    if not path.exists():
        import bench_model_table

        found = bench_model_table.locate(name, zoo)
        if found is None:
            raise SystemExit(f"{name}: no such file or model (--zoo DIR?)")
        path = found[0]
    compiled = compile_graph_module(dlc.onnx.load(path), target_cpu=target)
    return compiled.ir_module("tensor")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="ONNX files or bench_model_table names")
    parser.add_argument("--zoo", type=Path, help="tools/model_zoo.py's cache directory")
    parser.add_argument("--threads", default="2,4", help="thread counts, e.g. 2,4")
    parser.add_argument("--target", default="host", help="target_cpu to schedule for")
    args = parser.parse_args(argv)
    counts = [int(t) for t in args.threads.split(",")]
    for name in args.models:
        module = _tensor_level(name, args.zoo, args.target)
        cells = [f"{n} threads {ideal_speedup(nest_shares(module, n)):.2f}" for n in counts]
        print(f"{name}: ideal speedup " + ", ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
