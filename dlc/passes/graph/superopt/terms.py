"""The term language of substitutions: small tensor programs over symbolic shapes.

Terms are nested tuples `(op, arg, ...)` over named inputs with symbolic shapes (a pair
`(d, e)` records where a concatenation joined its parts), printed and parsed as
s-expressions, evaluated on NumPy arrays by `evaluate`. The ops and their shape rules
(a table): docs/design/superoptimizer.md, "Terms".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlc.semantics.tensor import convolve


@dataclass(frozen=True)
class Window:
    """The spatial result size along `axis` of a `conv` (over `base`, kernel `extent`)
    or a `maxpool` (over `base`) under the rule's configuration."""

    kind: str  # "conv" or "pool"
    base: Dim
    extent: Dim | None
    axis: int


Dim = str | tuple["Dim", "Dim"] | Window
Shape = tuple[Dim, ...]
Term = str | tuple[Any, ...]

BINARY = ("ewadd", "ewmul", "smul", "matmul", "concat0", "concat1", "conv")
UNARY = ("transpose", "relu", "split0a", "split0b", "split1a", "split1b", "maxpool")
COMMUTATIVE = ("ewadd", "ewmul")
SPLITS = ("split0a", "split0b", "split1a", "split1b")
WINDOWED = ("conv", "maxpool")
# the configuration sizes evaluation reads (see the module docstring)
CONFIG = ("@stride", "@pad", "@pwin", "@pstride")


def infer(op: str, shapes: Sequence[Shape]) -> Shape | None:
    """The symbolic result shape of `op` on operands of `shapes`, or None if ill-typed."""
    if any(len(s) not in (0, 2, 4) for s in shapes):
        return None
    if op in ("ewadd", "ewmul"):
        x, y = shapes
        return x if x == y and x else None
    if op == "smul":
        x, s = shapes
        return x if x and s == () else None
    if any(not s for s in shapes):
        return None
    if op in ("matmul", "transpose") and any(len(s) != 2 for s in shapes):
        return None
    if op in WINDOWED and any(len(s) != 4 for s in shapes):
        return None
    if op == "matmul":
        x, y = shapes
        return (x[0], y[1]) if x[1] == y[0] else None
    if op == "conv":
        x, k = shapes
        if x[1] != k[1]:
            return None
        return (x[0], k[0], Window("conv", x[2], k[2], 2), Window("conv", x[3], k[3], 3))
    if op in ("concat0", "concat1"):
        return infer_concat(int(op[6]), *shapes)
    (x,) = shapes
    if op == "transpose":
        return (x[1], x[0])
    if op == "relu":
        return x
    if op == "maxpool":
        return (x[0], x[1], Window("pool", x[2], None, 2), Window("pool", x[3], None, 3))
    axis, half = int(op[5]), "ab".index(op[6])
    split = x[axis]
    if not isinstance(split, tuple):
        return None
    return tuple(split[half] if i == axis else d for i, d in enumerate(x))


def infer_concat(axis: int, x: Shape, y: Shape) -> Shape | None:
    """x and y joined along `axis`: equal ranks, equal other dimensions."""
    if len(x) != len(y) or any(a != b for i, (a, b) in enumerate(zip(x, y)) if i != axis):
        return None
    return tuple((x[i], y[i]) if i == axis else d for i, d in enumerate(x))


def dim_value(d: Dim, sizes: Mapping[str, int]) -> int:
    """The size of a symbolic dimension under `sizes` (variable -> size)."""
    if isinstance(d, str):
        return sizes[d]
    if isinstance(d, Window):
        return window_value(d, sizes)
    return dim_value(d[0], sizes) + dim_value(d[1], sizes)


def window_value(d: Window, sizes: Mapping[str, int]) -> int:
    """A bound window size (the search binds them by their text), else its value under
    the configuration sizes (symmetric padding, no dilation)."""
    key = show_dim(d)
    if key in sizes:
        return sizes[key]
    base = dim_value(d.base, sizes)
    if d.kind == "pool":
        return (base - sizes["@pwin"]) // sizes["@pstride"] + 1
    assert d.extent is not None
    extent = dim_value(d.extent, sizes)
    return (base + 2 * sizes["@pad"] - extent) // sizes["@stride"] + 1


