"""One graph function with symbolic dimensions -> one `loop.func` (`lower-graph-to-loop`):
a loop nest per op over run-time extents, flat row-major buffers."""

from __future__ import annotations

from xdsl.dialects.builtin import MemRefType, i64
from xdsl.ir import Block, Operation, Region, SSAValue

from dlc.diagnostics import DiagnosticError, copy_loc, error_at
from dlc.dialects import graph, graph_dims, loop
from dlc.dialects.graph_elementwise import BinaryOp, DataTypeCastOp, NotOp, SelectOp, UnaryOp
from dlc.dialects.graph_gather import GatherOp
from dlc.dialects.graph_literal import is_scalar_lit, scalar_value
from dlc.dialects.graph_reduction import ReduceOp
from dlc.dialects.graph_symbolic import first_symbol
from dlc.dialects.graph_tensor import (
    ConcatenateOp,
    DotOp,
    PadShapeOp,
    ShapeCastOp,
    SliceOp,
    SqueezeShapeOp,
    TransposeOp,
)
from dlc.dialects.graph_types import FunctionType, TensorType, format_type
from dlc.lowering.graph_to_loop.copies import concat_nests, slice_nest, transpose_nest
from dlc.lowering.graph_to_loop.dot import DotEmitter
from dlc.lowering.graph_to_loop.fusion import flat_leaves, fused_producers, is_flat
from dlc.lowering.graph_to_loop.gather import check_indices, gather_nest
from dlc.lowering.graph_to_loop.literals import dense_data, drop_unused_literals, literal_bytes
from dlc.lowering.graph_to_loop.nests import NestEmitter, buffer_type, localize_constants
from dlc.lowering.graph_to_loop.results import result_types, returned_values
from dlc.lowering.graph_to_loop.views import View, source_indices, transposed_views
from dlc.lowering.scalar_ops import Unsupported, reassociate
from dlc.target import Target

ELEMENTWISE = (UnaryOp, BinaryOp, NotOp, SelectOp, DataTypeCastOp)
ALIASES = (PadShapeOp, SqueezeShapeOp, ShapeCastOp)
Space = tuple[int | str, ...] | None
"""The dimensions of an iteration space, or None for one flat loop over the elements."""


def function_symbols(ftype: FunctionType) -> list[str]:
    """The names of a function's parameters' symbolic dimensions in order of first use
    (expressions such as `%past+1` are computed from them): the order of the sizes the
    caller passes (`dlc.runtime.symbolic`)."""
    names: list[str] = []
    for arg in ftype.args:
        assert isinstance(arg, TensorType)
        names.extend(s for s in arg.symbols if s not in names and graph_dims.is_name(s))
    return names


