"""lower-graph-to-tensor: straight-line graph functions -> `tensor.func` of computes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.builder import Builder, InsertPoint
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass

from dlc.diagnostics import copy_loc, error_at
from dlc.dialects import graph, tensor
from dlc.dialects.graph_literal import LitTree
from dlc.dialects.graph_types import TensorType, TupleType, format_type
from dlc.lowering.compute_builder import BodyBuilder, Lowered, Splat, build_compute
from dlc.lowering.graph_to_tensor_ops import UnsupportedOp, rule_for
from dlc.lowering.scalar_ops import Unsupported

UNSUPPORTED = "not supported by the code generator yet: "


def check_type(op: Operation, t: Attribute) -> None:
    """Tensors of supported data types, possibly nested in tuples."""
    stack = [t]
    while stack:
        t = stack.pop()
        if isinstance(t, TupleType):
            stack.extend(t.types)
        elif not isinstance(t, TensorType):
            raise error_at(op, UNSUPPORTED + f"values of type {format_type(t)}")
        elif t.dt not in tensor.SUPPORTED_DTYPES:
            raise error_at(op, UNSUPPORTED + f"{t.dt} data type")


def flatten(value: Lowered) -> list[SSAValue | Splat]:
    """Leaves of a (nested) tuple in order."""
    out: list[SSAValue | Splat] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(reversed(v))
        else:
            out.append(v)
    return out


def flatten_type(t: Attribute) -> list[TensorType]:
    out: list[TensorType] = []
    stack = [t]
    while stack:
        t = stack.pop()
        if isinstance(t, TupleType):
            stack.extend(reversed(t.types))
        else:
            assert isinstance(t, TensorType)
            out.append(t)
    return out


def materialize(b: Builder, value: SSAValue | Splat) -> SSAValue:
    """A splat as a tensor value (a compute yielding the constant)."""
    if isinstance(value, SSAValue):
        return value
    return build_compute(b, value.type, lambda s, i, _: s.read(value, i)).result


@dataclass
class _Segment:
    """Part of a tensor literal: the elements under index `prefix`."""

    prefix: tuple[int, ...]
    tree: LitTree
    type: TensorType


def tensor_literal(
    b: Builder, op: graph.LiteralOp, tree: LitTree, t: TensorType, args: list[Lowered]
) -> Lowered:
    """`<...>` literal: dense constant, splat, or computed when elements are values."""
    segments = _segments(tree, t)
    values = [s for s in segments if s.tree[0] == "operand"]
    data = _dense(segments, t)
    if len(set(data)) <= 1 and not values:  # empty or uniform
        return Splat(data[0] if data else 0, t)
    if not values:
        return b.insert(tensor.ConstantOp(t, data)).result
    base: Lowered = b.insert(tensor.ConstantOp(t, data)).result if data else Splat(0, t)

    def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        acc = s.read(base, i)
        for seg in values:
            hit = s.all_equal(i[: len(seg.prefix)], seg.prefix)
            acc = s.select(hit, s.read(args[seg.tree[1]], i[len(seg.prefix) :]), acc)
        return acc

    return build_compute(b, t, body).result


def _segments(tree: LitTree, t: TensorType) -> list[_Segment]:
    """Row-major leaves of a tensor literal: scalars, splats and value elements."""
    out: list[_Segment] = []
    stack = [_Segment((), tree, t)]
    while stack:
        seg = stack.pop()
        if seg.tree[0] != "tensor":
            out.append(seg)
            continue
        sub = seg.type.with_shape(seg.type.dims[1:])
        stack.extend(
            _Segment((*seg.prefix, k), e, sub) for k, e in reversed(list(enumerate(seg.tree[1])))
        )
    return out


def _dense(segments: list[_Segment], t: TensorType) -> list[int | float | bool]:
    """The constant data, value elements filled with 0."""
    data: list[int | float | bool] = []
    for seg in segments:
        kind = seg.tree[0]
        value = seg.tree[1] if kind in ("int", "float", "bool") else 0
        data.extend([value] * seg.type.num_elements)
    if t.dt == "bool":
        return [bool(v) for v in data]
    return data


def lower_literal(b: Builder, op: graph.LiteralOp, args: list[Lowered]) -> Lowered:
    """Scalars and splats stay compile-time `Splat`s; tuples become Python lists."""
    root: list[Lowered] = []
    stack: list[tuple[LitTree, Attribute, list[Lowered]]] = [(op.value.data, op.result.type, root)]
    while stack:
        tree, t, out = stack.pop()
        kind = tree[0]
        if kind == "operand":
            out.append(args[tree[1]])
        elif kind == "tuple" and isinstance(t, TupleType):
            items: list[Lowered] = []
            out.append(items)
            stack.extend(
                (e, et, items) for e, et in reversed(list(zip(tree[1], t.types, strict=True)))
            )
        elif not isinstance(t, TensorType):
            raise error_at(op, UNSUPPORTED + f"literal of type {format_type(t)}")
        elif kind in ("int", "float", "bool"):
            out.append(Splat(tree[1], t))
        elif kind in ("zero", "undefined"):
            out.append(Splat(False if t.dt == "bool" else 0, t))
        elif kind == "tensor":
            out.append(tensor_literal(b, op, tree, t, args))
        else:
            raise error_at(op, UNSUPPORTED + f"literal {kind}")
    return root[0]


class FunctionLowering:
    """Lowers one graph function definition to a `tensor.func`."""

    def __init__(self, func: graph.FuncOp):
        self.func = func
        self.values: dict[SSAValue, Lowered] = {}

    def run(self) -> tensor.FuncOp:
        ftype = self.func.function_type
        for t in ftype.args:
            if not isinstance(t, TensorType):
                raise error_at(self.func, UNSUPPORTED + f"argument of type {format_type(t)}")
            check_type(self.func, t)
        entry = self.func.entry
        assert entry is not None
        for op in entry.ops:
            self.precheck(op)
        check_type(self.func, ftype.output)
        outputs = flatten_type(ftype.output)
        result = tensor.FuncOp(self.func.sym_name.data, list(ftype.args), outputs)
        copy_loc(self.func, result)
        self.values.update(zip(entry.args, result.args, strict=True))
        builder = Builder(InsertPoint.at_end(result.body.block))
        for op in entry.ops:
            self.lower_op(builder, op)
        return result

    def lower_op(self, b: Builder, op: Operation) -> None:
        if isinstance(op, graph.ReturnOp):
            leaves = flatten(self.values[op.value]) if op.value is not None else []
            ret = b.insert(tensor.ReturnOp(*(materialize(b, v) for v in leaves)))
            copy_loc(op, ret)
            return
        args = [self.values[o] for o in op.operands]
        before = len(b.insertion_point.block.ops)  # type: ignore[union-attr]
        try:
            self.values[op.results[0]] = self.dispatch(b, op, args)
        except (UnsupportedOp, Unsupported) as err:
            raise error_at(op, UNSUPPORTED + str(err)) from None
        block = b.insertion_point.block
        for new in list(block.ops)[before:]:
            copy_loc(op, new)

    def precheck(self, op: Operation) -> None:
        """Unsupported opcodes and data types, reported at the op before any lowering."""
        if isinstance(op, graph.ReturnOp):
            return
        if not isinstance(op, graph.LiteralOp) and (rule_for(op) is None or not op.results):
            raise error_at(op, UNSUPPORTED + getattr(op, "OPCODE", op.name))
        for r in op.results:
            check_type(op, r.type)

    def dispatch(self, b: Builder, op: Operation, args: list[Lowered]) -> Lowered:
        if isinstance(op, graph.LiteralOp):
            return lower_literal(b, op, args)
        rule = rule_for(op)
        assert rule is not None
        return rule(b, op, args)


class LowerGraphToTensorPass(ModulePass):
    """Graph level -> tensor level.

    Input: a verified graph module. Every function definition whose body is a single
    block of supported ops becomes a `tensor.func` (tuple results flattened); each op
    becomes one `tensor.compute` (or a `tensor.constant`, or a compile-time splat/tuple).
    Declarations (extern, adjoint functions, types, vars) have no code and are
    dropped, so the result is purely tensor level. Anything else raises a located
    "not supported by the code generator yet: <opcode>" diagnostic.
    """

    name = "lower-graph-to-tensor"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in list(op.body.block.ops):
            if isinstance(func, graph.FuncOp) and not func.is_declaration:
                _check_single_block(func)
                op.body.block.insert_op_before(FunctionLowering(func).run(), func)
            func.detach()
            func.erase(safe_erase=False)


def _check_single_block(func: graph.FuncOp) -> None:
    entry = func.entry
    assert entry is not None
    terminator = entry.last_op
    if not isinstance(terminator, graph.ReturnOp):
        opcode = getattr(terminator, "OPCODE", None) or (
            terminator.name if terminator else "branch"
        )
        raise error_at(terminator or func, UNSUPPORTED + _terminator_opcode(opcode))


def _terminator_opcode(name: str) -> str:
    return {
        "graph.branch": "branch",
        "graph.conditional": "conditional",
        "graph.branch_enum": "branchEnum",
    }.get(name, name)
