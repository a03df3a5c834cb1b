"""Assembly-format pieces shared by the `tensor` and `loop` dialects.

- `Int`, the custom directive `custom<Int>($size)`: an `IntAttr` property as a bare
  integer (`loop.stack_alloc size 16` rather than `size #builtin.int<16>`); it can
  anchor an optional group, which then prints when the property is not its default.
- `print_func` / `parse_func`: the `func.func`-like syntax of `tensor.func` and
  `loop.func`, `@name(%arg: type, ...) -> results attributes {...} { blocks }`.
- `parse_operands_colon`: the `%a, %b, ... attr-dict :` head of a hand-written
  `parse` (the vector ops of `loop` and dlc's `llvm` lanes).
"""

from __future__ import annotations

from typing import TypeVar

from xdsl.dialects.builtin import FunctionType, IntAttr, StringAttr
from xdsl.dialects.utils import parse_func_op_like, print_func_op_like
from xdsl.ir import Attribute
from xdsl.irdl import IRDLOperation
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    irdl_custom_directive,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer

FUNC_PROPERTIES = ("sym_name", "function_type")

FuncT = TypeVar("FuncT", bound=IRDLOperation)


@irdl_custom_directive
class Int(CustomDirective):
    """`custom<Int>($prop)`: an `IntAttr` property printed and parsed as an integer."""

    attr: AttributeVariable

    def is_anchorable(self) -> bool:
        return self.attr.is_anchorable()

    def is_present(self, op: IRDLOperation) -> bool:
        return self.attr.is_present(op)

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.attr.set(state, IntAttr(parser.parse_integer(allow_boolean=False)))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        attr = self.attr.get(op)
        assert isinstance(attr, IntAttr)
        state.print_whitespace(printer)
        printer.print_string(str(attr.data))


def parse_operands_colon(
    parser: Parser, count: int
) -> tuple[list[UnresolvedOperand], dict[str, Attribute]]:
    """`count` comma-separated operands, an optional attribute dictionary and the `:`
    before the types; the operands (to resolve once the types are known) and the
    attributes."""
    names = [parser.parse_unresolved_operand()]
    for _ in range(count - 1):
        parser.parse_punctuation(",")
        names.append(parser.parse_unresolved_operand())
    attributes = parser.parse_optional_attr_dict()
    parser.parse_punctuation(":")
    return names, attributes


def print_func(printer: Printer, op: IRDLOperation) -> None:
    """` @f(%x: T, ...) -> R attributes {...} {...}` of a function op with `sym_name`,
    `function_type` and `body`."""
    sym_name = op.properties["sym_name"]
    function_type = op.properties["function_type"]
    assert isinstance(sym_name, StringAttr) and isinstance(function_type, FunctionType)
    print_func_op_like(
        printer,
        sym_name,
        function_type,
        op.regions[0],
        op.attributes,
        reserved_attr_names=FUNC_PROPERTIES,
    )


def parse_func(cls: type[FuncT], parser: Parser) -> FuncT:
    """The inverse of `print_func`: a `cls` op built from its parts."""
    start = parser.pos
    name, inputs, outputs, body, extra, arg_attrs, res_attrs = parse_func_op_like(
        parser, reserved_attr_names=FUNC_PROPERTIES
    )
    if arg_attrs is not None or res_attrs is not None:
        parser.raise_error(f"{cls.name}: arguments and results take no attributes", start)
    return cls.build(
        properties={
            "sym_name": StringAttr(name),
            "function_type": FunctionType.from_lists(inputs, outputs),
        },
        attributes=extra.data if extra is not None else {},
        regions=[body],
    )
