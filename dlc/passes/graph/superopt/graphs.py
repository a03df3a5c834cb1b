"""The search's view of a block: hash-consed nodes of the term ops, and the way back.

`Pool` interns nodes `(kind, args, attr, shape, dtype)`, so equal subgraphs are one
node and a whole candidate graph is just the tuple of its root node ids (the values
that the block's other instructions and its terminator read). `from_block` converts
the ops the term language covers (terms.py's table) and treats every other value as a
leaf; `to_block` writes a graph back, reusing the original op of every node that
survived and creating the others right before their first reader.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xdsl.ir import Block, Operation, SSAValue

from dlc.dialects.graph import LiteralOp
from dlc.dialects.graph_elementwise import BINARY_OPS, AddOp, MultiplyOp
from dlc.dialects.graph_reduction import ConvolveOp, ReduceWindowOp, conv_config
from dlc.dialects.graph_tensor import ConcatenateOp, DotOp, SliceOp, TransposeOp
from dlc.dialects.graph_types import TensorType, dtype_is_float, dtype_is_numeric
from dlc.passes.graph.fold_constants import WEIGHT_LIMIT, folds_to
from dlc.passes.graph.pass_support import is_splat, splat_value, tensor_of

MaxOp = BINARY_OPS["max"]


# ("conv", strides, padding, left dilation, right dilation) or ("pool", window, strides),
# spatial dimensions only
Config = tuple[str, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True)
class Node:
    """One value: a term op over other nodes, or a `leaf` (attr = its leaf index)."""

    kind: str
    args: tuple[int, ...]
    attr: int  # split point of a split, leaf index of a leaf, a conv's or maxpool's
    # configuration (an index into `Pool.configs`), else 0
    shape: tuple[int, ...]
    dtype: str


@dataclass
class Leaf:
    value: SSAValue
    position: int  # index of the defining op in the block, -1 when defined before it
    constant: bool = False  # a literal that fold-constants can fold ops over


@dataclass
class Pool:
    """Interned nodes; `ready[n]` is the last block position node n's leaves need."""

    nodes: list[Node] = field(default_factory=list)
    index: dict[Node, int] = field(default_factory=dict)
    ready: list[int] = field(default_factory=list)
    constant: list[bool] = field(default_factory=list)
    leaves: list[Leaf] = field(default_factory=list)
    configs: list[Config] = field(default_factory=list)

    def config(self, c: Config) -> int:
        """The index of configuration `c` (interned)."""
        if c not in self.configs:
            self.configs.append(c)
        return self.configs.index(c)

    def intern(self, node: Node) -> int:
        found = self.index.get(node)
        if found is not None:
            return found
        self.nodes.append(node)
        self.index[node] = n = len(self.nodes) - 1
        if node.kind == "leaf":
            leaf = self.leaves[node.attr]
            self.ready.append(leaf.position)
            # the fold-constants after the search (opt_level 3) folds ops over constants
            # that `folds_to` allows under WEIGHT_LIMIT: they cost nothing at run time
            self.constant.append(leaf.constant and elements(node.shape) <= WEIGHT_LIMIT)
        else:
            self.ready.append(max((self.ready[a] for a in node.args), default=-1))
            sizes = [elements(self.nodes[a].shape) for a in node.args]
            folds = folds_to(elements(node.shape), sizes, WEIGHT_LIMIT)
            self.constant.append(folds and all(self.constant[a] for a in node.args))
        return n

    def leaf(self, value: SSAValue, position: int) -> int:
        t = value.type
        shape, dtype = (t.dims, t.dt) if isinstance(t, TensorType) else ((), "")
        literal = isinstance(value.owner, LiteralOp) and not value.owner.elements
        self.leaves.append(Leaf(value, position, literal))
        return self.intern(Node("leaf", (), len(self.leaves) - 1, shape, dtype))

    def topo(self, roots: tuple[int, ...]) -> list[int]:
        """The nodes `roots` reach, operands first: depth first, each node's operands
        in order (iterative; the search's hottest loop, hence the resumed iterators)."""
        nodes = self.nodes
        order: list[int] = []
        seen: set[int] = set()
        for root in roots:
            if root in seen:
                continue
            seen.add(root)
            stack = [(root, iter(nodes[root].args))]
            while stack:
                n, args = stack[-1]
                for a in args:
                    if a not in seen:
                        seen.add(a)
                        stack.append((a, iter(nodes[a].args)))
                        break
                else:
                    stack.pop()
                    order.append(n)
        return order


@dataclass
class BlockGraph:
    """A block as the search sees it: `roots[i]` feeds `slots[i]` = (op, operand index)."""

    pool: Pool
    roots: tuple[int, ...]
    slots: list[tuple[Operation, int, int]]  # (reader, operand index, reader's position)
    origin: dict[int, Operation]
    terms: set[Operation]  # every op that became a node

    def valid(self, roots: tuple[int, ...]) -> bool:
        """Every reader comes after the last leaf its new operand needs."""
        ready = self.pool.ready
        for r, (_, _, pos) in zip(roots, self.slots):  # a loop: the search calls it per graph
            if ready[r] >= pos:
                return False
        return True


