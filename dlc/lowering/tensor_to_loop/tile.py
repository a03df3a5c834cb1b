"""Register tiles of the nest builder (`nest.py`): where a reduction's accumulators
live, the tile's points (scalar or vector lanes), and the chain of reduction loops
that carries the accumulators in registers. `RegisterTile` is a base class of
`NestBuilder`, which provides the loop and point emission it calls
(`_loop`, `_element`, `_combine`, `_deliver`, ...); the rules are in `nest.py`'s
docstring ("Reductions", "Vectors").
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, replace

from xdsl.builder import Builder, InsertPoint
from xdsl.dialects import arith
from xdsl.ir import Operation, SSAValue

from dlc.analysis.tensor_nest_plan import NestPlan, PackPlan
from dlc.diagnostics import copy_loc, error_at
from dlc.dialects import loop, tensor
from dlc.dialects.schedule import Loop
from dlc.lowering.scalar_ops import mark_reassociable
from dlc.lowering.tensor_to_loop.body import all_of, index, load, vload_valid, vstore_valid
from dlc.lowering.tensor_to_loop.constants import read_only

Extent = int | SSAValue


@dataclass(frozen=True)
class Block_:
    """The part of one axis the loops emitted so far leave to the inner loops."""

    base: SSAValue | None  # first index (None: 0)
    offset: int  # constant added to base (unrolled and peeled iterations)
    extent: Extent  # size of the block (a constant, or a dynamic `min`)


Point = tuple[dict[str, "Block_"], int]
"""One point of a register tile: its environment and its lanes (1: a scalar)."""


class RegisterTile(NestPlan):
    """Accumulator placement and the register chain (module docstring)."""

    op: tensor.ComputeOp
    buffer: SSAValue | None
    dt: str
    axes: list[str]
    loops: list[Loop]
    known: dict[SSAValue, SSAValue]
    feeders: list
    prefix: dict[str, SSAValue]
    pack: PackPlan | None
    epilogue: list  # planned by `EpilogueTile`
    _deliver_final: Callable[..., None]
    # provided by NestBuilder
    _loop: Callable[..., None]
    _child: Callable[..., Block_]
    _needsconstant_extent: Callable[[int], bool]
    _check_unroll: Callable[[int], None]
    _indices: Callable[..., list[SSAValue]]
    _outputs: Callable[[], list[str]]
    _element: Callable[..., SSAValue]
    _combine: Callable[..., SSAValue]
    _deliver: Callable[..., None]
    _init_value: Callable[[Builder], SSAValue]

    # -- the register chain ------------------------------------------------------------

    def _tile_points(self, env: dict[str, Block_]) -> list[Point]:
        """The register tile's points (its unrolled loops): environments and lanes."""
        points: list[Point] = [(env, 1)]
        for lp in self.tile:
            grown: list[Point] = []
            for point, lanes in points:
                block = point[lp.axis]
                extent = constant_extent(block.extent, self.op, lp.name)
                if lp.name == self.lane_loop:  # step 1 (`_plan_lanes`)
                    pieces = self._lane_pieces(extent, lp)
                else:
                    pieces = [(x, min(lp.step, extent - x), 1) for x in range(0, extent, lp.step)]
                for x, size, wide in pieces:
                    moved = replace(block, offset=block.offset + x, extent=size)
                    grown.append(({**point, lp.axis: moved}, max(lanes, wide)))
            points = grown
        self._check_unroll(len(points))
        return points

    def _valid(self, point: dict[str, Block_], lanes: int) -> int:
        """Columns of a point of `lanes` lanes inside the output (fewer: a padded tail)."""
        if lanes == 1:
            return 1
        return constant_extent(point[self.lane_axis].extent, self.op, self.lane_loop)

    def _vload_valid(self, b: Builder, where: list[SSAValue], lanes: int, valid: int) -> SSAValue:
        """`lanes` values of the output from `where`, only the first `valid` loaded."""
        assert self.buffer is not None
        return vload_valid(b, self.buffer, where, lanes, valid, self.dt)

    def _vstore_valid(
        self, b: Builder, value: SSAValue, where: list[SSAValue], lanes: int, valid: int
    ) -> None:
        """Store the first `valid` of the `lanes` lanes of `value` at `where`."""
        assert self.buffer is not None
        vstore_valid(b, value, self.buffer, where, lanes, valid)

    def _register_chain(self, b: Builder, env: dict[str, Block_]) -> None:
        """Accumulators for the tile's points through the chain of reduction loops."""
        assert self.chain is not None
        points = self._tile_points(env)
        wheres = [self._indices(b, p, self._outputs()) for p, _ in points]
        accs: list[SSAValue] = []
        first = self._first_block(b, env) if self.memory_init else True
        if first is not False:
            init = self._init_value(b)
            wide = {
                n: b.insert(loop.BroadcastOp(init, n)).res for n in {n for _, n in points} - {1}
            }
            accs = [wide.get(lanes, init) for _, lanes in points]
        if first is not True:
            assert self.buffer is not None
            partial = []
            for (point, lanes), where in zip(points, wheres, strict=True):
                if lanes > 1:
                    partial.append(self._vload_valid(b, where, lanes, self._valid(point, lanes)))
                else:
                    partial.append(load(b, self.buffer, where, self.dt))
            if first is False:
                accs = partial
            else:  # the first block: init; later ones: the partial sums so far
                accs = [
                    b.insert(arith.SelectOp(first, a, p)).result
                    for a, p in zip(accs, partial, strict=True)
                ]
        finals = self._chain(self.chain[0], b, env, points, accs)
        if self.epilogue:
            self._deliver_final(b, env, points, wheres, finals)
            return
        for value, where, (point, lanes) in zip(finals, wheres, points, strict=True):
            self._deliver(b, value, where, lanes, self._valid(point, lanes))

    def _first_block(self, b: Builder, env: dict[str, Block_]) -> SSAValue | bool:
        """Whether the chain at `env` is the first for its outputs: every reduction
        axis starts at index 0 (an i1 value, or a constant when known here)."""
        conditions: list[SSAValue] = []
        for a in self.axes[len(self.op.domain) :]:
            block = env[a]
            if block.offset and block.base is None:
                return False
            if block.base is not None:
                (start,) = self._indices(b, env, [a])
                conditions.append(b.insert(arith.CmpiOp(start, index(b, 0), "eq")).result)
        return all_of(b, conditions)

    def _chain(
        self,
        pos: int,
        b: Builder,
        env: dict[str, Block_],
        points: list[Point],
        accs: list[SSAValue],
    ) -> list[SSAValue]:
        """Reduction loops [pos, chain end) carrying `accs`; returns the final values."""
        assert self.chain is not None
        if pos == self.chain[1]:
            known = dict(self.known)
            out = []
            # the points only load (feeders store): a value loaded twice is loaded once
            stretch = read_only(b.insertion_point.block) if not self.feeders else nullcontext()
            with stretch:
                for (point, lanes), acc in zip(points, accs, strict=True):
                    merged = {**point, **{a: env[a] for a in env if a.startswith("r")}}
                    out.append(self._combine(b, acc, self._element(b, merged, known, lanes)))
            if len(out) == 1 and not self.tile and not self.memory_init:
                mark_reassociable(self.op, out[0])  # vectorizable fold order (see there)
            return out
        results: list[list[SSAValue]] = [accs]

        def inner(b2: Builder, env2: dict[str, Block_]) -> None:
            results.append(self._chain(pos + 1, b2, env2, points, results[-1]))

        lp = self.loops[pos]
        block = env[lp.axis]
        if lp.name in self.unrolled:
            self._loop(pos, b, env, inner)  # iterations in order, each threading the values
            return results[-1]
        if self._needsconstant_extent(pos):  # full blocks carrying the values, then the rest
            extent = constant_extent(block.extent, self.op, lp.name)
            full = extent - extent % lp.step
            if full:
                whole = {**env, lp.axis: replace(block, extent=full)}
                results.append(self._carried(pos, b, whole, index(b, full), points, results[-1]))
            if extent % lp.step:
                inner(
                    b,
                    {
                        **env,
                        lp.axis: replace(
                            block, offset=block.offset + full, extent=extent % lp.step
                        ),
                    },
                )
            return results[-1]
        ub = block.extent if isinstance(block.extent, SSAValue) else index(b, block.extent)
        return self._carried(pos, b, env, ub, points, accs)

    def _carried(
        self,
        pos: int,
        b: Builder,
        env: dict[str, Block_],
        ub: SSAValue,
        points: list[Point],
        accs: list[SSAValue],
    ) -> list[SSAValue]:
        """Reduction loop `pos` up to `ub` with `accs` as loop-carried values."""
        lp = self.loops[pos]
        nest = b.insert(loop.ForOp(index(b, 0), ub, index(b, lp.step), accs))
        copy_loc(self.op, nest)
        body = Builder(InsertPoint.at_end(nest.body.block))
        child = self._child(body, env[lp.axis], nest.iv, ub, lp.step)
        values = self._chain(pos + 1, body, {**env, lp.axis: child}, points, list(nest.iter_args))
        body.insert(loop.YieldOp(*values))
        return list(nest.res)


def constant_extent(extent: Extent, op: Operation, name: str) -> int:
    if isinstance(extent, int):
        return extent
    raise error_at(op, f"schedule: loop {name} needs a constant extent (unrolled)")
