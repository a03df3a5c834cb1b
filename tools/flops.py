"""Count the floating-point work of graph-level functions (a static cost model).

    python tools/flops.py model.dl            # FLOPs of every defined function
    python tools/flops.py model.dl -p canonicalize,cse,dce   # after passes

Model: an element-wise op (unary, binary, compare, select, cast) costs one FLOP per
result element; `reduce`/`scan` one per input element; `dot` 2·m·k·n per batch
(2·n for vectors); `apply` the callee's cost; literals, shape ops, transposes, slices,
concatenations and extracts are data movement and cost nothing.
"""

from __future__ import annotations

import argparse
import math
import sys

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from dlc.dialects import graph_elementwise as ge
from dlc.dialects import graph_memory as gm
from dlc.dialects import graph_tensor as gt
from dlc.dialects.graph import FuncOp
from dlc.dialects.graph_types import TensorType


def elements(t: object) -> int:
    return t.num_elements if isinstance(t, TensorType) else 0


def op_flops(op: Operation, funcs: dict[str, FuncOp], cache: dict[str, int]) -> int:
    """The cost of one op (calls: the callee's cost)."""
    if isinstance(op, ge.UnaryOp | ge.BinaryOp | ge.SelectOp | ge.DataTypeCastOp | ge.NotOp):
        return elements(op.results[0].type)
    if isinstance(op, gt.ReduceOp | gt.ScanOp | gt.ReduceWindowOp):
        return elements(op.operands[0].type)
    if isinstance(op, gt.DotOp):
        lhs, rhs = op.lhs.type, op.rhs.type
        assert isinstance(lhs, TensorType) and isinstance(rhs, TensorType)
        if lhs.rank == 1:
            return 2 * lhs.dims[0]
        return 2 * math.prod(lhs.dims) * rhs.dims[-1]
    if isinstance(op, gm.ApplyOp):
        return function_flops(funcs[op.callee.data], funcs, cache)
    return 0


def function_flops(
    func: FuncOp, funcs: dict[str, FuncOp], cache: dict[str, int] | None = None
) -> int:
    """Static FLOPs of every op of `func` (all blocks; calls counted once per site)."""
    cache = {} if cache is None else cache
    name = func.sym_name.data
    if name in cache:
        return cache[name]
    cache[name] = 0  # recursion counts as free
    total = sum(op_flops(op, funcs, cache) for block in func.body.blocks for op in block.ops)
    cache[name] = total
    return total


def module_flops(module: ModuleOp) -> dict[str, int]:
    funcs = {f.sym_name.data: f for f in module.body.block.ops if isinstance(f, FuncOp)}
    cache: dict[str, int] = {}
    return {name: function_flops(f, funcs, cache) for name, f in funcs.items() if f.body.blocks}


def main(argv: list[str] | None = None) -> int:
    from xdsl.context import Context

    from dlc.parser import parse_module
    from dlc.pipeline import get_all_passes

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("-p", "--passes", default="differentiate")
    args = parser.parse_args(argv)
    with open(args.file, encoding="utf-8") as f:
        module = parse_module(f.read(), args.file)
    passes = get_all_passes()
    for name in filter(None, args.passes.split(",")):
        passes[name]()().apply(Context(), module)
    for name, flops in module_flops(module).items():
        print(f"{name}: {flops}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