def elements(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def is_matrix(v: SSAValue) -> bool:
    t = v.type
    return isinstance(t, TensorType) and t.rank == 2 and dtype_is_numeric(t.dt)


def is_image(v: SSAValue) -> bool:
    """A rank-4 tensor (an NCHW image or an OIHW kernel)."""
    t = v.type
    return isinstance(t, TensorType) and t.rank == 4 and dtype_is_numeric(t.dt)


def is_scalar(v: SSAValue) -> bool:
    t = v.type
    return isinstance(t, TensorType) and t.rank == 0 and dtype_is_numeric(t.dt)


Found = tuple[str, list[SSAValue], int | Config]


def classify(op: Operation) -> Found | None:
    """(kind, operands, attr) when `op` is a term op on matrices or rank-4 tensors."""
    if not op.results or not (is_matrix(op.results[0]) or is_image(op.results[0])):
        return None
    ins = list(op.operands)
    if isinstance(op, AddOp | MultiplyOp) and ins[0].type == ins[1].type:
        return ("ewadd" if isinstance(op, AddOp) else "ewmul", ins, 0)
    if isinstance(op, MultiplyOp) and is_scalar(ins[1]) and ins[0].type == op.results[0].type:
        return ("smul", ins, 0)
    if isinstance(op, MultiplyOp) and is_scalar(ins[0]) and ins[1].type == op.results[0].type:
        return ("smul", ins[::-1], 0)
    if isinstance(op, MaxOp) and ins[0].type == op.results[0].type and is_splat(ins[1], 0):
        return ("relu", ins[:1], 0)
    if isinstance(op, DotOp) and is_matrix(ins[0]) and is_matrix(ins[1]):
        return ("matmul", ins, 0)
    if isinstance(op, TransposeOp) and is_matrix(ins[0]):
        return ("transpose", ins, 0)
    if isinstance(op, ConcatenateOp) and len(ins) == 2 and op.axis.data in (0, 1):
        return (f"concat{op.axis.data}", ins, 0)
    if isinstance(op, SliceOp):
        return classify_slice(op)
    if isinstance(op, ConvolveOp):
        return classify_conv(op)
    if isinstance(op, ReduceWindowOp):
        return classify_pool(op)
    return None


def classify_conv(op: ConvolveOp) -> Found | None:
    """conv(x, k) for a 2-d convolution of one group."""
    cfg = conv_config(op.properties, 2)
    if cfg["groups"] != [1] or not is_image(op.lhs):
        return None
    strides, padding = tuple(cfg["strides"]), tuple(cfg["padding"])
    config: Config = (
        "conv",
        strides,
        padding,
        tuple(cfg["left_dilation"]),
        tuple(cfg["right_dilation"]),
    )
    return ("conv", [op.lhs, op.kernel], config)


def classify_pool(op: ReduceWindowOp) -> Found | None:
    """maxpool(x): a max over spatial windows, unpadded, from -inf."""
    window, strides = [a.data for a in op.window], [a.data for a in op.strides]
    init = splat_value(op.init)
    if op.combinator_fn is not None or op.combinator is None or op.combinator.data != "max":
        return None
    if window[:2] != [1, 1] or strides[:2] != [1, 1] or op.padding.data != "none":
        return None
    if not dtype_is_float(tensor_of(op.operand).dt) or init is None or init != -math.inf:
        return None
    return ("maxpool", [op.operand], ("pool", tuple(window[2:]), tuple(strides[2:]), (), ()))


def classify_slice(op: SliceOp) -> Found | None:
    rows = tensor_of(op.operand).dims[0]
    lo, hi = op.lower.data, op.upper.data
    if lo == 0 and hi < rows - 1:
        return ("split0a", [op.operand], hi + 1)
    if lo > 0 and hi == rows - 1:
        return ("split0b", [op.operand], lo)
    return None


def windows(block: Block, size: int) -> list[frozenset[Operation] | None]:
    """The block's term ops in consecutive groups of at most `size` (None: the whole
    block, when it has no more than `size`)."""
    terms = [op for op in block.ops if classify(op) is not None]
    if len(terms) <= size:
        return [None]
    return [frozenset(terms[i : i + size]) for i in range(0, len(terms), size)]


def from_block(block: Block, window: frozenset[Operation] | None = None) -> BlockGraph:
    """The block's term ops (those of `window`, when given) as nodes; every other op
    reads roots and defines leaves."""
    pool = Pool()
    value_node: dict[SSAValue, int] = {}
    slots: list[tuple[Operation, int, int]] = []
    roots: list[int] = []
    origin: dict[int, Operation] = {}
    terms: set[Operation] = set()

    def node_of(v: SSAValue) -> int:
        if v not in value_node:
            value_node[v] = pool.leaf(v, -1)
        return value_node[v]

    for pos, op in enumerate(block.ops):
        found = classify(op) if window is None or op in window else None
        if found is not None and all(
            u.operation.parent_block() is block for u in op.results[0].uses
        ):
            kind, ins, attr = found
            t = op.results[0].type
            assert isinstance(t, TensorType)
            attr = pool.config(attr) if isinstance(attr, tuple) else attr
            n = pool.intern(Node(kind, tuple(node_of(v) for v in ins), attr, t.dims, t.dt))
            n = fold_split1(pool, n)
            origin.setdefault(n, op)
            terms.add(op)
            value_node[op.results[0]] = n
            continue
        for i, v in enumerate(op.operands):
            slots.append((op, i, pos))
            roots.append(node_of(v))
        for r in op.results:
            value_node[r] = pool.leaf(r, pos)
    return BlockGraph(pool, tuple(roots), slots, origin, terms)


def fold_split1(pool: Pool, n: int) -> int:
    """transpose(split0x(transpose(t))) is split1x(t), the column split."""
    node = pool.nodes[n]
    if node.kind != "transpose":
        return n
    mid = pool.nodes[node.args[0]]
    if mid.kind not in ("split0a", "split0b"):
        return n
    inner = pool.nodes[mid.args[0]]
    if inner.kind != "transpose":
        return n
    kind = "split1" + mid.kind[-1]
    return pool.intern(Node(kind, inner.args, mid.attr, node.shape, node.dtype))
