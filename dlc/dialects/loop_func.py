"""Functions of the `loop` dialect and their control flow between blocks: `loop.func`,
`loop.return`, the CFG terminators `loop.br` and `loop.cond_br`, calls and `loop.trap`.

    loop.func @f(%x: memref<4xf32>, %flag: memref<i8>, %out: memref<4xf32>) {
      %b = loop.load %flag[] : memref<i8>
      %c = arith.trunci %b : i8 to i1
      loop.cond_br %c, ^bb1, ^bb2
    ^bb1:
      loop.call @g(%x, %out) : (memref<4xf32>, memref<4xf32>)
      loop.return
    ^bb2:
      loop.trap "no flag"
      loop.br ^bb1
    }
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    FunctionType,
    IntegerType,
    MemRefType,
    StringAttr,
    SymbolNameConstraint,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    prop_def,
    region_def,
    successor_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove, IsTerminator, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException

from dlc.dialects.formats import parse_func, print_func


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """`loop.return`: ends a `loop.func`; outputs are written through the output buffers."""

    name = "loop.return"
    traits = traits_def(IsTerminator())
    assembly_format = "attr-dict"

    def __init__(self) -> None:
        super().__init__()


@irdl_op_definition
class FuncOp(IRDLOperation):
    """`loop.func @f(%x: memref<...>, %out: memref<...>) { ... }`: a function over
    buffers; block args are the input memrefs then the output memrefs.

    All buffer arguments are assumed not to alias (they become `noalias` pointers).
    """

    name = "loop.func"
    sym_name = prop_def(StringAttr)
    function_type = prop_def(FunctionType)
    body = region_def()
    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface())

    def __init__(
        self, name: str, arg_types: Sequence[MemRefType], body: Region | None = None
    ) -> None:
        if body is None:
            body = Region(Block(arg_types=arg_types))
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "function_type": FunctionType.from_lists(list(arg_types), []),
            },
            regions=[body],
        )

    @property
    def args(self) -> tuple[SSAValue, ...]:
        return tuple(self.body.blocks[0].args)

    def verify_(self) -> None:
        if self.function_type.outputs.data:
            raise VerifyException("loop.func: function_type must have no results")
        inputs = tuple(self.function_type.inputs.data)
        arg_types = tuple(arg.type for arg in self.body.blocks[0].args)
        if inputs != arg_types:
            raise VerifyException("loop.func: block argument types differ from function_type")
        for t in inputs:
            if not isinstance(t, MemRefType):
                raise VerifyException(f"loop.func: arguments must be memrefs, got {t}")
        if len(self.body.blocks) == 1 and not isinstance(self.body.block.last_op, ReturnOp):
            raise VerifyException("loop.func: body must end with loop.return")
        for block in self.body.blocks:
            if not isinstance(block.last_op, ReturnOp | BrOp | CondBrOp):
                raise VerifyException(
                    "loop.func: every block must end with loop.return, loop.br or loop.cond_br"
                )
        for block in list(self.body.blocks)[1:]:
            if block.args:
                raise VerifyException("loop.func: only the entry block has arguments")

    def print(self, printer: Printer) -> None:
        print_func(printer, self)

    @classmethod
    def parse(cls, parser: Parser) -> FuncOp:
        return parse_func(cls, parser)


@irdl_op_definition
class BrOp(IRDLOperation):
    """`loop.br ^dest`: unconditional jump between blocks of a multi-block `loop.func`.

    Blocks other than the entry have no arguments: values that cross blocks live in
    buffers allocated in the entry block (the branch copies into them beforehand)."""

    name = "loop.br"
    dest = successor_def()
    traits = traits_def(IsTerminator())
    assembly_format = "$dest attr-dict"

    def __init__(self, dest: Block) -> None:
        super().__init__(successors=[dest])


@irdl_op_definition
class CondBrOp(IRDLOperation):
    """`loop.cond_br %c, ^then, ^else` (`%c: i1`), see `loop.br`."""

    name = "loop.cond_br"
    cond = operand_def(IntegerType(1))
    then_block = successor_def()
    else_block = successor_def()
    traits = traits_def(IsTerminator())
    assembly_format = "$cond `,` $then_block `,` $else_block attr-dict"

    def __init__(self, cond: SSAValue | Operation, then_block: Block, else_block: Block) -> None:
        super().__init__(operands=[cond], successors=[then_block, else_block])


@irdl_op_definition
class CallOp(IRDLOperation):
    """`loop.call @f(%in, %out) : (memref<...>, memref<...>)`: calls another
    `loop.func` with buffers (inputs then outputs)."""

    name = "loop.call"
    callee = prop_def(SymbolNameConstraint())
    buffers = var_operand_def(MemRefType)
    assembly_format = "$callee `(` $buffers `)` attr-dict `:` `(` type($buffers) `)`"

    def __init__(self, callee: str, buffers: Sequence[SSAValue | Operation]) -> None:
        super().__init__(operands=[list(buffers)], properties={"callee": StringAttr(callee)})


@irdl_op_definition
class ExternCallOp(IRDLOperation):
    """`loop.extern_call @f(%a, ...) : (f32, ...) -> f32`: a C call of an external
    symbol (`[extern]` graph functions), scalars by value and buffers as pointers to
    their elements; the result, if any, is a scalar returned by value."""

    name = "loop.extern_call"
    callee = prop_def(SymbolNameConstraint())
    args = var_operand_def()
    res = var_result_def()
    assembly_format = "$callee `(` $args `)` attr-dict `:` functional-type($args, $res)"

    def __init__(
        self, callee: str, args: Sequence[SSAValue | Operation], result_types: Sequence[Attribute]
    ) -> None:
        super().__init__(
            operands=[list(args)],
            result_types=[list(result_types)],
            properties={"callee": StringAttr(callee)},
        )

    def verify_(self) -> None:
        if len(self.res) > 1:
            raise VerifyException("loop.extern_call: at most one result")


@irdl_op_definition
class TrapOp(IRDLOperation):
    """`loop.trap "message"`: set the module's status word to this trap's message and
    return from the function (callers return too after each `loop.call`); Python
    raises TrapError."""

    name = "loop.trap"
    message = prop_def(StringAttr)
    assembly_format = "$message attr-dict"

    def __init__(self, message: str) -> None:
        super().__init__(properties={"message": StringAttr(message)})


FUNC_OPS: list[type[Operation]] = [FuncOp, ReturnOp, BrOp, CondBrOp, CallOp, ExternCallOp, TrapOp]
