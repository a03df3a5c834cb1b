"""Reductions, windows, convolution and linear algebra of the reference interpreter.

A combinator is an opcode (`"add"`, `"and"`, `"subtract"`, ...) or a step function
`(acc, elements) -> acc` over arrays (the interpreter wraps function combinators this
way). Semantics:

* `reduce x by C init i along dims` = fold(i, elements...) where the elements of each
  output position are visited in increasing C order of the reduced dimensions. add,
  multiply, min, max, and, or use numpy's reductions with `initial=i` (same value up to
  floating-point reassociation); every other combinator is a literal left fold.
* `scan x by C along d1, d2, ...` is an inclusive left scan along d1, then along d2, ...
* `reduceWindow x by C init i dims w strides s padding p`: output size per
  `graph_tensor.window_shape`. For `half`/`full`, per dimension the total padding is
  `max((out − 1)·s + w − n, 0)`; the low side gets `total // 2`, the high side the rest;
  padded positions hold `i` (so they enter the fold as extra `i` operands). Each output
  element is `reduce` of its window (window positions in C order).
* `convolve` is cross-correlation (no kernel flip): the input is dilated by
  leftDilation (zeros inserted), padded with zeros by (lo, hi), and the kernel is
  dilated by rightDilation. With g groups, O/g = og output channels per group: output
  channel j·og + o reads input channels [j·C/g, (j+1)·C/g) with kernel row j·og + o
  (kernel rows from (O // g)·g on are unused).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from dlc.dialects.graph_tensor import window_shape
from dlc.semantics.ops import binary

Step = Callable[[np.ndarray, np.ndarray], np.ndarray]
Combinator = str | Step

_UFUNCS: dict[str, np.ufunc] = {
    "add": np.add,
    "multiply": np.multiply,
    "min": np.minimum,
    "max": np.maximum,
    "and": np.logical_and,
    "or": np.logical_or,
}


def _step_of(comb: Combinator) -> Step:
    if isinstance(comb, str):
        return lambda acc, x: binary(comb, acc, x)
    return comb


def reduce(x: np.ndarray, init: np.ndarray, dims: Sequence[int], comb: Combinator) -> np.ndarray:
    axes = tuple(sorted(dims))
    if isinstance(comb, str) and comb in _UFUNCS:
        ufunc = _UFUNCS[comb]
        out = ufunc.reduce(x, axis=axes, dtype=x.dtype, initial=init[()])
        return np.asarray(out, dtype=x.dtype)
    keep = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, keep + list(axes))
    kept_shape = moved.shape[: len(keep)]
    count = int(np.prod(moved.shape[len(keep) :], dtype=np.int64))
    flat = moved.reshape((*kept_shape, count))
    step = _step_of(comb)
    acc = np.full(kept_shape, init, dtype=x.dtype)
    for r in range(count):
        acc = np.asarray(step(acc, flat[..., r]), dtype=x.dtype)
    return acc


def scan(x: np.ndarray, dims: Sequence[int], comb: Combinator) -> np.ndarray:
    out = x
    for d in dims:
        out = _scan_axis(out, d, comb)
    return out


def _scan_axis(x: np.ndarray, axis: int, comb: Combinator) -> np.ndarray:
    if isinstance(comb, str) and comb in _UFUNCS:
        return np.asarray(_UFUNCS[comb].accumulate(x, axis=axis, dtype=x.dtype), dtype=x.dtype)
    out = x.copy()
    view = np.moveaxis(out, axis, 0)
    step = _step_of(comb)
    for i in range(1, view.shape[0]):
        view[i] = step(view[i - 1].copy(), view[i].copy())
    return out


def reduce_window(
    x: np.ndarray,
    init: np.ndarray,
    window: Sequence[int],
    strides: Sequence[int],
    padding: str,
    comb: Combinator,
) -> np.ndarray:
    out_shape = window_shape(x.shape, window, strides, padding)
    if 0 in out_shape:
        return np.zeros(out_shape, dtype=x.dtype)
    pads = window_padding(x.shape, window, strides, padding, out_shape)
    padded = np.pad(x, pads, mode="constant", constant_values=init[()])
    views = np.lib.stride_tricks.sliding_window_view(padded, tuple(window))
    picks = tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(out_shape, strides, strict=True))
    windows = views[picks]
    rank = x.ndim
    return reduce(windows, init, list(range(rank, 2 * rank)), comb)


def window_padding(
    dims: Sequence[int],
    window: Sequence[int],
    strides: Sequence[int],
    padding: str,
    out_shape: Sequence[int],
) -> list[tuple[int, int]]:
    """(low, high) padding per dimension (see the module docstring)."""
    if padding == "none":
        return [(0, 0)] * len(dims)
    pads: list[tuple[int, int]] = []
    for n, w, s, o in zip(dims, window, strides, out_shape, strict=True):
        total = max((o - 1) * s + w - n, 0)
        pads.append((total // 2, total - total // 2))
    return pads


def dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.ndim == 1:
        return np.asarray(np.dot(a, b), dtype=a.dtype)
    return np.asarray(np.matmul(a, b), dtype=a.dtype)


def _dilate(x: np.ndarray, dilation: Sequence[int]) -> np.ndarray:
    """Insert d − 1 zeros between neighbours along each spatial dimension."""
    if all(d == 1 for d in dilation):
        return x
    spatial = [(n - 1) * d + 1 if n else 0 for n, d in zip(x.shape[2:], dilation, strict=True)]
    out = np.zeros((*x.shape[:2], *spatial), dtype=x.dtype)
    out[(slice(None), slice(None), *(slice(None, None, d) for d in dilation))] = x
    return out


def convolve(
    x: np.ndarray, k: np.ndarray, cfg: dict[str, list[int]], out_shape: Sequence[int]
) -> np.ndarray:
    """`cfg` is `graph_tensor.conv_config`; `out_shape` the inferred result shape."""
    out = np.zeros(out_shape, dtype=x.dtype)
    if 0 in out_shape:
        return out
    n = x.ndim - 2
    pads = [(0, 0), (0, 0)] + [(cfg["padding"][2 * i], cfg["padding"][2 * i + 1]) for i in range(n)]
    xp = np.pad(_dilate(x, cfg["left_dilation"]), pads)
    groups = cfg["groups"][0]
    og, cg = k.shape[0] // groups, k.shape[1]
    spatial_out = out_shape[2:]
    for j in range(groups):
        xs = xp[:, j * cg : (j + 1) * cg]
        ks = k[j * og : (j + 1) * og]
        for offset in np.ndindex(*k.shape[2:]):
            picks = tuple(
                slice(o * rd, o * rd + (m - 1) * s + 1, s)
                for o, rd, m, s in zip(
                    offset, cfg["right_dilation"], spatial_out, cfg["strides"], strict=True
                )
            )
            patch = xs[(slice(None), slice(None), *picks)]
            weights = ks[(slice(None), slice(None), *offset)]
            out[:, j * og : (j + 1) * og] += np.einsum("nc...,oc->no...", patch, weights)
    return out


def bit_cast(x: np.ndarray, dtype: np.dtype, shape: Sequence[int]) -> np.ndarray:
    flat = np.ascontiguousarray(x).reshape(-1)
    return flat.view(dtype).reshape(tuple(shape)).copy()
