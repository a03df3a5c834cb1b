"""The NumPy, jax and torch columns of tools/bench.py (jax and torch are optional).

Each twin is the workload written the way a user of that system writes it fast:
built-in ops (`jax.nn.softmax`, `torch.addmm`, `F.layer_norm`, tanh-GELU), `y*y*y`
rather than `y**3`, and for W6 the same manual backward as the NumPy twin (jax: its
`jax.grad`, which jit compiles to the same products). Inputs are converted once, before
timing (`jnp.asarray`, `torch.from_numpy`); jax calls end in `jax.block_until_ready`.

Threads: torch runs on `torch.set_num_threads(threads)`. XLA's CPU client sizes its
thread pool by the cores the process may run on and has no flag for a count, so jax
runs with XLA's default when the bench's thread count is every core, and with
`XLA_FLAGS=--xla_cpu_multi_thread_eigen=false` (single-threaded Eigen kernels) at one
thread; other counts are reported as not limited.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from typing import Any

from bench_common import Arrays, Prepared, Workload
from bench_inception import jax_inception, torch_inception

SINGLE_THREAD_XLA_FLAG = "--xla_cpu_multi_thread_eigen=false"


class NumPyPeer:
    """NumPy (OpenBLAS for the products) on the twin each workload carries."""

    name = "np"

    def __init__(self, threads: int) -> None:
        self.threads = threads

    def installed(self) -> bool:
        return True

    def status(self) -> str:
        import numpy as np

        if importlib.util.find_spec("threadpoolctl") is None:
            return f"numpy {np.__version__}: BLAS threads not limited (no threadpoolctl)"
        return f"numpy {np.__version__}: BLAS limited to {self.threads} threads by threadpoolctl"

    def prepare(self, w: Workload, inputs: Arrays) -> Prepared | None:
        return w.numpy, inputs


def jax_twin(w: Workload) -> Callable[..., Any]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    sigmoid, softmax = jax.nn.sigmoid, jax.nn.softmax

    def lstm_tail(c: Any, f: Any, i: Any, j: Any, o: Any) -> Any:
        new_c = c * sigmoid(f + 1) + sigmoid(i) * jnp.tanh(j)
        return new_c, jnp.tanh(new_c) * sigmoid(o)

    def softmax_chain(x: Any) -> Any:
        for _ in range(w.chain):
            x = softmax(x)
        return x

    def mlp(x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
        return softmax(jax.nn.relu(x @ w1 + b1) @ w2 + b2, axis=1)

    def conv2d(x: Any, k: Any) -> Any:
        return lax.conv_general_dilated(x, k, (1, 1), ((1, 1), (1, 1)))  # NCHW, OIHW

    def loss(params: tuple, x: Any, t: Any) -> Any:
        w1, b1, w2, b2 = params
        logits = jax.nn.relu(x @ w1 + b1) @ w2 + b2
        return -jnp.sum(t * jax.nn.log_softmax(logits, axis=1)) / x.shape[0]

    def train_step(x: Any, t: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
        params = (w1, b1, w2, b2)
        grads = jax.grad(loss)(params, x, t)
        return tuple(p - 0.01 * g for p, g in zip(params, grads))

    def layernorm_gelu(x: Any, gamma: Any, beta: Any) -> Any:
        mean = jnp.mean(x, axis=1, keepdims=True)
        xc = x - mean
        var = jnp.mean(xc * xc, axis=1, keepdims=True)
        y = xc * lax.rsqrt(var + 1e-5) * gamma + beta
        return jax.nn.gelu(y, approximate=True)  # 0.5 y (1 + tanh(√(2/π) (y + 0.044715 y³)))

    def lstm_step(x: Any, c: Any, wf: Any, wi: Any, wj: Any, wo: Any) -> Any:
        return lstm_tail(c, x @ wf, x @ wi, x @ wj, x @ wo)

    def attention(x: Any, wq: Any, wk: Any, wv: Any) -> Any:
        q, k, v = x @ wq, x @ wk, x @ wv
        return softmax(q @ k.T / jnp.sqrt(jnp.float32(x.shape[1])), axis=-1) @ v

    twins = {
        "W0": lambda x: x + 1,
        "W1": lstm_tail,
        "W2": softmax_chain,
        "W3": mlp,
        "W4": jnp.matmul,
        "W5": conv2d,
        "W6": train_step,
        "W7": layernorm_gelu,
        "W10": lstm_step,
        "W11": attention,
        "W12": jax_inception(),
    }
    return twins[w.twin]


class JaxPeer:
    """`jax.jit` of each twin on the CPU backend."""

    name = "jax"

    def __init__(self, threads: int, cores: int) -> None:
        self.threads = threads
        self.xla_threads = "XLA default (every core)"
        if threads == 1:
            flags = os.environ.get("XLA_FLAGS", "")
            if SINGLE_THREAD_XLA_FLAG not in flags:  # read when jax starts: set it first
                os.environ["XLA_FLAGS"] = f"{flags} {SINGLE_THREAD_XLA_FLAG}".strip()
            self.xla_threads = f"XLA_FLAGS={os.environ['XLA_FLAGS']}"
        elif threads != cores:
            self.xla_threads = f"not limited to {threads} (XLA uses all {cores} cores)"
        os.environ.setdefault("JAX_PLATFORMS", "cpu")

    def installed(self) -> bool:
        return importlib.util.find_spec("jax") is not None

    def status(self) -> str:
        if not self.installed():
            return "jax: not installed (pip install -e '.[bench]')"
        import jax

        return f"jax {jax.__version__}: jax.jit + block_until_ready, threads: {self.xla_threads}"

    def prepare(self, w: Workload, inputs: Arrays) -> Prepared | None:
        import jax
        import jax.numpy as jnp

        jitted = jax.jit(jax_twin(w))
        block = jax.block_until_ready

        def call(*args: Any) -> Any:
            return block(jitted(*args))

        return call, [jnp.asarray(a) for a in inputs]


def torch_twin(w: Workload) -> Callable[..., Any]:
    import torch
    import torch.nn.functional as F

    def lstm_tail(c: Any, f: Any, i: Any, j: Any, o: Any) -> Any:
        new_c = c * torch.sigmoid(f + 1) + torch.sigmoid(i) * torch.tanh(j)
        return new_c, torch.tanh(new_c) * torch.sigmoid(o)

    def softmax_chain(x: Any) -> Any:
        for _ in range(w.chain):
            x = torch.softmax(x, 0)
        return x

    def mlp(x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
        return torch.softmax(torch.addmm(b2, torch.relu(torch.addmm(b1, x, w1)), w2), 1)

    def train_step(x: Any, t: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
        z1 = torch.addmm(b1, x, w1)
        h = torch.relu(z1)
        probs = torch.softmax(torch.addmm(b2, h, w2), 1)
        dlogits = (probs - t) * (1.0 / x.shape[0])
        dz1 = (dlogits @ w2.t()).masked_fill_(z1 <= 0, 0.0)
        # w - 0.01·(aᵀ·d) in one addmm; torch.add(w, dw, alpha=-0.01) is miscompiled by
        # torch.compile 2.13's inductor (wrong dw1, dw2), addmm's alpha is not
        return (
            torch.addmm(w1, x.t(), dz1, alpha=-0.01),
            b1 - 0.01 * dz1.sum(0, keepdim=True),
            torch.addmm(w2, h.t(), dlogits, alpha=-0.01),
            b2 - 0.01 * dlogits.sum(0, keepdim=True),
        )

    def layernorm_gelu(x: Any, gamma: Any, beta: Any) -> Any:
        y = F.layer_norm(x, x.shape[1:], gamma.view(-1), beta.view(-1), 1e-5)
        return F.gelu(y, approximate="tanh")

    def lstm_step(x: Any, c: Any, wf: Any, wi: Any, wj: Any, wo: Any) -> Any:
        return lstm_tail(c, x @ wf, x @ wi, x @ wj, x @ wo)

    def attention(x: Any, wq: Any, wk: Any, wv: Any) -> Any:
        q, k, v = x @ wq, x @ wk, x @ wv
        return torch.softmax(q @ k.T / float(x.shape[1]) ** 0.5, dim=-1) @ v

    twins = {
        "W0": lambda x: x + 1,
        "W1": lstm_tail,
        "W2": softmax_chain,
        "W3": mlp,
        "W4": torch.mm,
        "W5": lambda x, k: F.conv2d(x, k, padding=1),
        "W6": train_step,
        "W7": layernorm_gelu,
        "W10": lstm_step,
        "W11": attention,
        "W12": torch_inception(),
    }
    return twins[w.twin]


class TorchPeer:
    """PyTorch eager mode (or `torch.compile` with `compiled=True`) on each twin."""

    def __init__(self, threads: int, compiled: bool = False) -> None:
        self.threads = threads
        self.compiled = compiled
        self.name = "tcomp" if compiled else "torch"

    def installed(self) -> bool:
        return importlib.util.find_spec("torch") is not None

    def status(self) -> str:
        label = "torch.compile" if self.compiled else "torch"
        if not self.installed():
            return f"{label}: not installed (see CONTRIBUTING.md: the CPU wheel of torch)"
        import torch

        how = "torch.compile (inductor)" if self.compiled else "eager"
        return f"{label} {torch.__version__}: {how}, set_num_threads({self.threads}), no grad"

    def prepare(self, w: Workload, inputs: Arrays) -> Prepared | None:
        import torch

        torch.set_num_threads(self.threads)
        torch.set_grad_enabled(False)
        twin = torch_twin(w)
        if self.compiled:
            twin = torch.compile(twin)
        return twin, [torch.from_numpy(a) for a in inputs]
