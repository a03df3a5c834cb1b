"""Element-wise definition ops of the `tensor` dialect: `tensor.compute` and its body
ops (`tensor.read`, `tensor.yield`), `tensor.constant` and `tensor.scan`.

    %y = tensor.compute(%x, %w) reduce [8] by "add" init 0.000000e+00 : f32
             schedule #schedule.nest<parallel [d0, d1]> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %a = tensor.read %x[%i, %k] : !graph.tensor<4x8xf32>
      %b = tensor.read %w[%k, %j] : !graph.tensor<8x16xf32>
      %p = arith.mulf %a, %b : f32
      tensor.yield %p : f32
    } : (!graph.tensor<4x8xf32>, !graph.tensor<8x16xf32>) -> !graph.tensor<4x16xf32>
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
from xdsl.dialects.builtin import (
    ArrayAttr,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    i64,
)
from xdsl.dialects.builtin import TensorType as BuiltinTensorType
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from dlc.dialects.formats import Int
from dlc.dialects.graph_literal import all_equal
from dlc.dialects.graph_types import TensorType, format_type
from dlc.dialects.schedule import ScheduleAttr
from dlc.dialects.tensor_types import (
    SUPPORTED_DTYPES,
    bf16_bits,
    dtype_of_scalar,
    scalar_type,
    tensor_type,
)


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """`tensor.constant dense<[1, -2, 3]> : tensor<3xi8>`: a literal tensor with dense
    data (bool data as i1); the result type follows from the data's type."""

    name = "tensor.constant"
    value = prop_def(DenseIntOrFPElementsAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(self, result_type: TensorType, values: Sequence[int | float | bool]):
        element = scalar_type(result_type.dt)
        dense: DenseIntOrFPElementsAttr
        if isinstance(element, IntegerType):  # integers, bool (i1) and bf16 (its bits)
            bf16 = result_type.dt == "bf16"
            ints = [bf16_bits(v) if bf16 else int(v) for v in values]
            dense = DenseIntOrFPElementsAttr.from_list(
                BuiltinTensorType(element, result_type.dims), ints
            )
        else:
            floats = [float(v) for v in values]
            dense = DenseIntOrFPElementsAttr.from_list(
                BuiltinTensorType(element, result_type.dims), floats
            )
        super().__init__(result_types=[result_type], properties={"value": dense})

    @classmethod
    def from_bytes(cls, result_type: TensorType, raw: bytes) -> ConstantOp:
        """The constant whose elements are `raw`, the little-endian row-major bytes of
        the data type's NumPy array (a graph dense literal's payload; bool: bytes 0 and
        1, stored here as i1 data 0 and 0xff, as `from_list` packs them)."""
        if result_type.dt == "bool":
            raw = (np.frombuffer(raw, np.uint8) * np.uint8(0xFF)).tobytes()
        data_type = BuiltinTensorType(scalar_type(result_type.dt), result_type.dims)
        dense = DenseIntOrFPElementsAttr(data_type, BytesAttr(raw))
        return cls.build(result_types=[result_type], properties={"value": dense})

    def is_splat(self) -> bool:
        """Whether every element has the bits of the first (in bulk)."""
        size = self.value.get_element_type().compile_time_size
        return all_equal(np.frombuffer(self.value.data.data, np.dtype(f"V{size}")))

    def verify_(self) -> None:
        t = tensor_type(self.result, "tensor.constant")
        if tuple(self.value.get_shape()) != t.dims:
            raise VerifyException(
                f"tensor.constant: data shape {self.value.get_shape()} differs from {format_type(t)}"
            )

    @property
    def values(self) -> tuple[int | float, ...]:
        return self.value.get_values()

    def print(self, printer: Printer) -> None:
        printer.print_op_attributes(self.attributes)
        printer.print_string(" ")
        printer.print_attribute(self.value)

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        attrs = parser.parse_optional_attr_dict()
        start = parser.pos
        value = parser.parse_attribute()
        if not isinstance(value, DenseIntOrFPElementsAttr):
            parser.raise_error("tensor.constant: expected dense data", start, parser.pos)
        dtype = dtype_of_scalar(value.get_element_type())
        if dtype is None:
            message = f"tensor.constant: no tensor of {value.get_element_type()}"
            parser.raise_error(message, start, parser.pos)
        result_type = TensorType(tuple(value.get_shape()), dtype)
        return cls.build(result_types=[result_type], properties={"value": value}, attributes=attrs)


@irdl_op_definition
class ComputeOp(IRDLOperation):
    """`tensor.compute`: result[i...] = body(i...) or fold over the reduction axes.

    Operands: `inputs` (tensors the body reads) and an optional rank-0 `init`.
    Properties: `reduction` (extents of the reduction axes), `combinator` (a DLVM
    binary opcode), `init_value` (a constant init when there is no `init` operand),
    `schedule` (how the nest runs, a `#schedule.nest`; none: the plain nest, output
    loops then reduction loops). Syntax (module docstring):

        tensor.compute(inputs) [reduce [extents] by "combinator"]
            [init value : type | init %operand : type] [schedule #schedule.nest<...>]
            [attributes {...}] { ^bb0(indices): body } : (input types) -> result type
    """

    name = "tensor.compute"
    inputs = var_operand_def(TensorType)
    init = opt_operand_def(TensorType)
    reduction = opt_prop_def(ArrayAttr[IntAttr])
    combinator = opt_prop_def(StringAttr)
    init_value = opt_prop_def(Attribute)
    schedule = opt_prop_def(ScheduleAttr)
    result = result_def(TensorType)
    body = region_def("single_block")
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(Pure())

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        result_type: TensorType,
        body: Block,
        *,
        reduction: Sequence[int] = (),
        combinator: str | None = None,
        init: SSAValue | None = None,
        init_value: Attribute | None = None,
    ):
        props: dict[str, Attribute | None] = {}
        if combinator is not None:
            props["reduction"] = ArrayAttr([IntAttr(n) for n in reduction])
            props["combinator"] = StringAttr(combinator)
            props["init_value"] = init_value
        super().__init__(
            operands=[list(inputs), [init] if init is not None else []],
            result_types=[result_type],
            properties=props,
            regions=[Region(body)],
        )

    @property
    def reduction_extents(self) -> tuple[int, ...]:
        return tuple(n.data for n in self.reduction.data) if self.reduction else ()

    @property
    def domain(self) -> tuple[int, ...]:
        return tensor_type(self.result, "tensor.compute").dims

    def verify_(self) -> None:
        out = tensor_type(self.result, "tensor.compute")
        block = self.body.block
        want = out.rank + len(self.reduction_extents)
        if len(block.args) != want or any(a.type != i64 for a in block.args):
            raise VerifyException(f"tensor.compute: body needs {want} i64 index arguments")
        yield_op = block.last_op
        if not isinstance(yield_op, YieldOp) or yield_op.value.type != scalar_type(out.dt):
            raise VerifyException(
                f"tensor.compute: body must yield one {scalar_type(out.dt)} for {format_type(out)}"
            )
        self._verify_reduction(out)
        if self.schedule is not None:
            why = self.schedule.check(self.domain, self.reduction_extents)
            if why is not None:
                raise VerifyException(f"tensor.compute: schedule: {why}")

    def _verify_reduction(self, out: TensorType) -> None:
        has_comb = self.combinator is not None
        if has_comb != (self.reduction is not None):
            raise VerifyException("tensor.compute: reduction and combinator go together")
        if not has_comb:
            if self.init is not None or self.init_value is not None:
                raise VerifyException("tensor.compute: init without a reduction")
            return
        if (self.init is None) == (self.init_value is None):
            raise VerifyException("tensor.compute: a reduction needs exactly one init")
        if self.init is not None and self.init.type != TensorType((), out.dt):
            raise VerifyException(f"tensor.compute: init must be a {out.dt} scalar")
        if self.init_value is not None and not isinstance(self.init_value, IntegerAttr | FloatAttr):
            raise VerifyException(
                "tensor.compute: init_value must be an integer or float attribute"
            )

    def print(self, printer: Printer) -> None:
        printer.print_operands(self.inputs)
        if self.reduction is not None:
            printer.print_string(" reduce [")
            printer.print_list(self.reduction_extents, lambda n: printer.print_string(str(n)))
            printer.print_string("]")
        if self.combinator is not None:
            printer.print_string(" by ")
            printer.print_string_literal(self.combinator.data)
        if self.init is not None:
            printer.print_string(" init ")
            printer.print_operand(self.init)
            printer.print_string(" : ")
            printer.print_attribute(self.init.type)
        elif self.init_value is not None:
            printer.print_string(" init ")
            printer.print_attribute(self.init_value)
        if self.schedule is not None:
            printer.print_string(" schedule ")
            printer.print_attribute(self.schedule)
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body)
        printer.print_string(" : ")
        printer.print_function_type((v.type for v in self.inputs), (self.result.type,))

    @classmethod
    def parse(cls, parser: Parser) -> ComputeOp:
        pos = parser.pos
        inputs = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, parser.parse_unresolved_operand
        )
        props: dict[str, Attribute] = {}
        if parser.parse_optional_keyword("reduce"):
            extents = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, lambda: parser.parse_integer(False, False)
            )
            props["reduction"] = ArrayAttr([IntAttr(n) for n in extents])
        if parser.parse_optional_keyword("by"):
            props["combinator"] = StringAttr(parser.parse_str_literal())
        init: list[SSAValue] = []
        if parser.parse_optional_keyword("init"):
            operand = parser.parse_optional_unresolved_operand()
            if operand is None:
                props["init_value"] = parser.parse_attribute()
            else:
                parser.parse_punctuation(":")
                init.append(parser.resolve_operand(operand, parser.parse_type()))
        if parser.parse_optional_keyword("schedule"):
            props["schedule"] = parser.parse_attribute()
        attrs = parser.parse_optional_attr_dict_with_keyword()
        body = parser.parse_region()
        parser.parse_punctuation(":")
        types_pos = parser.pos
        function_type = parser.parse_function_type()
        if len(function_type.outputs.data) != 1:
            parser.raise_error("tensor.compute: expected one result type", types_pos, parser.pos)
        return cls.build(
            operands=[parser.resolve_operands(inputs, function_type.inputs.data, pos), init],
            result_types=[function_type.outputs.data[0]],
            properties=props,
            attributes=attrs.data if attrs is not None else {},
            regions=[body],
        )