def concrete(shape: Shape, sizes: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(dim_value(d, sizes) for d in shape)


def split_point(op: str, operand: Shape, sizes: Mapping[str, int]) -> int:
    """Where `split0a`/… cuts its operand: the size of the first part of the pair."""
    pair = operand[int(op[5])]
    assert isinstance(pair, tuple)
    return dim_value(pair[0], sizes)


def apply_op(
    op: str, args: Sequence[np.ndarray], cut: int = 0, config: Mapping[str, int] | None = None
) -> np.ndarray:
    """`op` on NumPy arrays; `cut` is the split point of a split, `config` the
    configuration sizes of `conv` and `maxpool`."""
    if op == "conv":
        assert config is not None
        return conv(args[0], args[1], config["@stride"], config["@pad"])
    if op == "maxpool":
        assert config is not None
        return maxpool(args[0], config["@pwin"], config["@pstride"])
    table: dict[str, Callable[..., np.ndarray]] = {
        "ewadd": lambda x, y: x + y,
        "ewmul": lambda x, y: x * y,
        "smul": lambda x, s: x * s,
        "matmul": lambda x, y: x @ y,
        "concat0": lambda x, y: np.concatenate([x, y], axis=0),
        "concat1": lambda x, y: np.concatenate([x, y], axis=1),
        "transpose": lambda x: np.ascontiguousarray(x.T),
        "relu": lambda x: np.maximum(x, 0),
        "split0a": lambda x: x[:cut],
        "split0b": lambda x: x[cut:],
        "split1a": lambda x: x[:, :cut],
        "split1b": lambda x: x[:, cut:],
    }
    return table[op](*args)


def conv(x: np.ndarray, k: np.ndarray, stride: int, pad: int) -> np.ndarray:
    """dlc's `convolve` (the reference interpreter's) with square strides and padding."""
    cfg = {
        "strides": [stride] * 2,
        "padding": [pad] * 4,
        "left_dilation": [1, 1],
        "right_dilation": [1, 1],
        "groups": [1],
    }
    spatial = [(n + 2 * pad - r) // stride + 1 for n, r in zip(x.shape[2:], k.shape[2:])]
    return convolve(x, k, cfg, (x.shape[0], k.shape[0], *spatial))


def maxpool(x: np.ndarray, window: int, stride: int) -> np.ndarray:
    """Max over each window × window box of the two spatial dimensions, no padding."""
    boxes = np.lib.stride_tricks.sliding_window_view(x, (window, window), axis=(2, 3))
    return boxes[:, :, ::stride, ::stride].max(axis=(4, 5))


def subterms(roots: Sequence[Term]) -> list[Term]:
    """Every distinct compound subterm of `roots`, operands before users (iterative)."""
    order: list[Term] = []
    seen: set[Term] = set()
    stack: list[tuple[Term, bool]] = [(t, False) for t in reversed(roots)]
    while stack:
        t, done = stack.pop()
        if isinstance(t, str) or (t in seen and not done):
            continue
        if done:
            if t not in seen:
                seen.add(t)
                order.append(t)
            continue
        stack.append((t, True))
        stack.extend((a, False) for a in reversed(t[1:]))
    return order


def shapes_of(roots: Sequence[Term], inputs: Mapping[str, Shape]) -> dict[Term, Shape] | None:
    """The symbolic shape of every subterm (inputs included), or None if one is ill-typed."""
    if any(isinstance(r, str) and r not in inputs for r in roots):
        return None
    shapes = dict[Term, Shape](inputs.items())
    for t in subterms(roots):
        if any(a not in shapes for a in t[1:]):
            return None  # an undeclared input
        s = infer(t[0], [shapes[a] for a in t[1:]])
        if s is None:
            return None
        shapes[t] = s
    return shapes


def evaluate(
    roots: Sequence[Term],
    inputs: Mapping[str, Shape],
    values: Mapping[str, np.ndarray],
    sizes: Mapping[str, int],
) -> list[np.ndarray]:
    """The values of `roots` given input `values` for the dimension `sizes`."""
    shapes = shapes_of(roots, inputs)
    if shapes is None:
        raise ValueError(f"ill-typed term among {[show(r) for r in roots]}")
    env = dict[Term, np.ndarray](values.items())
    for t in subterms(roots):
        cut = split_point(t[0], shapes[t[1]], sizes) if t[0] in SPLITS else 0
        env[t] = apply_op(t[0], [env[a] for a in t[1:]], cut, sizes)
    return [env[r] for r in roots]


def random_inputs(
    inputs: Mapping[str, Shape],
    sizes: Mapping[str, int],
    rng: np.random.Generator,
    dtype: type = np.int64,
) -> dict[str, np.ndarray]:
    """Random values for `inputs`: small integers (exact) or standard normal floats."""
    out: dict[str, np.ndarray] = {}
    for name, shape in sorted(inputs.items()):
        dims = concrete(shape, sizes)
        if dtype is np.int64:
            # nonzero, so that no product (a scalar above all) vanishes by chance
            magnitude = rng.integers(1, 6, size=dims, dtype=np.int64)
            out[name] = magnitude * rng.choice(np.array([-1, 1], dtype=np.int64), size=dims)
        else:
            out[name] = rng.standard_normal(dims)
    return out


def variables(inputs: Mapping[str, Shape]) -> list[str]:
    """The dimension variables of `inputs`' shapes, sorted."""
    found: set[str] = set()
    stack: list[Dim] = [d for s in inputs.values() for d in s]
    while stack:
        d = stack.pop()
        if isinstance(d, str):
            found.add(d)
        elif isinstance(d, Window):
            stack.extend(e for e in (d.base, d.extent) if e is not None)
        else:
            stack.extend(d)
    return sorted(found)


def windowed(roots: Sequence[Term]) -> bool:
    """Whether `roots` contain a `conv` or a `maxpool` (their evaluation needs a config)."""
    return any(t[0] in WINDOWED for t in subterms(roots))


# -- text -------------------------------------------------------------------------


def show(t: Term) -> str:
    """`(op arg ...)`, iteratively."""
    tokens: list[str] = []
    stack: list[Term | None] = [t]
    while stack:
        item = stack.pop()
        if item is None:
            tokens.append(")")
        elif isinstance(item, str):
            tokens.append(item)
        else:
            tokens.append("(" + item[0])
            stack.append(None)
            stack.extend(reversed(item[1:]))
    return " ".join(tokens).replace(" )", ")")


def parse(text: str) -> Term:
    """The term of an s-expression (`ValueError` when malformed)."""
    tokens = text.replace("(", " ( ").replace(")", " ) ").split()
    stack: list[list[Any]] = [[]]
    for tok in tokens:
        if tok == "(":
            stack.append([])
        elif tok == ")":
            if len(stack) < 2 or not stack[-1]:
                raise ValueError(f"malformed term: {text!r}")
            done = stack.pop()
            stack[-1].append(tuple(done))
        else:
            stack[-1].append(tok)
    if len(stack) != 1 or len(stack[0]) != 1:
        raise ValueError(f"malformed term: {text!r}")
    term = stack[0][0]
    for t in subterms([term]):
        arity = 2 if t[0] in BINARY else 1 if t[0] in UNARY else -1
        if arity != len(t) - 1:
            raise ValueError(f"unknown op or wrong arity in {show(t)!r}")
    return term


def show_dim(d: Dim) -> str:
    if isinstance(d, str):
        return d
    if isinstance(d, Window):
        extent = "" if d.extent is None else "," + show_dim(d.extent)
        return f"{d.kind}{d.axis}[{show_dim(d.base)}{extent}]"
    return f"({show_dim(d[0])}+{show_dim(d[1])})"


def show_shape(s: Shape) -> str:
    """`a b`, `(a+c) b`, or `` for a scalar."""
    return " ".join(show_dim(d) for d in s)


def parse_shape(text: str) -> Shape:
    return tuple(parse_dim(word) for word in text.split())


def parse_dim(text: str) -> Dim:
    """`a` or `(d+e)` (nested), else `ValueError`."""
    if text.isidentifier():
        return text
    if not (text.startswith("(") and text.endswith(")")):
        raise ValueError(f"malformed dimension: {text!r}")
    body, depth = text[1:-1], 0
    for i, ch in enumerate(body):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "+" and depth == 0:
            return (parse_dim(body[:i]), parse_dim(body[i + 1 :]))
    raise ValueError(f"malformed dimension: {text!r}")


def size(roots: Sequence[Term]) -> int:
    """Ops of a multi-output term, a split pair counting once (TASO's split is one op)."""
    ts = subterms(roots)
    halves = {(t[0][:6], t[1]) for t in ts if t[0] in SPLITS}
    return sum(1 for t in ts if t[0] not in SPLITS) + len(halves)
