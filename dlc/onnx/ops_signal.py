"""ONNX DFT (opsets 17 and 20), STFT, the window functions (HannWindow, HammingWindow,
BlackmanWindow) and MelWeightMatrix.

A DFT along one axis is a `dot` with a constant DFT matrix built at import time in
float64: O(n²) work per transformed line, fast through the contraction kernels. The
product runs in f64 whatever the signal's type and is rounded once: a DFT's sums
cancel (a real signal's inverse has exact zeros in its imaginary part), and f32
sums left 1e-6 of the magnitude there, beyond onnx's tolerance (atol 1e-7). The complex dimension (the
last axis: 1 for a real signal, 2 for real and imaginary parts) is folded into the
matrix, so one `dot` maps the (line × part) inputs of a signal to its (frequency ×
part) outputs: forward, inverse (scaled by 1/n), one-sided (the first n/2 + 1
frequencies), and the inverse of a one-sided spectrum (numpy's `irfft`: a real output,
each frequency but the first and the Nyquist one counted twice). `dft_length` pads
with zeros or truncates, as NumPy's `n`. STFT gathers its frames with constant
indices, multiplies them by the window and transforms each frame the same way.

The windows and MelWeightMatrix depend only on their (shape-like) inputs, which must
be constants: they are evaluated at import time by onnx's reference implementation and
become literals where they are read.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import IntAttr
from xdsl.ir import SSAValue

from dlc.dialects import graph_gather as gg
from dlc.dialects.graph_tensor import DotOp
from dlc.onnx import fold
from dlc.onnx.emitter import Emitter, ImportProblem, shape_of, tensor_type
from dlc.onnx.node import Converter, Node, Result
from dlc.onnx.ops_sample import FLOATS, NP_FLOAT, cast, compute_type

MAX_MATRIX = 1 << 24
"""Elements of the largest DFT matrix (n = 2048 complex: 64 MiB in f32)."""
LITERAL_MATRIX = 1 << 16
"""Elements of the largest DFT matrix that is a literal (as `fold-constants` folds);
a larger one is gathered by the program on each call from tables of n values (O(n²)
copies, cheaper than the product) instead of costing the compiler a huge literal."""
MAX_FOLDED = 1 << 22
"""Elements of the largest window or mel matrix evaluated at import time."""


# ---- the DFT matrix -----------------------------------------------------------------


def dft_matrix(
    length: int, parts: int, n: int, inverse: bool, onesided: bool
) -> tuple[np.ndarray, int]:
    """The (length · parts) × (frequencies · parts out) matrix of a DFT of size n over
    `length` input points of `parts` parts each, and the number of output parts (1
    for the inverse of a one-sided spectrum, else 2). Rows and columns are interleaved
    (point, part)."""
    used = min(length, n)
    if inverse and onesided:
        used = min(used, n // 2 + 1)
    j = np.arange(used)[:, None]
    if inverse and onesided:
        k = np.arange(n)[None, :]
    else:
        k = np.arange(n // 2 + 1 if onesided else n)[None, :]
    theta = 2 * np.pi * ((j * k) % n) / n
    cos, sin = np.cos(theta), np.sin(theta)
    matrix = np.zeros((length, parts, k.shape[1], 2))
    sign = 1.0 if inverse else -1.0
    matrix[:used, 0, :, 0], matrix[:used, 0, :, 1] = cos, sign * sin
    if parts == 2:
        matrix[:used, 1, :, 0], matrix[:used, 1, :, 1] = -sign * sin, cos
    if inverse:
        matrix /= n
    if inverse and onesided:  # irfft: the real part of a Hermitian-completed sum
        twice = np.where((np.arange(used) > 0) & (2 * np.arange(used) < n), 2.0, 1.0)
        matrix = matrix[:, :, :, :1] * np.pad(twice, (0, length - used))[:, None, None, None]
    out_parts = matrix.shape[3]
    return matrix.reshape(length * parts, -1), out_parts


def generated_matrix(
    e: Emitter, length: int, parts: int, n: int, inverse: bool, onesided: bool, ct: str
) -> tuple[SSAValue, int]:
    """`dft_matrix` built by the program, for matrices too large to be literals: its
    entries are the n values of cos and ±sin of 2π m / n (tables of n values each, a
    small literal), gathered at m = (j · k) mod n."""
    used = min(length, n // 2 + 1 if inverse and onesided else n)
    count = n if inverse or not onesided else n // 2 + 1
    out_parts = 1 if inverse and onesided else 2
    theta = 2 * np.pi * np.arange(n) / n
    sign = 1.0 if inverse else -1.0
    tables = {(0, 0): np.cos(theta), (0, 1): sign * np.sin(theta),
              (1, 0): -sign * np.sin(theta), (1, 1): np.cos(theta)}  # fmt: skip
    kinds = [(p, q) for p in range(parts) for q in range(out_parts)]
    table = np.concatenate([tables[kind] for kind in kinds]) / (n if inverse else 1)
    j = e.constant(np.arange(used, dtype=np.int64).reshape(used, 1, 1, 1))
    k = e.constant(np.arange(count, dtype=np.int64).reshape(1, 1, count, 1))
    turns = e.binary("modulo", e.binary("multiply", j, k), e.scalar(n, "i64"))
    offsets = n * np.arange(len(kinds), dtype=np.int64).reshape(1, parts, 1, out_parts)
    index = e.binary("add", turns, e.constant(offsets))
    values = e.constant(table.astype(NP_FLOAT[ct]))
    block = e.op(gg.GatherOp, [values, index], axis=IntAttr(0))
    if inverse and onesided:  # irfft: the real part of a Hermitian-completed sum
        twice = np.where((np.arange(used) > 0) & (2 * np.arange(used) < n), 2.0, 1.0)
        factors = e.constant(twice.astype(NP_FLOAT[ct]).reshape(used, 1, 1, 1))
        block = e.binary("multiply", block, factors)
    if used < length:
        zeros = e.splat(0.0, (length - used, parts, count, out_parts), ct)
        block = e.concatenate([block, zeros], 0)
    return e.reshape(block, (length * parts, count * out_parts)), out_parts


def transform(
    e: Emitter, x: SSAValue, axis: int, n: int, inverse: bool, onesided: bool
) -> SSAValue:
    """The DFT of x (…, parts) along `axis` (not the last one) as one `dot`."""
    dims, dt = shape_of(x), tensor_type(x).dt
    rank, parts, length = len(dims), dims[-1], dims[axis]
    count = n if inverse or not onesided else n // 2 + 1
    if length * parts * count * 2 > MAX_MATRIX:
        raise ImportProblem(f"a DFT of {n} points over {length} is too large (O(n²) matrix)")
    ct = "f64"  # cancelling sums (module docstring)
    if length * parts * count * 2 <= LITERAL_MATRIX:
        matrix, out_parts = dft_matrix(length, parts, n, inverse, onesided)
        weights = e.constant(matrix.astype(NP_FLOAT[ct]))
    else:
        weights, out_parts = generated_matrix(e, length, parts, n, inverse, onesided, ct)
    perm = [*(i for i in range(rank - 1) if i != axis), axis, rank - 1]
    front = e.transpose(cast(e, x, ct), perm)
    lead = [dims[i] for i in perm[:-2]]
    rows = e.reshape(front, (int(np.prod(lead)), length * parts))
    y = e.op(DotOp, [rows, weights])
    y = e.reshape(y, (*lead, shape_of(weights)[1] // out_parts, out_parts))
    y = e.transpose(y, [int(i) for i in np.argsort(perm)])
    return cast(e, y, dt)


def _scalar(node: Node, i: int, what: str) -> int | None:
    value = node.constant(i, what)
    if value is None:
        return None
    if value.size != 1:
        raise ImportProblem(f"{what} must be a single value, got shape {list(value.shape)}")
    return int(value.reshape(-1)[0])


def _signal(node: Node) -> SSAValue:
    x = node.input(0)
    dims = shape_of(x)
    if tensor_type(x).dt not in FLOATS:
        raise ImportProblem(f"{node.op_type} of {tensor_type(x).dt} is not supported")
    if len(dims) < 2 or dims[-1] not in (1, 2):
        raise ImportProblem(
            f"the signal's last axis must hold 1 (real) or 2 (complex) parts, got shape "
            f"{list(dims)}"
        )
    return x


def dft(node: Node) -> list[Result]:
    """DFT: axis as an attribute (opset 17, default 1) or a constant input (opset 20,
    default -2); dft_length a constant input."""
    x = _signal(node)
    dims = shape_of(x)
    rank = len(dims)
    if node.opset >= 20:
        given = _scalar(node, 2, "axis")
        axis = -2 if given is None else given
    else:
        axis = int(node.attr("axis", 1))
    axis = node.axis(axis, rank)
    if axis == rank - 1:
        raise ImportProblem("axis must not be the last axis (the real and imaginary parts)")
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    n = _scalar(node, 1, "dft_length")
    if n is None:
        n = 2 * (dims[axis] - 1) if inverse and onesided else dims[axis]
    if n < 1:
        raise ImportProblem(f"dft_length {n} must be positive")
    return [transform(node.emit, x, axis, n, inverse, onesided)]


def stft(node: Node) -> list[Result]:
    """STFT of signal (batch, length, parts): frames of `frame_length` every
    `frame_step`, times the window, transformed (one-sided by default)."""
    e, x = node.emit, _signal(node)
    dims = shape_of(x)
    if len(dims) != 3:
        raise ImportProblem(f"the signal must be (batch, length, parts), got {list(dims)}")
    step = _scalar(node, 1, "frame_step")
    window = node.optional(2)
    size = _scalar(node, 3, "frame_length")
    if step is None or step < 1:
        raise ImportProblem(f"frame_step {step} must be a positive constant")
    if window is not None and len(shape_of(window)) != 1:
        raise ImportProblem(f"the window must be 1-D, got shape {list(shape_of(window))}")
    if size is None:
        size = dims[1] if window is None else shape_of(window)[0]
    if window is not None and shape_of(window)[0] != size:
        raise ImportProblem(f"the window has {shape_of(window)[0]} values, frame_length {size}")
    if not 1 <= size <= dims[1]:
        raise ImportProblem(f"frame_length {size} does not fit a signal of length {dims[1]}")
    frames = 1 + (dims[1] - size) // step
    starts = np.arange(frames, dtype=np.int64)[:, None] * step
    index = e.constant(starts + np.arange(size, dtype=np.int64)[None, :])
    framed = e.op(gg.GatherOp, [x, index], axis=IntAttr(1))
    if window is not None:
        ct = compute_type(x)
        weights = e.reshape(cast(e, window, ct), (1, 1, size, 1))
        framed = cast(e, e.binary("multiply", cast(e, framed, ct), weights), tensor_type(x).dt)
    onesided = bool(node.attr("onesided", 1))
    return [transform(e, framed, 2, size, False, onesided)]


# ---- folded at import ---------------------------------------------------------------


def evaluated(node: Node, what: str) -> list[Result]:
    """The node evaluated by onnx's reference implementation on its inputs, all of
    which must be constants (`what` says why)."""
    constants = [node.constant(i, what) for i in range(len(node.names))]
    node.used.update(a.name for a in node.proto.attribute)
    try:
        outputs = fold.fold(node.proto, constants, node.opset, MAX_FOLDED)
    except ValueError as err:
        raise ImportProblem(str(err)) from None
    return list(outputs)


def window(node: Node) -> list[Result]:
    """HannWindow, HammingWindow, BlackmanWindow of a constant size."""
    return evaluated(node, "size")


def mel_weight_matrix(node: Node) -> list[Result]:
    """MelWeightMatrix of constant bins, length, rate and edges."""
    return evaluated(node, "the parameters")


CONVERTERS: dict[str, Converter] = {
    "DFT": dft,
    "STFT": stft,
    "HannWindow": window,
    "HammingWindow": window,
    "BlackmanWindow": window,
    "MelWeightMatrix": mel_weight_matrix,
}
