"""Functions and control flow of the `tensor` dialect: `tensor.func`, its terminators
(`tensor.return`, `tensor.br`, `tensor.cond_br`), `tensor.call` and `tensor.trap`.

    tensor.func @f(%x: !graph.tensor<4xf32>, %n: !graph.tensor<i64>) -> !graph.tensor<4xf32> {
      tensor.br ^bb1(%x, %n : !graph.tensor<4xf32>, !graph.tensor<i64>)
    ^bb1(%v: !graph.tensor<4xf32>, %i: !graph.tensor<i64>):
      %c = tensor.call @more(%i, %n) : (!graph.tensor<i64>, !graph.tensor<i64>) -> !graph.tensor<bool>
      tensor.cond_br %c, ^bb1(%v, %i : !graph.tensor<4xf32>, !graph.tensor<i64>), ^bb2
    ^bb2:
      tensor.return %v : !graph.tensor<4xf32>
    }
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import FunctionType, StringAttr, SymbolNameConstraint, UnitAttr
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    successor_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsolatedFromAbove, IsTerminator, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException

from dlc.dialects.formats import parse_func, print_func
from dlc.dialects.graph_types import TensorType
from dlc.dialects.tensor_compute import ComputeOp
from dlc.dialects.tensor_groups import fusion_of, group_members, verify_group
from dlc.dialects.tensor_types import OpVerifyException

BOOL = TensorType((), "bool")


@irdl_op_definition
class FuncOp(IRDLOperation):
    """`tensor.func @f(%x: T, ...) -> R { ... }`: a function of tensors; results are
    returned by `tensor.return`.

    Tuple results of the graph level are flattened into several results. The body is a
    CFG: the entry block takes the arguments; other blocks (graph blocks, with tuple
    block arguments flattened) end with `tensor.br`, `tensor.cond_br` or `tensor.return`.
    """

    name = "tensor.func"
    sym_name = prop_def(StringAttr)
    function_type = prop_def(FunctionType)
    body = region_def()
    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface())

    def __init__(self, name: str, inputs: Sequence[Attribute], outputs: Sequence[Attribute]):
        block = Block(arg_types=inputs)
        super().__init__(
            properties={
                "sym_name": StringAttr(name),
                "function_type": FunctionType.from_lists(inputs, outputs),
            },
            regions=[Region(block)],
        )

    @property
    def args(self) -> tuple[SSAValue, ...]:
        return self.body.blocks[0].args

    def verify_(self) -> None:
        ftype = self.function_type
        if tuple(a.type for a in self.args) != tuple(ftype.inputs.data):
            raise VerifyException("tensor.func: block arguments differ from the signature")
        for block in self.body.blocks:
            last = block.last_op
            if not isinstance(last, ReturnOp | BrOp | CondBrOp):
                raise VerifyException(
                    "tensor.func: every block must end with tensor.return, tensor.br or "
                    "tensor.cond_br"
                )
            if isinstance(last, ReturnOp) and tuple(v.type for v in last.values) != tuple(
                ftype.outputs.data
            ):
                raise VerifyException("tensor.func: returned types differ from the signature")
        self._verify_groups()

    def _verify_groups(self) -> None:
        """Fusion groups are runs of consecutive computes and legal (tensor_groups.py)."""
        seen: set[int] = set()
        for block in self.body.blocks:
            for op in block.ops:
                fusion = fusion_of(op) if isinstance(op, ComputeOp) else None
                members = group_members(op) if fusion is not None else []
                if fusion is None or not members:
                    continue
                if fusion[0] in seen:
                    message = f"the members of group {fusion[0]} must be consecutive"
                    raise OpVerifyException(op, f"tensor.compute: schedule: {message}")
                seen.add(fusion[0])
                failure = verify_group(members)
                if failure is not None:
                    raise OpVerifyException(failure[0], f"tensor.compute: schedule: {failure[1]}")

    def print(self, printer: Printer) -> None:
        print_func(printer, self)

    @classmethod
    def parse(cls, parser: Parser) -> FuncOp:
        return parse_func(cls, parser)


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """`tensor.return %a, %b : T, T`: ends a `tensor.func`."""

    name = "tensor.return"
    values = var_operand_def()
    traits = traits_def(IsTerminator(), HasParent(FuncOp))
    assembly_format = "attr-dict ($values^ `:` type($values))?"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[list(values)])


def _check_edge(what: str, dest: Block, args: Sequence[SSAValue]) -> None:
    if tuple(a.type for a in args) != tuple(a.type for a in dest.args):
        raise VerifyException(f"{what}: arguments differ from the destination block arguments")


@irdl_op_definition
class BrOp(IRDLOperation):
    """`tensor.br ^dest(%a, ... : T, ...)`: jump to another block of the function."""

    name = "tensor.br"
    args = var_operand_def(TensorType)
    dest = successor_def()
    traits = traits_def(IsTerminator())
    assembly_format = "$dest (`(` $args^ `:` type($args) `)`)? attr-dict"

    def __init__(self, dest: Block, args: Sequence[SSAValue]):
        super().__init__(operands=[list(args)], successors=[dest])

    def verify_(self) -> None:
        _check_edge("tensor.br", self.dest, self.args)


@irdl_op_definition
class CondBrOp(IRDLOperation):
    """`tensor.cond_br %c, ^then(... : ...), ^else(... : ...)`; `%c` is a bool scalar."""

    name = "tensor.cond_br"
    cond = operand_def(BOOL)
    then_args = var_operand_def(TensorType)
    else_args = var_operand_def(TensorType)
    then_block = successor_def()
    else_block = successor_def()
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(IsTerminator())
    assembly_format = (
        "$cond `,` $then_block (`(` $then_args^ `:` type($then_args) `)`)? `,` "
        "$else_block (`(` $else_args^ `:` type($else_args) `)`)? attr-dict"
    )

    def __init__(
        self,
        cond: SSAValue,
        then_block: Block,
        then_args: Sequence[SSAValue],
        else_block: Block,
        else_args: Sequence[SSAValue],
    ):
        super().__init__(
            operands=[cond, list(then_args), list(else_args)],
            successors=[then_block, else_block],
        )

    def verify_(self) -> None:
        _check_edge("tensor.cond_br", self.then_block, self.then_args)
        _check_edge("tensor.cond_br", self.else_block, self.else_args)


@irdl_op_definition
class CallOp(IRDLOperation):
    """`tensor.call @f(%a, ...) : (T, ...) -> (R, ...)`: call a function of the module
    (tuple results and arguments flattened). With `extern` (`tensor.call @f(%a) extern`),
    `@f` is a C symbol of the process: with scalars only and at most one result, taking
    and returning them by value; otherwise scalars by value, tensors as pointers to their
    row-major elements, then one pointer per result it writes, returning nothing
    (`dlc.externs`, "Calling convention")."""

    name = "tensor.call"
    callee = prop_def(SymbolNameConstraint())
    args = var_operand_def(TensorType)
    res = var_result_def(TensorType)
    extern = opt_prop_def(UnitAttr)
    assembly_format = (
        "$callee `(` $args `)` (`extern` $extern^)? attr-dict `:` functional-type($args, $res)"
    )

    def __init__(
        self,
        callee: str,
        args: Sequence[SSAValue],
        result_types: Sequence[Attribute],
        *,
        extern: bool = False,
    ):
        props: dict[str, Attribute] = {"callee": StringAttr(callee)}
        if extern:
            props["extern"] = UnitAttr()
        super().__init__(operands=[list(args)], result_types=[list(result_types)], properties=props)


@irdl_op_definition
class TrapOp(IRDLOperation):
    """`tensor.trap`: stop the program; the call from Python raises `TrapError`."""

    name = "tensor.trap"
    assembly_format = "attr-dict"

    def __init__(self) -> None:
        super().__init__()
