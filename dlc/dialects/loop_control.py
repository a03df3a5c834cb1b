"""Structured control flow of the `loop` dialect: `loop.for`, `loop.if` and the
`loop.yield` that ends their bodies.

    %sum = loop.for %k = %c0 to %c8 step %c1 iter_args(%acc = %zero) -> (f32) {
      %v = loop.load %x[%k] : memref<8xf32>
      %next = arith.addf %acc, %v : f32
      loop.yield %next : f32
    }
    loop.for %i = %c0 to %c8 step %c1 parallel {
      %m = loop.if %c -> (f32) {
        loop.yield %a : f32
      } else {
        loop.yield %b : f32
      }
      loop.store %m, %out[%i] : memref<8xf32>
    }

A `loop.yield` without values ends a body implicitly: it is not printed, and parsing
adds it back.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IntegerType, UnitAttr, i1, i64
from xdsl.dialects.utils import parse_assignment, print_assignment
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import IsTerminator
from xdsl.utils.exceptions import VerifyException


@irdl_op_definition
class YieldOp(IRDLOperation):
    """`loop.yield %a, %b : f32, f32`: ends `loop.for` and `loop.if` blocks, passing
    iteration/branch values."""

    name = "loop.yield"
    values = var_operand_def()
    traits = traits_def(IsTerminator())
    assembly_format = "attr-dict ($values^ `:` type($values))?"

    def __init__(self, *values: SSAValue | Operation) -> None:
        super().__init__(operands=[list(values)])


def _prints_terminator(region: Region) -> bool:
    """Whether a structured body is printed with its terminator: not when it is an
    empty `loop.yield`, which parsing adds back (`_parse_body`)."""
    last = region.blocks.last.last_op if region.blocks.last is not None else None
    return not (isinstance(last, YieldOp) and not last.values)


def _parse_body(parser: Parser, arguments: Sequence[Parser.Argument] | None = None) -> Region:
    """A structured body; an empty `loop.yield` ends it when it has no terminator."""
    region = parser.parse_region(arguments)
    if not region.blocks:
        region.add_block(Block())
    block = region.blocks.last
    assert block is not None
    if block.last_op is None or not block.last_op.has_trait(IsTerminator):
        block.add_op(YieldOp())
    return region


@irdl_op_definition
class ForOp(IRDLOperation):
    """`loop.for %i = %lb to %ub step %s [parallel] [iter_args(%acc = %init) -> (T)]`:
    `for (iv = lb; iv < ub; iv += step)` with loop-carried values (iter_args).

    The body block has args (iv: i64, *iters) and ends with `loop.yield(*next_iters)`;
    the results are the final iter values. `parallel` marks independent iterations.
    """

    name = "loop.for"
    lb = operand_def(IntegerType)
    ub = operand_def(IntegerType)
    step = operand_def(IntegerType)
    iter_inits = var_operand_def()
    res = var_result_def()
    body = region_def("single_block")
    parallel = opt_prop_def(UnitAttr)

    def __init__(
        self,
        lb: SSAValue | Operation,
        ub: SSAValue | Operation,
        step: SSAValue | Operation,
        iter_inits: Sequence[SSAValue | Operation] = (),
        body: Region | Block | None = None,
        *,
        parallel: bool = False,
    ) -> None:
        init_types = [SSAValue.get(v).type for v in iter_inits]
        if body is None:
            body = Block(arg_types=[i64, *init_types])
        if isinstance(body, Block):
            body = Region(body)
        super().__init__(
            operands=[lb, ub, step, list(iter_inits)],
            result_types=[init_types],
            regions=[body],
            properties={"parallel": UnitAttr()} if parallel else {},
        )

    @property
    def iv(self) -> SSAValue:
        return self.body.block.args[0]

    @property
    def iter_args(self) -> tuple[BlockArgument, ...]:
        return tuple(self.body.block.args[1:])

    def verify_(self) -> None:
        for name, value in (("lb", self.lb), ("ub", self.ub), ("step", self.step)):
            if value.type != i64:
                raise VerifyException(f"loop.for: {name} must be i64, got {value.type}")
        init_types = [v.type for v in self.iter_inits]
        arg_types = [a.type for a in self.body.block.args]
        if arg_types != [i64, *init_types]:
            raise VerifyException(
                "loop.for: body block args must be (i64, *iter_init types), got "
                f"({', '.join(str(t) for t in arg_types)})"
            )
        if [r.type for r in self.res] != init_types:
            raise VerifyException("loop.for: result types must equal iter_init types")
        _check_yield(self.body, init_types, "loop.for")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.iv)
        printer.print_string(" = ")
        printer.print_operand(self.lb)
        printer.print_string(" to ")
        printer.print_operand(self.ub)
        printer.print_string(" step ")
        printer.print_operand(self.step)
        if self.parallel is not None:
            printer.print_string(" parallel")
        if self.iter_inits:
            printer.print_string(" iter_args(")
            pairs = zip(self.iter_args, self.iter_inits)
            printer.print_list(pairs, lambda pair: print_assignment(printer, *pair))
            printer.print_string(") -> (")
            printer.print_list((v.type for v in self.iter_inits), printer.print_attribute)
            printer.print_string(")")
        printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, False, False, _prints_terminator(self.body))

    @classmethod
    def parse(cls, parser: Parser) -> ForOp:
        iv = parser.parse_argument(expect_type=False)
        parser.parse_punctuation("=")
        lb = parser.parse_operand(i64)
        parser.parse_keyword("to")
        ub = parser.parse_operand(i64)
        parser.parse_keyword("step")
        step = parser.parse_operand(i64)
        props = {"parallel": UnitAttr()} if parser.parse_optional_keyword("parallel") else {}
        pos = parser.pos
        iter_args: list[Parser.Argument] = []
        inits: Sequence[SSAValue] = []
        types: list[Attribute] = []
        if parser.parse_optional_keyword("iter_args"):
            pairs = parser.parse_comma_separated_list(
                parser.Delimiter.PAREN, lambda: parse_assignment(parser)
            )
            parser.parse_punctuation("->")
            types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
            inits = parser.resolve_operands([value for _, value in pairs], types, pos)
            iter_args = [arg.resolve(t) for (arg, _), t in zip(pairs, types)]
        attrs = parser.parse_optional_attr_dict_with_keyword()
        body = _parse_body(parser, [iv.resolve(i64), *iter_args])
        return cls.build(
            operands=[lb, ub, step, inits],
            result_types=[types],
            properties=props,
            attributes=attrs.data if attrs is not None else {},
            regions=[body],
        )


def _check_yield(region: Region, types: Sequence[Attribute], what: str) -> None:
    last = region.block.last_op
    if not isinstance(last, YieldOp):
        raise VerifyException(f"{what}: block must end with loop.yield")
    got = [v.type for v in last.values]
    if got != list(types):
        raise VerifyException(
            f"{what}: loop.yield types ({', '.join(str(t) for t in got)}) differ from "
            f"expected ({', '.join(str(t) for t in types)})"
        )


@irdl_op_definition
class IfOp(IRDLOperation):
    """`loop.if %c [-> (T, ...)] { then } [else { else }]`; both regions yield the
    results."""

    name = "loop.if"
    cond = operand_def(i1)
    res = var_result_def()
    then_region = region_def("single_block")
    else_region = region_def()

    def __init__(
        self,
        cond: SSAValue | Operation,
        result_types: Sequence[Attribute],
        then_block: Block | None = None,
        else_block: Block | None = None,
    ) -> None:
        then_region = Region(then_block if then_block is not None else Block())
        if else_block is None and result_types:
            else_block = Block()
        else_region = Region(else_block) if else_block is not None else Region()
        super().__init__(
            operands=[cond], result_types=[list(result_types)], regions=[then_region, else_region]
        )

    def verify_(self) -> None:
        types = [r.type for r in self.res]
        _check_yield(self.then_region, types, "loop.if")
        if not self.else_region.blocks:
            if types:
                raise VerifyException("loop.if: an else region is required when there are results")
            return
        if len(self.else_region.blocks) != 1:
            raise VerifyException("loop.if: else region must have one block")
        _check_yield(self.else_region, types, "loop.if")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.cond)
        if self.res:
            printer.print_string(" -> (")
            printer.print_list(self.res.types, printer.print_attribute)
            printer.print_string(")")
        printer.print_op_attributes(self.attributes, print_keyword=True)
        for keyword, region in (("", self.then_region), (" else", self.else_region)):
            if region.blocks:
                printer.print_string(f"{keyword} ")
                printer.print_region(region, False, False, _prints_terminator(region))

    @classmethod
    def parse(cls, parser: Parser) -> IfOp:
        cond = parser.parse_operand(i1)
        types: list[Attribute] = []
        if parser.parse_optional_punctuation("->"):
            types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        attrs = parser.parse_optional_attr_dict_with_keyword()
        then_region = _parse_body(parser)
        else_region = _parse_body(parser) if parser.parse_optional_keyword("else") else Region()
        return cls.build(
            operands=[cond],
            result_types=[types],
            attributes=attrs.data if attrs is not None else {},
            regions=[then_region, else_region],
        )


CONTROL_OPS: list[type[Operation]] = [ForOp, IfOp, YieldOp]
