"""ONNX TfIdfVectorizer on integer tokens (`pool_int64s`; string pools are out of
scope), as onnx's reference counts n-grams:

- the pool holds, for n = 1, 2, ..., the n-grams of size n from `ngram_counts[n-1]`
  on; the k-th n-gram of the pool (over all sizes) counts towards output
  `ngram_indexes[k]`; n-grams of sizes outside [min_gram_length, max_gram_length] are
  never counted, and of equal n-grams only the last in the pool counts;
- an n-gram of size n ≥ 2 is counted at every start i and skip distance
  s = 1 .. max_skip_count + 1 with x[i + j·s] = gram[j] for all j (all inside the
  row); a 1-gram is counted once per matching token;
- mode TF gives the counts, IDF `weights[k]` (or 1) where a count is positive,
  TFIDF `weights[k]` · count (or the count).

Counts are built from comparisons of shifted slices of the row with the n-grams'
tokens, summed in i32, then gathered to the outputs with a constant 0/1 `dot`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.ir import SSAValue

from dlc.dialects.graph_elementwise import SelectOp
from dlc.onnx.emitter import Emitter, ImportProblem, shape_of, tensor_type
from dlc.onnx.node import Converter, Node, Result
from dlc.onnx.ops_math import matmul_of
from dlc.onnx.ops_slice import slice_axis
from dlc.onnx.promote import cast

Grams = dict[tuple[int, ...], int]
"""n-gram tokens -> its position in the pool (the last of equal n-grams)."""


def pool_grams(node: Node) -> tuple[Grams, int]:
    """The countable n-grams of the pool and the number of n-grams in it."""
    pool = node.attr("pool_int64s")
    if pool is None or node.has_attr("pool_strings"):
        raise ImportProblem("only pool_int64s (integer tokens) is supported")
    counts = node.attr("ngram_counts")
    low, high = node.attr("min_gram_length"), node.attr("max_gram_length")
    if not counts or low is None or high is None or not 1 <= low <= high:
        raise ImportProblem("ngram_counts, min_gram_length ≤ max_gram_length are required")
    grams: Grams = {}
    position = 0
    for size, start in enumerate(counts, start=1):
        end = counts[size] if size < len(counts) else len(pool)
        for k in range(max(end - start, 0) // size):
            tokens = tuple(pool[start + k * size : start + (k + 1) * size])
            if low <= size <= high:
                grams[tokens] = position
            position += 1
    return grams, position


def gram_counts(e: Emitter, x: SSAValue, grams: Sequence[tuple[int, ...]], skips: int) -> SSAValue:
    """counts[b, g] of the n-grams `grams` (all of one size n) in the rows of x
    [B, L] (i64), at skip distances 1 .. skips + 1 (just 1 for n = 1)."""
    (batch, length), n = shape_of(x), len(grams[0])
    total = None
    for s in range(1, (skips + 1 if n > 1 else 1) + 1):
        starts = length - (n - 1) * s
        if starts <= 0:
            break
        match = None
        for j in range(n):
            row = e.reshape(slice_axis(e, x, 1, j * s, j * s + starts), (batch, 1, starts))
            tokens = e.constant(np.array([g[j] for g in grams], np.int64).reshape(1, -1, 1))
            equal = e.binary("equal", row, tokens)
            match = equal if match is None else e.binary("and", match, equal)
        assert match is not None
        found = e.reduce(cast(e, match, "i32"), "add", 0, [2], keepdims=False)
        total = found if total is None else e.binary("add", total, found)
    return total if total is not None else e.splat(0, (batch, len(grams)), "i32")


def tfidf(node: Node) -> list[Result]:
    e, x = node.emit, node.input(0)
    dims = shape_of(x)
    if tensor_type(x).dt not in ("i32", "i64") or len(dims) > 2:
        raise ImportProblem("the input must be i32 or i64 tokens of rank ≤ 2")
    mode = node.require("mode", ("TF", "IDF", "TFIDF"), None)
    indexes = node.attr("ngram_indexes") or []
    grams, size = pool_grams(node)
    if len(indexes) < size or min(indexes, default=0) < 0:
        raise ImportProblem(f"ngram_indexes needs {size} non-negative entries")
    outputs = max(indexes) + 1
    weights = node.attr("weights") or []
    if weights and len(weights) < outputs:
        raise ImportProblem(f"weights needs {outputs} entries")
    batch = dims[0] if len(dims) == 2 else 1
    rows = cast(e, e.reshape(x, (batch, dims[-1] if dims else 1)), "i64")
    freq = e.splat(0, (batch, outputs), "i32")
    for n in sorted({len(g) for g in grams}):
        of_size = [g for g in grams if len(g) == n]
        route = np.zeros((len(of_size), outputs), np.int32)
        route[np.arange(len(of_size)), [indexes[grams[g]] for g in of_size]] = 1
        counts = gram_counts(e, rows, of_size, node.attr("max_skip_count", 0))
        freq = e.binary("add", freq, matmul_of(e, counts, e.constant(route)))
    y = _weighted(e, cast(e, freq, "f32"), mode, weights[:outputs])
    return [e.reshape(y, (batch, outputs) if len(dims) == 2 else (outputs,))]


def _weighted(e: Emitter, freq: SSAValue, mode: str, weights: Sequence[float]) -> SSAValue:
    """TF: the counts; IDF: weights[k] (or 1) where a count is positive, else 0; TFIDF:
    weights[k] · count (or the count)."""
    if mode == "TF" or (mode == "TFIDF" and not weights):
        return freq
    if not weights:  # IDF
        return cast(e, e.binary("greaterThan", freq, e.scalar(0.0, "f32")), "f32")
    w = e.broadcast_to(e.constant(np.asarray(weights, np.float32).reshape(1, -1)), shape_of(freq))
    if mode == "TFIDF":
        return e.binary("multiply", freq, w)
    positive = e.binary("greaterThan", freq, e.scalar(0.0, "f32"))
    return e.op(SelectOp, [w, e.splat(0.0, shape_of(freq), "f32"), positive])


CONVERTERS: dict[str, Converter] = {"TfIdfVectorizer": tfidf}
