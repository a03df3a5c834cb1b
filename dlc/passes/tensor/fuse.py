"""fuse: tensor-level fusion of `tensor.compute` ops (compute-inline and grouping).

Three rewrites, applied to every `tensor.func` (block by block):

1. **Compute-inline** (TVM's `compute_inline`). A producer compute P (no reduction, not
   returned, not used as a reduction `init`) is replaced in each consumer by its body:
   every `tensor.read %P[e...]` becomes a copy of P's body with P's index variables
   bound to `e...`. Producers are visited from the last to the first, so whole
   element-wise / broadcast chains collapse into their final consumer.

   The rule that keeps work from being duplicated. Let `reads` be the number of element
   reads of P over all consumers (each consumer's domain size x reduction size x its
   number of distinct index lists of `tensor.read`s of P; reads at the same index
   values are one read, LLVM's GVN merges them), `dup = reads / size(P)`, and `cost` P's scalar work
   per element (math functions 20, divisions 8, other float/integer ops 1; reads,
   constants and i64 index arithmetic 0). P is inlined when

   - `dup <= 1`: every element is still computed at most once (element-wise chains,
     permutations, a reduction reading each element once); or
   - `cost == 0` and no consumer reads it at an index depending on a reduction index
     variable: pure data movement / broadcasting (padShape, reshape, transpose, splat)
     folded into index expressions, without turning a `dot` operand into strided
     re-reads; or
   - `dup <= 8` and `cost * (dup - 1) <= 32`: a little recomputation of cheap work is
     cheaper than a store and reloads (e.g. softmax's `exp(x - max)` read by the sum
     and by the division), unless some consumer reads it at a reduction-dependent
     index more than once per element (a `dot` operand).

   Anything else stays materialized; in particular a producer read by a `dot` (read
   `N` times per element) or an expensive producer read by several consumers.

   Exception (compute once, store, reduce in the same loop): a producer whose
   duplicated work would be at least `MATERIALIZE_COST` (8, a division;
   `cost * (dup - 1)`) and which some reduction iterates over exactly (its domain is
   the reduction's output then reduction axes, read at that point) stays materialized
   even when the rule above would inline it; grouping then evaluates it inside that
   reduction's loop. Softmax's `exp(x - max)` is thus computed once, stored inside the
   sum's loop and read back by the division, instead of being recomputed (an exp costs
   far more than a store and a load of an L1-resident value); likewise the normalised
   values `e / sum` of softmax k are computed once inside softmax k+1's max loop.
   Cheap producers (`x - mean`, cost 1) are still recomputed.

2. **Grouping** (epilogue, horizontal and reduction-boundary fusion). A maximal run of
   consecutive computes becomes one group, lowered to ONE loop nest (`_Group`). Its
   base domain is the shortest member domain and must prefix every member's domain;
   the outer parallel loops run over it. Per outer point, members run in order:

   - base members (domain == base): element-wise ones evaluated in registers,
     reductions as inner loops carrying their accumulator;
   - inner members (longer domain, element-wise): either *feeders* of the next
     reduction member (`fuse.feeds`: same extra axes as its reduction axes, read by it
     only at the current point) evaluated and stored inside that reduction's loop —
     the multi-output / producer-consumer fusion across a reduction boundary — or
     given their own inner loops (e.g. softmax's final normalisation);
   - reduction-outer members (`dlc.reduction_outer = k`, see below) whose kept output
     loops are the base: `for j: acc[., j] = init; for r: for j: acc[., j] += ...`.

   Legality: a member reads an earlier member only at the current outer point (its
   first len(base) indices are its own index variables; `0` for extent-1 dimensions).
   Base values are passed in registers; feeders' values are passed in registers to
   later feeders of the same reduction and to it (those reads must be at the full
   current point); every other read of an inner member loads from its buffer, which
   the earlier inner loop of this outer iteration has filled. A member whose every use
   is a register read carries `fuse.internal` and gets no buffer; a reduction-outer
   member read only by the next (same-shape, element-wise) member accumulates in that
   member's buffer, which is then updated in place (`relu(dot + b)` needs no extra
   buffer). Members carry `fuse.group = <id>`. For the softmax chain of W2 the whole
   function is one group with an empty base: softmax k costs two loops (max over the
   normalised values of softmax k-1, stored there; exp stored and summed) plus one
   for the last normalisation; a row-wise softmax (W3) or LayerNorm + GELU (W7) is one
   nest over the rows.

3. **Dot schedule.** A `dot`-like reduction whose last output index walks an operand
   row while the reduction index strides it (`x[i, k] * w[k, j]`) is marked
   `dlc.reduction_outer = rank - 1`: the reduction loops run outside the last output
   loop (i-k-j order), so the inner loop is contiguous and vectorizes. The fold order
   per element is unchanged, so results are bit-identical.

Multi-block functions are fused block by block: nothing is inlined into a consumer in
another basic block (it may be a loop body executed many times), and groups never
span blocks (their members are consecutive ops of one block).

Input: verified tensor level. Output: verified tensor level computing the same values
(float results may differ only by the reassociation-free re-evaluation of the same
scalar expressions, i.e. bit-identical except where the code generator already
differs). The lowering `lower-tensor-to-loop` honours the group attributes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import IntAttr, IntegerAttr, ModuleOp, UnitAttr, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from dlc.diagnostics import copy_loc
from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType
from dlc.lowering.tensor_to_loop.lower_tensor_to_loop import REDUCTION_OUTER

GROUP = "fuse.group"
INTERNAL = "fuse.internal"
FEEDS = "fuse.feeds"

EXPENSIVE_COST = 20
DIVISION_COST = 8
MAX_DUP = 8
MAX_EXTRA_COST = 32
MATERIALIZE_COST = 8

_DIVISIONS = (arith.DivfOp, arith.DivSIOp, arith.DivUIOp, arith.RemSIOp, arith.RemUIOp)


def _size(dims: tuple[int, ...]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def op_cost(op: Operation) -> int:
    """Scalar work of one body op (reads, constants and index arithmetic are free)."""
    if isinstance(op, tensor.ReadOp | tensor.YieldOp | arith.ConstantOp):
        return 0
    if op.results and all(r.type == i64 for r in op.results):
        return 0
    if op.name.startswith("math.") and not isinstance(op, math.AbsFOp | math.CopySignOp):
        return EXPENSIVE_COST
    if isinstance(op, _DIVISIONS):
        return DIVISION_COST
    return 1


def body_cost(compute: tensor.ComputeOp) -> int:
    return sum(op_cost(op) for op in compute.body.block.ops)


def _points(compute: tensor.ComputeOp) -> int:
    """Body evaluations of a compute: domain x reduction points."""
    return _size(compute.domain) * _size(compute.reduction_extents)


@dataclass
class _Uses:
    """How a producer is used: reads per consumer, or `blocked` for other uses."""

    reads: dict[tensor.ComputeOp, int] = field(default_factory=dict)
    indices: dict[tensor.ComputeOp, set[tuple[SSAValue, ...]]] = field(default_factory=dict)
    blocked: bool = False


def _uses(value: SSAValue) -> _Uses:
    uses = _Uses()
    for use in value.uses:
        user = use.operation
        if isinstance(user, tensor.ReadOp):
            compute = user.parent_op()
            assert isinstance(compute, tensor.ComputeOp)
            uses.indices.setdefault(compute, set()).add(tuple(user.indices))
            uses.reads[compute] = len(uses.indices[compute])  # distinct index lists
        elif isinstance(user, tensor.ComputeOp) and use.index < len(user.inputs):
            continue  # the operand list entry; its reads are counted above
        else:
            uses.blocked = True  # returned, or a reduction init
    return uses


def _reads_at_reduction_index(consumer: tensor.ComputeOp, producer: SSAValue) -> bool:
    """Some read of `producer` in `consumer` depends on a reduction index variable
    (a `dot` reading its operand): the producer is read many times per element."""
    block = consumer.body.block
    reduction_args = set(block.args[len(consumer.domain) :])
    if not reduction_args:
        return False
    for op in block.ops:
        if not isinstance(op, tensor.ReadOp) or op.tensor != producer:
            continue
        stack: list[SSAValue] = list(op.indices)
        while stack:
            value = stack.pop()
            if value in reduction_args:
                return True
            if isinstance(value.owner, Operation):
                stack.extend(value.owner.operands)
    return False


def should_inline(producer: tensor.ComputeOp) -> bool:
    """The rule of the module docstring."""
    if producer.combinator is not None:
        return False
    uses = _uses(producer.result)
    if uses.blocked or not uses.reads:
        return False
    if any(c.parent_block() is not producer.parent_block() for c in uses.reads):
        return False  # another basic block, maybe a loop body: keep it computed once
    reads = sum(_points(c) * n for c, n in uses.reads.items())
    size = max(1, _size(producer.domain))
    if reads <= size:
        return True
    cost = body_cost(producer)
    if cost == 0 and not any(_reads_at_reduction_index(c, producer.result) for c in uses.reads):
        return True
    for consumer, n in uses.reads.items():  # a dot re-reading each element: keep it
        if _points(consumer) * n > size and _reads_at_reduction_index(consumer, producer.result):
            return False
    dup = reads / size
    if cost * (dup - 1) >= MATERIALIZE_COST and _feeds_reduction(producer, list(uses.reads)):
        return False  # computed once, stored and reduced in the reduction's loop
    return dup <= MAX_DUP and cost * (dup - 1) <= MAX_EXTRA_COST


def _replace_compute(old: tensor.ComputeOp, inputs: list[SSAValue]) -> tensor.ComputeOp:
    """The same compute with a new input list (the body block is moved over)."""
    block = old.body.detach_block(0)
    t = old.result.type
    assert isinstance(t, TensorType)
    new = tensor.ComputeOp(
        inputs,
        t,
        block,
        reduction=old.reduction_extents,
        combinator=old.combinator.data if old.combinator is not None else None,
        init=old.init,
        init_value=old.init_value,
    )
    new.attributes.update(old.attributes)
    copy_loc(old, new)
    parent = old.parent_block()
    assert parent is not None
    parent.insert_op_before(new, old)
    old.result.replace_all_uses_with(new.result)
    old.detach()
    old.erase()
    return new


def _inline_read(read: tensor.ReadOp, producer: tensor.ComputeOp) -> list[SSAValue]:
    """Replace one read of `producer` by a copy of its body; returns tensors it reads."""
    source = producer.body.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(source.args, read.indices, strict=True))
    block = read.parent_block()
    assert block is not None
    read_tensors: list[SSAValue] = []
    for op in source.ops:
        if isinstance(op, tensor.YieldOp):
            read.result.replace_all_uses_with(mapping.get(op.value, op.value))
            break
        copy = op.clone(mapping)
        block.insert_op_before(copy, read)
        if isinstance(copy, tensor.ReadOp):
            read_tensors.append(copy.tensor)
    read.detach()
    read.erase()
    return read_tensors


def inline_into_consumers(producer: tensor.ComputeOp) -> None:
    """Inline `producer` into every consumer, then erase it."""
    consumers = list(_uses(producer.result).reads)
    for consumer in consumers:
        reads = [
            op
            for op in consumer.body.block.ops
            if isinstance(op, tensor.ReadOp) and op.tensor == producer.result
        ]
        inputs = [v for v in consumer.inputs if v != producer.result]
        for read in reads:
            for t in _inline_read(read, producer):
                if t not in inputs:
                    inputs.append(t)
        _replace_compute(consumer, inputs)
    producer.detach()
    producer.erase()


def inline_computes(func: tensor.FuncOp) -> int:
    """Compute-inline from the last producer to the first (block by block); returns how
    many were inlined."""
    count = 0
    for block in func.body.blocks:
        for op in reversed(list(block.ops)):
            if isinstance(op, tensor.ComputeOp) and should_inline(op):
                inline_into_consumers(op)
                count += 1
    return count


def _is_zero_index(value: SSAValue) -> bool:
    owner = value.owner
    return (
        isinstance(owner, arith.ConstantOp)
        and isinstance(owner.value, IntegerAttr)
        and owner.value.value.data == 0
    )


def _identity_dims(consumer: tensor.ComputeOp, read: tensor.ReadOp, dims: tuple[int, ...]) -> bool:
    """The first `len(dims)` indices of `read` are the consumer's own index variables
    (`0` allowed for extent-1 dimensions)."""
    args = consumer.body.block.args
    if len(read.indices) < len(dims) or len(args) < len(dims):
        return False
    for d, n in enumerate(dims):
        index = read.indices[d]
        if index is args[d] or (n == 1 and _is_zero_index(index)):
            continue
        return False
    return True


def _reads_of(consumer: tensor.ComputeOp, producer: SSAValue) -> list[tensor.ReadOp]:
    return [
        op
        for op in consumer.body.block.ops
        if isinstance(op, tensor.ReadOp) and op.tensor == producer
    ]


def reads_at_identity(consumer: tensor.ComputeOp, producer: SSAValue) -> bool:
    """Every read of `producer` in `consumer` is at the consumer's own index variables
    (all of `producer`'s dimensions: for a reduction consumer, output then reduction)."""
    t = producer.type
    assert isinstance(t, TensorType)
    return all(_identity_dims(consumer, r, t.dims) for r in _reads_of(consumer, producer))


def _feeds_reduction(producer: tensor.ComputeOp, consumers: list[tensor.ComputeOp]) -> bool:
    """Some reduction consumer iterates exactly over `producer`'s domain (its output
    then its reduction axes) and reads it at that point: `producer` can be computed,
    stored and reduced in the reduction's own loop (see `_Group`)."""
    for c in consumers:
        if c.combinator is None or c.init == producer.result:
            continue
        if producer.domain != (*c.domain, *c.reduction_extents):
            continue
        if reads_at_identity(c, producer.result):
            return True
    return False


def _depends_on(value: SSAValue, targets: set[SSAValue]) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        if v in targets:
            return True
        if isinstance(v.owner, Operation):
            stack.extend(v.owner.operands)
    return False


def reduction_outer_pays(op: tensor.ComputeOp) -> bool:
    """A `dot`-like reduction whose innermost output axis walks some operand row
    contiguously while the reduction axis strides it (`x[i, k] * w[k, j]`): with the
    reduction loops outside the last output loop (i-k-j order) the inner loop is
    contiguous and vectorizes. Same fold order per element, so bit-identical."""
    if op.combinator is None or op.init is not None or REDUCTION_OUTER in op.attributes:
        return False
    if not op.domain or not op.reduction_extents or op.domain[-1] < 8:
        return False
    args = op.body.block.args
    last = args[len(op.domain) - 1]
    reduction_args = set(args[len(op.domain) :])
    strided_row = False
    for read in op.body.block.ops:
        if not isinstance(read, tensor.ReadOp):
            continue
        indices = list(read.indices)
        if any(_depends_on(i, {last}) for i in indices[:-1]):
            return False  # the last output axis would stride this operand
        if (
            indices
            and indices[-1] is last
            and any(_depends_on(i, reduction_args) for i in indices[:-1])
        ):
            strided_row = True
    return strided_row


def schedule_reductions(func: tensor.FuncOp) -> None:
    """Mark dot-like reductions `dlc.reduction_outer = rank - 1` (see
    `reduction_outer_pays` and `FunctionLowering._reduction_outer`)."""
    for op in (op for block in func.body.blocks for op in block.ops):
        if isinstance(op, tensor.ComputeOp) and reduction_outer_pays(op):
            op.attributes[REDUCTION_OUTER] = IntAttr(len(op.domain) - 1)


def _outer_keep(op: tensor.ComputeOp) -> int | None:
    """Output loops kept outside the reduction loops of a reduction-outer compute."""
    keep = op.attributes.get(REDUCTION_OUTER)
    if isinstance(keep, IntAttr) and op.combinator is not None and op.init is None:
        return keep.data
    return None


def base_domain(members: list[tensor.ComputeOp]) -> tuple[int, ...]:
    """A group's outer loops: its shortest member domain, counting a reduction-outer
    member by the output loops it keeps outside its reduction loops."""
    domains = []
    for m in members:
        keep = _outer_keep(m)
        domains.append(m.domain if keep is None else m.domain[:keep])
    return min(domains, key=len)


class _Group:
    """A run of consecutive computes lowered to ONE nest (the module docstring's rules).

    `base` is the shortest member domain, a prefix of every member's domain: the outer
    parallel loops. Base members (domain == base) are evaluated per outer point; inner
    members (longer domain, never reductions) either feed the next reduction member
    (`feeds`: evaluated inside its reduction loops) or get their own inner loops.
    """

    def __init__(self, base: tuple[int, ...]) -> None:
        self.base = base
        self.members: list[tensor.ComputeOp] = []
        self.results: dict[SSAValue, tensor.ComputeOp] = {}
        self.pending: list[tensor.ComputeOp] = []  # trailing inner members, not yet settled
        self.feeds: dict[tensor.ComputeOp, tensor.ComputeOp] = {}  # feeder -> reduction

    def _new_base(self, op: tensor.ComputeOp) -> tuple[int, ...] | None:
        domain = op.domain
        keep = _outer_keep(op)
        if keep is not None:  # its last output loops sit inside its reduction loops
            domain = domain[:keep]
            if len(self.base) < keep:
                return None
        n = len(self.base)
        if domain[:n] == self.base:
            return self.base
        if self.base[: len(domain)] == domain:
            return domain
        return None

    def add(self, op: tensor.ComputeOp) -> bool:
        """Append `op` when the group stays legal; returns whether it did."""
        if self.members and op.prev_op is not self.members[-1]:
            return False
        if op.init is not None and op.init in self.results:
            return False
        base = self._new_base(op)
        if base is None:
            return False
        if base != self.base:  # rebuild with the shorter base (members become inner)
            group = _Group(base)
            if not all(group.add(m) for m in [*self.members, op]):
                return False
            self.__dict__.update(group.__dict__)
            return True
        inner = len(op.domain) > len(base)
        if inner and op.combinator is not None and _outer_keep(op) != len(base):
            return False
        for value in op.inputs:
            if value in self.results and not all(
                _identity_dims(op, r, base) for r in _reads_of(op, value)
            ):
                return False  # another outer point's value: not computed yet
        if inner and op.combinator is not None:
            self.pending = []  # a reduction-outer member: its own inner nest
        elif inner:
            self.pending.append(op)
        else:
            if op.combinator is not None:
                self._settle_feeders(op)
            self.pending = []
        self.members.append(op)
        self.results[op.result] = op
        return True

    def _settle_feeders(self, reduction: tensor.ComputeOp) -> None:
        """The longest suffix of the pending inner members computable inside
        `reduction`'s loops: same extra axes, read there (and among themselves) only at
        the current point."""
        run: list[tensor.ComputeOp] = []
        for m in reversed(self.pending):
            if m.domain[len(self.base) :] != reduction.reduction_extents:
                break
            run.insert(0, m)
        for start in range(len(run)):
            feeders = run[start:]
            values = {f.result for f in feeders}
            readers = [*feeders, reduction]
            if all(reads_at_identity(r, v) for r in readers for v in values):
                for f in feeders:
                    self.feeds[f] = reduction
                return

    def register_only(self, member: tensor.ComputeOp) -> bool:
        """Every use of `member` is a read by a later member that gets the value in a
        register (so it needs no buffer)."""
        uses = _uses(member.result)
        if uses.blocked or not uses.reads:
            return False
        if not all(c in self.results.values() for c in uses.reads):
            return False
        if len(member.domain) == len(self.base):
            return True  # base values dominate everything later in the nest
        reduction = self.feeds.get(member)
        if member.combinator is not None:
            return self._accumulates_in_next(member, uses)
        if reduction is None:
            return False  # stored by its own inner loops, read by loads
        return all(c is reduction or self.feeds.get(c) is reduction for c in uses.reads)

    def _accumulates_in_next(self, member: tensor.ComputeOp, uses: _Uses) -> bool:
        """A reduction-outer member read only by the next member, an element-wise
        inner member of the same shape reading it at the current point: the reduction
        accumulates in that member's buffer, which is then updated in place."""
        i = self.members.index(member)
        if i + 1 >= len(self.members):
            return False
        after = self.members[i + 1]
        if after.combinator is not None or after in self.feeds or after.domain != member.domain:
            return False
        if after.result.type != member.result.type or set(uses.reads) != {after}:
            return False
        return reads_at_identity(after, member.result)


def group_computes(func: tensor.FuncOp, first_id: int = 0) -> int:
    """Mark maximal legal runs of computes as groups; returns the next free id."""
    groups: list[_Group] = []
    current: _Group | None = None
    for op in (op for block in func.body.blocks for op in block.ops):
        if not isinstance(op, tensor.ComputeOp):
            current = None
            continue
        if current is not None and current.add(op):
            continue
        current = _Group(op.domain)
        current.add(op)
        groups.append(current)
    group_id = first_id
    for group in groups:
        if len(group.members) < 2:
            continue
        for member in group.members:
            member.attributes[GROUP] = IntAttr(group_id)
            if member in group.feeds:
                member.attributes[FEEDS] = UnitAttr()
            if group.register_only(member):
                member.attributes[INTERNAL] = UnitAttr()
        group_id += 1
    return group_id


def group_members(first: tensor.ComputeOp) -> list[tensor.ComputeOp]:
    """The members of `first`'s group when `first` is its first member, else []."""
    gid = first.attributes.get(GROUP)
    if gid is None:
        return [first]
    prev = first.prev_op
    if isinstance(prev, tensor.ComputeOp) and prev.attributes.get(GROUP) == gid:
        return []
    members = [first]
    op = first.next_op
    while isinstance(op, tensor.ComputeOp) and op.attributes.get(GROUP) == gid:
        members.append(op)
        op = op.next_op
    return members


class FusePass(ModulePass):
    """Fuse tensor-level computes: compute-inline, then epilogue/horizontal grouping.

    Input: verified tensor level (`tensor.func` of `tensor.compute`). Output: the same
    functions with producers inlined into consumers by the duplication rule of this
    module's docstring, dot-like reductions marked `dlc.reduction_outer`, and legal
    runs of computes marked `fuse.group` (plus `fuse.internal` for members needing no
    buffer and `fuse.feeds` for members evaluated inside the next reduction's loop);
    `lower-tensor-to-loop` emits each group as one loop nest. Idempotent.
    """

    name = "fuse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        next_id = 0
        for func in op.body.block.ops:
            if not isinstance(func, tensor.FuncOp):
                continue
            for member in func.body.walk():
                for key in (GROUP, INTERNAL, FEEDS):
                    member.attributes.pop(key, None)
            while inline_computes(func):
                pass
            schedule_reductions(func)
            next_id = group_computes(func, next_id)
