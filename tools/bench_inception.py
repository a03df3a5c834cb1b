"""W12 (benchmarks/inception.dl, GoogLeNet's Inception block 3a): its constant 1x1
kernels and its twins for NumPy, onnxruntime, jax and PyTorch.

The block's inputs are x (1, 192, 28, 28) and the parameter kernels k2 (128, 96, 3, 3),
k3 (32, 16, 5, 5), k4 (32, 192, 1, 1); the three 1x1 kernels that read x are constants
(`kernel(out, branch)`, the formula in the .dl file's header), so every twin builds
them the same way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# (out channels, branch index) of the constant 1x1 kernels over x: 1x1, 3x3 reduce,
# 5x5 reduce
CONSTANT = ((64, 0), (96, 1), (16, 2))


def kernel(out: int, branch: int) -> np.ndarray:
    """The outer product a·b of benchmarks/inception.dl, as an (out, 192, 1, 1) kernel."""
    a = ((7 * np.arange(out) + 3 * branch) % 11 - 5) / 8
    b = ((5 * np.arange(192) + branch) % 13 - 6) / 64
    return np.outer(a, b).astype(np.float32)[:, :, None, None]


def np_conv2d(x: np.ndarray, k: np.ndarray, pad: int = 1) -> np.ndarray:
    """NCHW · OIHW, stride 1, `pad` zeros on each side."""
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, k.shape[2:], axis=(2, 3))
    out = np.tensordot(windows, k, axes=([1, 4, 5], [1, 2, 3]))  # (n, h, w, o)
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2))


def np_inception(x: np.ndarray, k2: np.ndarray, k3: np.ndarray, k4: np.ndarray) -> np.ndarray:
    def conv(v: np.ndarray, k: np.ndarray) -> np.ndarray:
        return np.maximum(np_conv2d(v, k, k.shape[2] // 2), 0)

    k1, k2r, k3r = (kernel(*c) for c in CONSTANT)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    pooled = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3)).max((4, 5))
    branches = [conv(x, k1), conv(conv(x, k2r), k2), conv(conv(x, k3r), k3), conv(pooled, k4)]
    return np.concatenate(branches, axis=1)


def onnx_nodes() -> list[Any]:
    """The block over inputs in0..in3 (x, k2, k3, k4), output `out` (1, 256, 28, 28)."""
    from onnx import helper, numpy_helper

    def conv(x: str, k: str, out: str, pad: int) -> list[Any]:
        pads = [pad] * 4
        return [
            helper.make_node("Conv", [x, k], [out + "_c"], pads=pads),
            helper.make_node("Relu", [out + "_c"], [out]),
        ]

    nodes = [
        helper.make_node("Constant", [], [f"k{i}"], value=numpy_helper.from_array(kernel(*c)))
        for i, c in enumerate(CONSTANT)
    ]
    nodes += conv("in0", "k0", "b1", 0) + conv("in0", "k1", "r2", 0) + conv("r2", "in1", "b2", 1)
    nodes += conv("in0", "k2", "r3", 0) + conv("r3", "in2", "b3", 2)
    pool = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    nodes += [helper.make_node("MaxPool", ["in0"], ["p4"], **pool)]
    nodes += conv("p4", "in3", "b4", 0)
    return [*nodes, helper.make_node("Concat", ["b1", "b2", "b3", "b4"], ["out"], axis=1)]


def jax_inception() -> Any:
    import jax.numpy as jnp
    from jax import lax

    k1, k2r, k3r = (jnp.asarray(kernel(*c)) for c in CONSTANT)

    def conv(v: Any, k: Any) -> Any:
        p = k.shape[2] // 2
        return jnp.maximum(lax.conv_general_dilated(v, k, (1, 1), ((p, p), (p, p))), 0)

    def block(x: Any, k2: Any, k3: Any, k4: Any) -> Any:
        pad = ((0, 0), (0, 0), (1, 1), (1, 1))
        pooled = lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 3, 3), (1, 1, 1, 1), pad)
        branches = [conv(x, k1), conv(conv(x, k2r), k2), conv(conv(x, k3r), k3), conv(pooled, k4)]
        return jnp.concatenate(branches, axis=1)

    return block


def torch_inception() -> Any:
    import torch
    import torch.nn.functional as F

    k1, k2r, k3r = (torch.from_numpy(kernel(*c)) for c in CONSTANT)

    def conv(v: Any, k: Any) -> Any:
        return F.relu(F.conv2d(v, k, padding=k.shape[2] // 2))

    def block(x: Any, k2: Any, k3: Any, k4: Any) -> Any:
        pooled = F.max_pool2d(x, 3, stride=1, padding=1)
        branches = [conv(x, k1), conv(conv(x, k2r), k2), conv(conv(x, k3r), k3), conv(pooled, k4)]
        return torch.cat(branches, dim=1)

    return block
