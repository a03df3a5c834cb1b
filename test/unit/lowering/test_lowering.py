"""Structure of lower-graph-to-tensor and lower-tensor-to-loop on hand-built graph IR."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from graph_builders import attr, graph_module, inferred_op
from xdsl.dialects import arith
from xdsl.dialects.builtin import MemRefType, ModuleOp, StringAttr, i8
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from dlc.diagnostics import DiagnosticError, Location, set_loc
from dlc.dialects import graph, loop, tensor
from dlc.dialects import graph_elementwise as ge
from dlc.dialects import graph_memory as gm
from dlc.dialects import graph_tensor as gt
from dlc.dialects.graph_literal import LiteralAttr
from dlc.dialects.graph_types import FunctionType, TensorType, TupleType
from dlc.lowering.graph_to_tensor.lower_graph_to_tensor import LowerGraphToTensorPass
from dlc.lowering.tensor_to_loop.lower_tensor_to_loop import LowerTensorToLoopPass
from dlc.passes.tensor.schedule import SchedulePass

T = TensorType


class FunctionBuilder:
    """Builds a single-block graph function op by op (types from each op's `infer`)."""

    def __init__(self, name: str, arg_types: Sequence[Attribute]):
        self.name = name
        self.arg_types = list(arg_types)
        self.block = Block(arg_types=self.arg_types)
        self.args = self.block.args
        self.line = 1

    def op(self, cls: type[Operation], *operands: SSAValue, **props: Any) -> SSAValue:
        """Append `cls(operands)`; Python ints/strings/lists in props become attributes."""
        return self._add(inferred_op(cls, operands, {k: attr(v) for k, v in props.items()}))

    def lit(self, tree: tuple, t: Attribute, *elements: SSAValue, inline: bool = False) -> SSAValue:
        return self._add(graph.LiteralOp(LiteralAttr(tree), t, elements, inline))

    def const(self, value: int | float | bool, dtype: str) -> SSAValue:
        kind = "bool" if isinstance(value, bool) else "float" if isinstance(value, float) else "int"
        return self.lit((kind, value), T((), dtype), inline=True)

    def _add(self, new: Operation) -> Any:
        self.line += 1
        set_loc(new, Location("test.dl", self.line, 5, "    op"))
        self.block.add_op(new)
        return new.results[0] if new.results else new

    def ret(self, value: SSAValue | None) -> graph.FuncOp:
        self.block.add_op(graph.ReturnOp(value))
        out = value.type if value is not None else TupleType([])
        return graph.FuncOp(self.name, FunctionType(self.arg_types, out), Region(self.block))


def to_tensor(module: ModuleOp) -> ModuleOp:
    LowerGraphToTensorPass().apply(None, module)  # type: ignore[arg-type]
    module.verify()
    return module


def to_loop(module: ModuleOp, *, scheduled: bool = False) -> ModuleOp:
    """Down to the loop level; `scheduled`: with the default schedules (group=false)."""
    to_tensor(module)
    if scheduled:
        SchedulePass(group=False).apply(None, module)  # type: ignore[arg-type]
    LowerTensorToLoopPass().apply(None, module)  # type: ignore[arg-type]
    module.verify()
    return module


def ops_of(op: Operation, kind: type[Operation]) -> list[Any]:
    return [o for o in op.walk() if isinstance(o, kind)]


def only_func(module: ModuleOp) -> Any:
    (func,) = list(module.body.block.ops)
    return func


# ---------------------------------------------------------------------------
# graph -> tensor
# ---------------------------------------------------------------------------


def test_broadcast_add_reads_index_zero_for_size_one_dims() -> None:
    fb = FunctionBuilder("f", [T((2, 3), "f32"), T((1, 3), "f32")])
    x, y = fb.args
    func = to_tensor(graph_module(fb.ret(fb.op(ge.AddOp, x, y))))
    (compute,) = ops_of(func, tensor.ComputeOp)
    lhs, rhs = ops_of(compute, tensor.ReadOp)
    i, j = compute.body.block.args
    assert list(lhs.indices) == [i, j]
    zero = rhs.indices[0].owner
    assert isinstance(zero, arith.ConstantOp) and zero.value.value.data == 0
    assert rhs.indices[1] is j
    assert ops_of(compute, arith.AddfOp)


def test_inline_scalar_literal_is_a_constant_not_a_read() -> None:
    fb = FunctionBuilder("f", [T((4,), "f64")])
    out = fb.op(ge.MultiplyOp, fb.args[0], fb.const(2.0, "f64"))
    module = to_tensor(graph_module(fb.ret(out)))
    (compute,) = ops_of(module, tensor.ComputeOp)
    assert len(ops_of(compute, tensor.ReadOp)) == 1
    assert list(compute.inputs) == [only_func(module).args[0]]


def test_dot_is_a_reduction_over_the_inner_dimension() -> None:
    fb = FunctionBuilder("f", [T((2, 5, 3), "f32"), T((2, 3, 4), "f32")])
    module = to_tensor(graph_module(fb.ret(fb.op(gt.DotOp, *fb.args))))
    (compute,) = ops_of(module, tensor.ComputeOp)
    assert compute.reduction_extents == (3,)
    assert compute.combinator.data == "add"
    assert compute.init_value is not None and compute.init is None
    assert len(compute.body.block.args) == 4


def test_reduce_keeps_its_init_operand_when_not_constant() -> None:
    fb = FunctionBuilder("f", [T((2, 3, 4), "i32"), T((), "i32")])
    x, init = fb.args
    r = fb.op(gt.ReduceOp, x, init, combinator="max", dims=[2, 0])
    module = to_tensor(graph_module(fb.ret(r)))
    (compute,) = ops_of(module, tensor.ComputeOp)
    assert compute.reduction_extents == (2, 4)
    assert compute.init is only_func(module).args[1]
    assert compute.result.type == T((3,), "i32")


def test_tuple_results_are_flattened_and_extract_resolves_at_compile_time() -> None:
    fb = FunctionBuilder("f", [T((3,), "f32"), T((), "i64")])
    x, n = fb.args
    pair = fb.lit(("tuple", (("operand", 0), ("operand", 1))), TupleType([x.type, n.type]), x, n)
    nested = fb.lit(
        ("tuple", (("operand", 0), ("int", 7))), TupleType([pair.type, T((), "i64")]), pair
    )
    first = fb.op(gm.ExtractOp, nested, keys=[0, 0])
    neg = fb.op(ge.NegateOp, first)
    result = fb.lit(
        ("tuple", (("operand", 0), ("operand", 1))), TupleType([neg.type, nested.type]), neg, nested
    )
    module = to_tensor(graph_module(fb.ret(result)))
    func = only_func(module)
    outputs = func.function_type.outputs.data
    assert outputs == (T((3,), "f32"), T((3,), "f32"), T((), "i64"), T((), "i64"))
    ret = func.body.block.last_op
    assert ret.values[1] is func.args[0] and ret.values[2] is func.args[1]
    # the splat 7 is materialized as a compute yielding a constant
    assert isinstance(ret.values[3].owner, tensor.ComputeOp)


def test_dense_literal_becomes_tensor_constant_and_splat_is_inlined() -> None:
    fb = FunctionBuilder("f", [T((2,), "i8")])
    dense = fb.lit(("tensor", (("int", 1), ("int", -2))), T((2,), "i8"))
    splat = fb.lit(("int", 3), T((2,), "i8"))
    out = fb.op(ge.AddOp, fb.op(ge.AddOp, fb.args[0], dense), splat)
    module = to_tensor(graph_module(fb.ret(out)))
    (constant,) = ops_of(module, tensor.ConstantOp)
    assert constant.values == (1, -2)
    assert len(ops_of(module, tensor.ComputeOp)) == 2


def test_declarations_are_dropped() -> None:
    ext = graph.FuncOp("ext", FunctionType([T((), "f32")], T((), "f32")), decl=StringAttr("extern"))
    fb = FunctionBuilder("f", [T((), "f32")])
    module = to_tensor(graph_module(ext, fb.ret(fb.op(ge.ExpOp, fb.args[0]))))
    assert [o.name for o in module.body.block.ops] == ["tensor.func"]
    LowerTensorToLoopPass().apply(None, module)  # type: ignore[arg-type]
    assert [o.name for o in module.body.block.ops] == ["loop.func"]


def _expect_unsupported(module: ModuleOp, what: str, line: int) -> None:
    with pytest.raises(DiagnosticError) as info:
        to_tensor(module)
    assert info.value.message == f"not supported by the code generator yet: {what}"
    assert info.value.line == line


def test_unsupported_op_is_reported_at_the_op() -> None:
    fb = FunctionBuilder("f", [T((4,), "i32")])
    fb.op(ge.AddOp, fb.args[0], fb.args[0])
    fb.op(ge.DataTypeCastOp, fb.args[0], dtype="i33")  # stacks etc. are supported now
    _expect_unsupported(graph_module(fb.ret(None)), "i33 data type", 3)


def test_unsupported_integer_width() -> None:
    fb = FunctionBuilder("f", [T((4,), "i32")])
    y = fb.op(ge.DataTypeCastOp, fb.args[0], dtype="i33")
    _expect_unsupported(graph_module(fb.ret(y)), "i33 data type", 2)


def test_control_flow_lowers_to_a_tensor_cfg() -> None:
    entry = Block(arg_types=[T((), "bool")])
    exit_block = Block()
    exit_block.add_op(graph.ReturnOp())
    branch = graph.ConditionalOp(entry.args[0], exit_block, [], exit_block, [])
    set_loc(branch, Location("test.dl", 9, 5, ""))
    entry.add_op(branch)
    func = graph.FuncOp(
        "f", FunctionType([T((), "bool")], TupleType([])), Region([entry, exit_block])
    )
    lowered = only_func(to_tensor(graph_module(func)))
    assert isinstance(lowered, tensor.FuncOp)
    assert len(lowered.body.blocks) == 2
    assert isinstance(lowered.body.blocks[0].last_op, tensor.CondBrOp)
    assert isinstance(lowered.body.blocks[1].last_op, tensor.ReturnOp)


# ---------------------------------------------------------------------------
# tensor -> loop
# ---------------------------------------------------------------------------


def _exp_log(shape: tuple[int, ...] = (2, 3)) -> ModuleOp:
    fb = FunctionBuilder("f", [T(shape, "f32")])
    e = fb.op(ge.ExpOp, fb.args[0])
    out = fb.op(ge.LogOp, e)
    return graph_module(fb.ret(out))


def test_results_write_into_output_buffers_and_intermediates_are_freed() -> None:
    func = only_func(to_loop(_exp_log()))
    assert isinstance(func, loop.FuncOp)
    x, result = func.args
    allocs, deallocs = ops_of(func, loop.AllocOp), ops_of(func, loop.DeallocOp)
    assert len(allocs) == 1 and [d.buffer for d in deallocs] == [allocs[0].res]
    stores = ops_of(func, loop.StoreOp)
    assert [s.buffer for s in stores] == [allocs[0].res, result]
    fors = ops_of(func, loop.ForOp)
    assert len(fors) == 4 and all(f.parallel is None for f in fors)  # no schedule: serial
    small = only_func(to_loop(_exp_log(), scheduled=True))
    assert all(f.parallel is None for f in ops_of(small, loop.ForOp))  # not worth threads
    large = only_func(to_loop(_exp_log((512, 512)), scheduled=True))
    flags = [f.parallel is not None for f in ops_of(large, loop.ForOp)]
    assert flags == [True, False, True, False]  # each nest's outer loop


def test_returned_argument_and_duplicate_results_are_copied() -> None:
    fb = FunctionBuilder("f", [T((3,), "f32")])
    x = fb.args[0]
    e = fb.op(ge.ExpOp, x)
    result = fb.lit(
        ("tuple", (("operand", 0), ("operand", 1), ("operand", 1))), TupleType([x.type] * 3), x, e
    )
    func = only_func(to_loop(graph_module(fb.ret(result))))
    _, out0, out1, out2 = func.args
    copies = [(c.source, c.dest) for c in ops_of(func, loop.CopyOp)]
    assert copies == [(func.args[0], out0), (out1, out2)]
    assert not ops_of(func, loop.AllocOp)


def test_reduction_loop_carries_an_accumulator() -> None:
    fb = FunctionBuilder("f", [T((4, 5), "f32")])
    x = fb.args[0]
    s = fb.op(gt.ReduceOp, x, fb.const(0.0, "f32"), combinator="add", dims=[1])
    func = only_func(to_loop(graph_module(fb.ret(s)), scheduled=True))
    outer, inner = ops_of(func, loop.ForOp)
    assert outer.parallel is None and inner.parallel is None  # small: serial
    assert len(inner.iter_inits) == 1 and len(inner.res) == 1
    (store,) = ops_of(func, loop.StoreOp)
    assert store.value is inner.res[0]


def test_bool_tensors_are_i8_buffers() -> None:
    fb = FunctionBuilder("f", [T((3,), "f32"), T((3,), "f32")])
    lt = fb.op(ge.COMPARE_OPS["lessThan"], *fb.args)
    func = only_func(to_loop(graph_module(fb.ret(fb.op(ge.NotOp, lt)))))
    assert func.args[2].type == MemRefType(i8, [3])
    assert len(ops_of(func, arith.ExtUIOp)) == 2  # one per stored compute
    assert len(ops_of(func, arith.TruncIOp)) == 1  # the load of the comparison


def test_rank_zero_compute_has_no_loops() -> None:
    fb = FunctionBuilder("f", [T((), "i64"), T((), "i64")])
    func = only_func(to_loop(graph_module(fb.ret(fb.op(ge.BINARY_OPS["floorDivide"], *fb.args)))))
    assert not ops_of(func, loop.ForOp)
    (store,) = ops_of(func, loop.StoreOp)
    assert not store.indices
