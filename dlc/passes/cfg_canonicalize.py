"""`cfg-canonicalize`: DLVM's CFGCanonicalization (unique exit), without its void bug."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block
from xdsl.passes import ModulePass

from dlc.dialects.graph import BranchOp, FuncOp, ReturnOp, is_void
from dlc.passes.inline import fresh
from dlc.passes.pass_support import bump, functions


def unique_exit(func: FuncOp) -> int:
    """Several `return v` -> `branch 'exit(v)`; 'exit(%exit_value): return %exit_value.
    A void function's exit block takes no parameter (DLVM passed one anyway)."""
    returns = [b.last_op for b in func.body.blocks if isinstance(b.last_op, ReturnOp)]
    if len(returns) < 2:
        return 0
    output = func.function_type.output
    exit_block = Block(arg_types=[] if is_void(output) else [output])
    exit_block._name = fresh("exit", {getattr(b, "_name", None) for b in func.body.blocks})  # type: ignore[attr-defined]
    if exit_block.args:
        exit_block.args[0]._name = "exit_value"  # type: ignore[attr-defined]
    exit_block.add_op(ReturnOp(exit_block.args[0] if exit_block.args else None))
    func.body.add_block(exit_block)
    for ret in returns:
        block = ret.parent_block()
        assert block is not None
        block.insert_op_before(
            BranchOp(exit_block, [ret.value] if ret.value is not None else []), ret
        )
        block.erase_op(ret)
    return 1


@dataclass(frozen=True)
class CFGCanonicalizePass(ModulePass):
    """Give every function a unique exit block (DLVM CFGCanonicalization step 1).

    A function with two or more `return`s gets a fresh block `'exit(%exit_value: R)`
    returning its parameter; every `return v` becomes `branch 'exit(v)`. Void
    functions get a parameterless `'exit` (DLVM's bug: `branch 'exit()` into a block
    with one parameter). Join-block and loop (preheader/latch) forming are not done yet.
    Statistics: "exit blocks created".
    """

    name = "cfg-canonicalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        bump(self.name, "exit blocks created", sum(unique_exit(f) for f in functions(op)))