class FunctionLowering:
    """One graph function -> one `loop.func @f(%params..., %sizes, %out)`; `%sizes` is
    a `memref<Kxi64>` of the symbolic dimensions' values (`function_symbols` order).
    `optimize`: fused element-wise chains (`fusion.py`), parallel outer loops, row
    blocks in `dot` (`dot.py`); `fma`: products and sums in a `dot` may fuse; `target`: the vector width of its tiles."""

    def __init__(
        self,
        func: graph.FuncOp,
        optimize: bool = False,
        fma: bool = False,
        target: Target | None = None,
    ) -> None:
        self.func = func
        self.optimize = optimize
        self.fma = fma
        self.target = target or Target.host()
        ftype = func.function_type
        self.ftype = ftype
        symbols = function_symbols(ftype)
        self.arg_types = [buffer_type(t) for t in ftype.args]  # type: ignore[arg-type]
        sizes_type = MemRefType(i64, [max(1, len(symbols))])
        self.outputs = result_types(func)
        out_types = [buffer_type(t) for t in self.outputs]
        self.block = Block(arg_types=[*self.arg_types, sizes_type, *out_types])
        self.sizes_arg = self.block.args[len(self.arg_types)]
        self.out_args = list(self.block.args[len(self.arg_types) + 1 :])
        self.results: list[SSAValue] = []  # the graph value of each output
        self.tuple_value: SSAValue | None = None  # a tuple result's literal
        self.symbols = symbols
        self.values: dict[SSAValue, SSAValue] = {}  # graph value -> buffer
        self.consts: dict[SSAValue, SSAValue] = {}  # graph scalar literal -> constant
        self.owned: list[SSAValue] = []
        self.fused: dict[SSAValue, Operation] = {}  # computed where their user reads them
        self.hoisted: dict[SSAValue, SSAValue] = {}  # loaded before the innermost loop
        self.views: dict[SSAValue, View] = {}  # transposes' operands read through (views.py)
        self.hidden: set[SSAValue] = set()  # neither materialized nor read

    def lower(self) -> loop.FuncOp:
        blocks = list(self.func.body.blocks)
        if len(blocks) != 1:
            raise error_at(
                self.func,
                "branches: not supported yet with symbolic dimension "
                f"%{first_symbol([self.ftype])}",
            )
        nest = NestEmitter(self.block, {})
        for i, name in enumerate(self.symbols):
            index = nest.index_const(i)
            nest.sizes[name] = nest.emit(loop.LoadOp(self.sizes_arg, [index]))
        self.nest = nest
        types = [*self.ftype.args, *(r.type for op in blocks[0].ops for r in op.results)]
        nest.merged_sizes([t for t in types if isinstance(t, TensorType)])
        for arg, buffer in zip(blocks[0].args, self.block.args, strict=False):
            self.values[arg] = buffer
        returned = blocks[0].last_op
        self.results, self.tuple_value = returned_values(self.ftype, returned)
        if self.optimize:
            self.fused = fused_producers(blocks[0])
            self.views, self.hidden = transposed_views(blocks[0])
        for op in blocks[0].ops:
            last = self.block.last_op
            self.lower_op(op, returned)
            new = last.next_op if last is not None else self.block.first_op
            while new is not None:  # the profiler names kernels after their op
                copy_loc(op, new)
                new = new.next_op
        for owned in self.owned:
            nest.builder.insert(loop.DeallocOp(owned))
        nest.builder.insert(loop.ReturnOp())
        arg_types = [a.type for a in self.block.args]
        drop_unused_literals(self.block)
        if self.optimize:
            localize_constants(self.block)
        return loop.FuncOp(self.func.sym_name.data, arg_types, Region(self.block))  # type: ignore[arg-type]

    def destination(self, op: Operation, returned: Operation | None) -> SSAValue:
        """The buffer `op`'s result is written to: an output when it is returned."""
        result = op.results[0]
        if result in self.results:
            return self.out_args[self.results.index(result)]
        assert isinstance(result.type, TensorType)
        buffer = self.nest.alloc(result.type)
        self.owned.append(buffer)
        return buffer

    def lower_op(self, op: Operation, returned: Operation | None) -> None:
        if isinstance(op, graph.ReturnOp):
            self.lower_return(op)
        elif isinstance(op, graph.LiteralOp) and op.result == self.tuple_value:
            return  # the outputs, written where their values are computed
        elif isinstance(op, graph.LiteralOp):
            self.lower_literal(op)
        elif op.results and (op.results[0] in self.views or op.results[0] in self.hidden):
            return  # read through by a transpose
        elif isinstance(op, ALIASES):  # the same row-major elements: the same buffer
            self.alias(op.results[0], op.operands[0])
        elif op.results and op.results[0] in self.fused:
            return  # computed at its user's reads
        elif isinstance(
            op, (*ELEMENTWISE, DotOp, ReduceOp, TransposeOp, GatherOp, ConcatenateOp, SliceOp)
        ):
            self.lower_compute(op, self.destination(op, returned))
        else:
            raise self.unsupported(op)

    def unsupported(self, op: Operation) -> DiagnosticError:
        opcode = op.name.removeprefix("graph.")
        return error_at(
            op,
            f"{opcode}: not supported yet in a function with symbolic dimensions "
            f"(@{self.func.sym_name.data})",
        )

    def alias(self, result: SSAValue, source: SSAValue) -> None:
        if source in self.consts:
            self.consts[result] = self.consts[source]
        else:
            self.values[result] = self.values[source]

    def lower_literal(self, op: graph.LiteralOp) -> None:
        """A splat is a constant read at every index; other static data a read-only
        buffer."""
        t, tree = op.result.type, op.value.data
        assert isinstance(t, TensorType)
        if op.elements:
            raise self.unsupported(op)
        if is_scalar_lit(tree):
            self.consts[op.result] = self.nest.scalars.const(scalar_value(tree), t.dt)
            return
        raw = literal_bytes(tree, t)
        if raw is None:
            raise self.unsupported(op)
        self.values[op.result] = self.nest.emit(
            loop.ConstBufferOp(dense_data(t, raw), buffer_type(t))
        )

    def lower_compute(self, op: Operation, out: SSAValue) -> None:
        try:
            if isinstance(op, DotOp):
                self.lower_dot(op, out)
            elif isinstance(op, TransposeOp):
                self.lower_transpose(op, out)
            elif isinstance(op, ReduceOp):
                self.lower_reduce(op, out)
            elif isinstance(op, GatherOp):
                self.lower_gather(op, out)
            elif isinstance(op, ConcatenateOp):
                concat_nests(self.nest, op, out, self.read, self.optimize)
                self.values[op.result] = out
            elif isinstance(op, SliceOp):
                slice_nest(self.nest, op, out, self.read, self.optimize)
                self.values[op.result] = out
            else:
                self.lower_elementwise(op, out)
        except Unsupported as err:
            raise self.not_generated(op, err) from None

    def not_generated(self, op: Operation, err: Unsupported) -> DiagnosticError:
        return error_at(
            op,
            f"not supported by the code generator yet: {err} on {format_type(op.operands[0].type)}",
        )

    def read(self, value: SSAValue, ivs: list[SSAValue], space: Space) -> SSAValue:
        """Element of graph `value` at the point `ivs` of iteration space `space` (a
        fused value computed there)."""
        if value in self.consts:
            return self.consts[value]
        if value in self.hoisted:
            return self.hoisted[value]
        view = self.views.get(value)
        if view is not None and space is not None:  # (a transpose's read: never flat)
            x = view.source.type
            assert isinstance(x, TensorType)
            return self.read(view.source, source_indices(self.nest, view, space, ivs), x.dims)
        producer = self.fused.get(value)
        if producer is not None:
            args = [self.read(v, ivs, space) for v in producer.operands]
            try:
                return self.compute(producer, args)
            except Unsupported as err:
                raise self.not_generated(producer, err) from None
        t = value.type
        assert isinstance(t, TensorType)
        if space is None:
            at = self.nest.zero if t.is_scalar else ivs[0]
        else:
            at = self.nest.index(t, ivs, space)
        return self.nest.load(self.values[value], at, t.dt)

    def lower_elementwise(self, op: Operation, out: SSAValue) -> None:
        t = op.results[0].type
        assert isinstance(t, TensorType)
        work = t.dims if self.optimize else None
        self.nest.threads(work, lambda parallel: self.elementwise_nest(op, out, parallel))
        self.values[op.results[0]] = out

    def elementwise_nest(self, op: Operation, out: SSAValue, parallel: bool) -> None:
        nest, t = self.nest, op.results[0].type
        assert isinstance(t, TensorType)
        space: Space = t.dims
        extents = [nest.extent(d) for d in t.dims]
        if self.optimize and is_flat(op, self.fused):
            space, extents = None, [nest.count(t)]
        ivs, fors, _ = nest.open_loops(extents[:-1], parallel=parallel)
        if self.optimize and space is not None:
            self.hoist(op, ivs, t.dims)
        last, inner, _ = nest.open_loops(extents[-1:], parallel=parallel and not fors)
        ivs += last
        value = self.compute(op, [self.read(v, ivs, space) for v in op.operands])
        at = ivs[0] if space is None else nest.index(t, ivs, t.dims)
        nest.store(value, out, at, t.dt)
        nest.close_loops([*fors, *inner])
        self.hoisted.clear()

    def hoist(self, op: Operation, ivs: list[SSAValue], space: tuple[int | str, ...]) -> None:
        """Load before the innermost loop the elements it reads at one place for all its
        iterations (operands broadcast along the last axis): in the loop they would be
        loads LLVM cannot move past the stores, which keep it from vectorizing."""
        if not space:
            return
        point = [*ivs, self.nest.zero]
        for operand in op.operands:
            for leaf in flat_leaves(operand, self.fused):
                t = leaf.type
                invariant = isinstance(t, TensorType) and (t.is_scalar or t.dims[-1] == 1)
                if invariant and leaf in self.values and leaf not in self.hoisted:
                    self.hoisted[leaf] = self.read(leaf, point, space)

    def compute(self, op: Operation, args: list[SSAValue]) -> SSAValue:
        """The scalar result of element-wise `op` on its operands' elements `args`."""
        x = op.operands[0].type
        assert isinstance(x, TensorType)
        s = self.nest.scalars
        if isinstance(op, UnaryOp):
            value = s.unary(op.OPCODE, x.dt, args[0])
        elif isinstance(op, BinaryOp):
            value = s.binary(op.OPCODE, x.dt, args[0], args[1])
        elif isinstance(op, NotOp):
            value = s.not_(args[0])
        elif isinstance(op, SelectOp):
            value = s.select(args[2], args[0], args[1])
        else:
            assert isinstance(op, DataTypeCastOp)
            value = s.cast(args[0], x.dt, op.dtype.data)
        return value

    def lower_dot(self, op: DotOp, out: SSAValue) -> None:
        """`out[b, i, j] = 0 + lhs[b, i, 0] * rhs[b, 0, j] + lhs[b, i, 1] * rhs[b, 1, j] +
        ...` for each batch index `b` (none for rank 2): rows of `out` accumulate in
        place, k outside j (unit-stride inner loops over `rhs` and `out` rows), each
        element summed in k order as a k-innermost loop would."""
        nest = self.nest
        lhs, rhs, t = op.lhs.type, op.rhs.type, op.result.type
        assert isinstance(lhs, TensorType) and isinstance(rhs, TensorType)
        assert isinstance(t, TensorType)
        self.values[op.result] = out
        if self.optimize:
            work = [*lhs.dims, t.dims[-1]]  # multiply-adds: batch x rows x inner x columns
            dot = DotEmitter(nest, op, out, self.read, self.values, (self.fma, self.target))
            nest.threads(work, dot.emit)
            return
        batch, outer, _ = nest.open_loops([nest.extent(d) for d in t.dims[:-2]])
        (i,), rows, _ = nest.open_loops([nest.extent(t.dims[-2])])
        (j,), zeros, _ = nest.open_loops([nest.extent(t.dims[-1])])
        zero = nest.scalars.const(0, t.dt)
        nest.store(zero, out, nest.index(t, [*batch, i, j], t.dims), t.dt)
        nest.close_loops(zeros)
        (k, j), inner, _ = nest.open_loops([nest.extent(lhs.dims[-1]), nest.extent(t.dims[-1])])
        a = self.read(op.lhs, [*batch, i, k], lhs.dims)
        b = self.read(op.rhs, [*batch, k, j], rhs.dims)
        at = nest.index(t, [*batch, i, j], t.dims)
        acc = nest.load(out, at, t.dt)
        product = nest.scalars.binary("multiply", t.dt, a, b)
        nest.store(nest.scalars.binary("add", t.dt, acc, product), out, at, t.dt)
        nest.close_loops([*outer, *rows, *inner])

    def lower_transpose(self, op: TransposeOp, out: SSAValue) -> None:
        rows = op.operand in self.views  # (copies rows: `View.walks_rows`)
        transpose_nest(self.nest, op, out, self.read, (self.optimize, rows))
        self.values[op.result] = out

    def lower_gather(self, op: GatherOp, out: SSAValue) -> None:
        check_indices(self.nest, op, self.read)
        t = op.result.type
        assert isinstance(t, TensorType)
        work = t.dims if self.optimize else None
        self.nest.threads(work, lambda p: gather_nest(self.nest, op, out, self.read, p))
        self.values[op.result] = out

    def lower_reduce(self, op: ReduceOp, out: SSAValue) -> None:
        x = op.operand.type
        assert isinstance(x, TensorType)
        work = x.dims if self.optimize else None
        self.nest.threads(work, lambda parallel: self.reduce_nest(op, out, parallel))
        self.values[op.result] = out

    def reduce_nest(self, op: ReduceOp, out: SSAValue, parallel: bool) -> None:
        """`out[kept] = init (+) x[kept, reduced...]` over the reduced axes in order."""
        nest = self.nest
        x, t = op.operand.type, op.result.type
        assert isinstance(x, TensorType) and isinstance(t, TensorType)
        axes = [d.data for d in op.dims.data]
        kept = [i for i in range(x.rank) if i not in axes]
        ivs, outer, _ = nest.open_loops([nest.extent(x.dims[i]) for i in kept], parallel=parallel)
        init = self.read(op.init, [], ())
        reduced, inner, acc = nest.open_loops([nest.extent(x.dims[i]) for i in axes], init)
        assert acc is not None and op.combinator is not None
        point = dict(zip(kept, ivs, strict=True)) | dict(zip(axes, reduced, strict=True))
        element = self.read(op.operand, [point[i] for i in range(x.rank)], x.dims)
        combined = nest.scalars.binary(op.combinator.data, x.dt, acc, element)
        if self.optimize and axes and axes[-1] == x.rank - 1:
            reassociate(combined)  # a contiguous innermost walk: vector partial sums
        total = nest.close_loops(inner, combined) if inner else combined
        assert total is not None
        nest.store(total, out, nest.index(t, ivs, t.dims), t.dt)
        nest.close_loops(outer)

    def lower_return(self, op: graph.ReturnOp) -> None:
        """A returned value not computed into its output (a parameter, a literal, a value
        returned twice) is copied."""
        for value, out, t in zip(self.results, self.out_args, self.outputs, strict=True):
            if self.values.get(value) is not out:
                self.copy_out(value, out, t)

    def copy_out(self, value: SSAValue, out: SSAValue, t: TensorType) -> None:
        nest = self.nest

        def copy(parallel: bool) -> None:
            ivs, fors, _ = nest.open_loops([nest.extent(d) for d in t.dims], parallel=parallel)
            at = nest.index(t, ivs, t.dims)
            nest.store(self.read(value, ivs, t.dims), out, at, t.dt)
            nest.close_loops(fors)

        nest.threads(t.dims if self.optimize else None, copy)