@irdl_op_definition
class ReadOp(IRDLOperation):
    """`tensor.read %t[%i, %j] : !graph.tensor<...>`: one element of an input of the
    enclosing compute (a scalar of the tensor's element type)."""

    name = "tensor.read"
    tensor = operand_def(TensorType)
    indices = var_operand_def(i64)
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, tensor: SSAValue, indices: Sequence[SSAValue]):
        t = tensor_type(tensor, "tensor.read")
        super().__init__(operands=[tensor, list(indices)], result_types=[scalar_type(t.dt)])

    def verify_(self) -> None:
        t = tensor_type(self.tensor, "tensor.read")
        if len(self.indices) != t.rank:
            raise VerifyException(f"tensor.read: {len(self.indices)} indices for {format_type(t)}")
        if self.result.type != scalar_type(t.dt):
            raise VerifyException(f"tensor.read: result must be {scalar_type(t.dt)}")
        compute = self.parent_op()
        while compute is not None and not isinstance(compute, ComputeOp):
            compute = compute.parent_op()
        if compute is None or self.tensor not in compute.inputs:
            raise VerifyException(
                "tensor.read: the tensor must be an input of the enclosing compute"
            )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.tensor)
        printer.print_string("[")
        printer.print_list(self.indices, printer.print_operand)
        printer.print_string("]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.tensor.type)

    @classmethod
    def parse(cls, parser: Parser) -> ReadOp:
        tensor = parser.parse_unresolved_operand()
        indices = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parser.parse_operand(i64)
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        type_pos = parser.pos
        t = parser.parse_type()
        if not isinstance(t, TensorType) or t.dt not in SUPPORTED_DTYPES:
            parser.raise_error(
                f"tensor.read: expected a tensor type, got {t}", type_pos, parser.pos
            )
        return cls.build(
            operands=[parser.resolve_operand(tensor, t), indices],
            result_types=[scalar_type(t.dt)],
            attributes=attrs,
        )


@irdl_op_definition
class ScanOp(IRDLOperation):
    """`tensor.scan %x dim 1 by "add" : !graph.tensor<...>`: inclusive left scan of `x`
    along `dim`, `out[..0..] = x[..0..]`, `out[..k..] = combinator(out[..k-1..], x[..k..])`
    (no identity needed, so any combinator works, notably function combinators `@f`).
    The result has the type of `x`. Combinator calls happen in increasing k per line,
    lines in C order of the other indices (the reference interpreter's order)."""

    name = "tensor.scan"
    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    dim = prop_def(IntAttr)
    combinator = prop_def(StringAttr)
    result = result_def(T)
    custom_directives = (Int,)
    assembly_format = "$input `dim` custom<Int>($dim) `by` $combinator attr-dict `:` type($input)"

    def __init__(self, input: SSAValue, dim: int, combinator: str):
        super().__init__(
            operands=[input],
            result_types=[input.type],
            properties={"dim": IntAttr(dim), "combinator": StringAttr(combinator)},
        )

    def verify_(self) -> None:
        t = tensor_type(self.input, self.name)
        if not 0 <= self.dim.data < t.rank:
            raise VerifyException(
                f"{self.name}: dim {self.dim.data} out of range for rank {t.rank}"
            )


@irdl_op_definition
class YieldOp(IRDLOperation):
    """`tensor.yield %v : f32`: the element value of a compute body."""

    name = "tensor.yield"
    value = operand_def()
    traits = traits_def(IsTerminator(), HasParent(ComputeOp))
    assembly_format = "$value attr-dict `:` type($value)"

    def __init__(self, value: SSAValue | Operation):
        super().__init__(operands=[value])
