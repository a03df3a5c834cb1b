"""Find the first kernel whose numbers went wrong (`dlc-bisect`).

`bisect(module, name, inputs)` compiles function `name` once with the value of every
kernel's output returned alongside its result (`kernels.with_checkpoints`: values the
compiled code writes to memory anyway, so fusion and schedules stay as they were), runs
it, and runs the same program in the reference interpreter (`dlc.semantics`) on the
same inputs. Kernel by kernel in program order, each checkpoint's compiled value is
compared with the reference's: the first whose error exceeds the tolerance (both
`ulps` units in the last place and relative error `rtol`, normwise: the largest
difference over the largest reference magnitude) is the finding. The checkpoints of
that kernel are then compiled again at opt_level=0 and with fma off, which tells
whether the optimizations or fused multiply-adds are to blame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from dlc.bisector.kernels import (
    Kernel,
    checkpoint_candidates,
    entry_function,
    instruction_name,
    kernels,
    optimized,
    where,
    with_checkpoints,
)
from dlc.options import Options

__all__ = ["Bisection", "Check", "Kernel", "bisect", "errors"]


@dataclass
class Check:
    """One checkpoint compared: the kernel, the instruction whose value it is, where
    it was written, and the error in ULPs and (normwise) relative error."""

    kernel: Kernel
    index: int  # of the instruction in the entry block
    value: str
    location: str
    ulps: float
    rel: float
    bad: bool


@dataclass
class Bisection:
    """Every check in program order, the first bad one, and that checkpoint's error at
    opt_level=0 and with fma off (None when no check is bad)."""

    checks: list[Check]
    first_bad: Check | None
    at_opt0: Check | None = None
    fma_off: Check | None = None


def errors(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    """(largest distance in ULPs, normwise relative error) of `got` against `want`.
    Integers and bools: the largest absolute difference as "ULPs". NaN where the other
    is not NaN, or different infinities, count as infinite."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return float("inf"), float("inf")
    if want.size == 0:
        return 0.0, 0.0
    if want.dtype.kind != "f":
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        scale = max(float(np.max(np.abs(want.astype(np.float64)))), 1.0)
        return float(diff.max()), float(diff.max()) / scale
    g, w = got.astype(np.float64), want.astype(np.float64)
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    if not np.all(same | (np.isfinite(g) & np.isfinite(w))):
        return float("inf"), float("inf")
    return _ulps(got, want, same), _relative(g, w, same)


def _relative(g: np.ndarray, w: np.ndarray, same: np.ndarray) -> float:
    diff = np.where(same, 0.0, np.abs(g - w))
    scale = float(np.max(np.abs(np.where(np.isfinite(w), w, 0.0))))
    return float(diff.max()) / scale if scale > 0 else float(diff.max())


def _ulps(got: np.ndarray, want: np.ndarray, same: np.ndarray) -> float:
    """The largest distance in representable numbers of `want`'s float type."""
    ints = {2: np.int16, 4: np.int32, 8: np.int64}.get(want.dtype.itemsize)
    if ints is None:
        return 0.0 if np.all(same) else float("inf")
    bits = want.dtype.itemsize * 8

    def ordered(x: np.ndarray) -> np.ndarray:  # monotone in the float's value
        i = np.ascontiguousarray(x, dtype=want.dtype).view(ints).astype(np.float64)
        return np.where(i < 0, -(i + 2.0 ** (bits - 1)), i)

    distance = np.abs(ordered(got) - ordered(want))
    return float(np.where(same, 0.0, distance).max())


def _checks(
    graph: ModuleOp, name: str, found: list[Kernel], inputs: Sequence[Any], compile_options: dict
) -> list[tuple[Kernel, int, np.ndarray, np.ndarray]]:
    """(kernel, instruction, compiled value, reference value) of every checkpoint."""
    from dlc.api import compile_graph_module
    from dlc.semantics.interpreter import run_function

    points = [(k, i) for k in found for i in k.checkpoints]
    program = with_checkpoints(graph, name, [i for _, i in points])
    first = 0 if entry_function(graph, name).function_type.output == _void() else 1
    compiled = compile_graph_module(program, **compile_options)[name](*inputs)
    reference = run_function(program, name, list(inputs))
    return [
        (k, i, np.asarray(compiled[first + n]), np.asarray(reference[first + n]))  # type: ignore[index]
        for n, (k, i) in enumerate(points)
    ]


def _void() -> Any:
    from dlc.dialects.graph_types import TupleType

    return TupleType([])


def bisect(
    module: ModuleOp,
    name: str,
    inputs: Sequence[Any],
    *,
    opt_level: int = 2,
    fma: bool | None = None,
    rtol: float = 1e-4,
    ulps: float = 64,
) -> Bisection:
    """Compare function `name` of graph `module`, compiled at `opt_level`, kernel by
    kernel with the reference interpreter on `inputs` (module docstring)."""
    options = Options(opt_level=opt_level, fma=fma)
    graph = optimized(module, options)
    ops = list(entry_function(graph, name).body.blocks[0].ops)
    wanted = set(checkpoint_candidates(graph, name))
    found = kernels(graph, name, options)
    for kernel in found:
        kernel.checkpoints = [i for i in kernel.checkpoints if i in wanted]
    settings = {"opt_level": opt_level, "fma": fma}
    checks = [
        _check(kernel, i, ops[i], got, want, rtol, ulps)
        for kernel, i, got, want in _checks(graph, name, found, inputs, settings)
    ]
    first = next((c for c in checks if c.bad), None)
    result = Bisection(checks, first)
    if first is None:
        return result
    alone = [Kernel(first.kernel.number, first.kernel.group, [], [first.index])]
    for attr, again in (("at_opt0", {"opt_level": 0}), ("fma_off", {**settings, "fma": False})):
        ((_, i, got, want),) = _checks(graph, name, alone, inputs, again)
        setattr(result, attr, _check(first.kernel, i, ops[i], got, want, rtol, ulps))
    return result


def _check(
    kernel: Kernel,
    index: int,
    op: Any,
    got: np.ndarray,
    want: np.ndarray,
    rtol: float,
    max_ulps: float,
) -> Check:
    distance, rel = errors(got, want)
    bad = distance > max_ulps and rel > rtol
    return Check(kernel, index, instruction_name(op), where(op), distance, rel, bad)
