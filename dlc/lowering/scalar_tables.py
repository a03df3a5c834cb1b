"""DLVM's element-wise opcodes -> xDSL `arith` / `math` ops, a rule a line: the opcodes
whose op depends only on the data type's kind (float, signed or unsigned integer), and
the compare predicates. `scalar_ops.ScalarBuilder` emits them and spells out the rest
(division, power, sign, casts)."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith, math
from xdsl.ir import Operation, SSAValue

from dlc.dialects import loop

Unary = Callable[[SSAValue], Operation]
Binary = Callable[[SSAValue, SSAValue], Operation]

FLOAT_UNARY: dict[str, Unary] = {
    "sinh": math.SinhOp,
    "cosh": math.CoshOp,
    "tanh": math.TanhOp,
    "log": math.LogOp,
    "exp": math.ExpOp,
    "sqrt": math.SqrtOp,
    "round": math.RoundOp,
    "rint": math.RoundEvenOp,
    "rsqrt": math.RsqrtOp,
    "ceil": math.CeilOp,
    "floor": math.FloorOp,
    "tan": math.TanOp,
    "cos": math.CosOp,
    "sin": math.SinOp,
    "acos": math.AcosOp,
    "asin": math.AsinOp,
    "atan": math.AtanOp,
    "erf": math.ErfOp,
    "erfc": loop.ErfcOp,
    "negate": arith.NegfOp,
}

FLOAT_BINARY: dict[str, Binary] = {
    "add": arith.AddfOp,
    "subtract": arith.SubfOp,
    "multiply": arith.MulfOp,
    "divide": arith.DivfOp,
    "min": arith.MinimumfOp,
    "max": arith.MaximumfOp,
    "modulo": loop.RemFOp,  # C fmod: sign of the dividend
    "power": math.PowFOp,
}

INT_BINARY: dict[str, Binary] = {
    "add": arith.AddiOp,
    "subtract": arith.SubiOp,
    "multiply": arith.MuliOp,
    "min": arith.MinSIOp,
    "max": arith.MaxSIOp,
    "and": arith.AndIOp,
    "or": arith.OrIOp,
    "xor": arith.XOrIOp,
    "shiftLeft": arith.ShLIOp,  # amounts >= width (unsigned) give 0, see loop_to_llvm
    "shiftRight": arith.ShRSIOp,  # ... the sign fill
}

FLOAT_PREDICATES = {
    "lessThan": "olt",
    "lessThanOrEqual": "ole",
    "greaterThan": "ogt",
    "greaterThanOrEqual": "oge",
    "equal": "oeq",
    "notEqual": "une",
}
UINT_BINARY: dict[str, Binary] = {
    **INT_BINARY,
    "min": arith.MinUIOp,
    "max": arith.MaxUIOp,
    "shiftRight": arith.ShRUIOp,
}

INT_PREDICATES = {
    "lessThan": "slt",
    "lessThanOrEqual": "sle",
    "greaterThan": "sgt",
    "greaterThanOrEqual": "sge",
    "equal": "eq",
    "notEqual": "ne",
}
UINT_PREDICATES = {
    **INT_PREDICATES,
    "lessThan": "ult",
    "lessThanOrEqual": "ule",
    "greaterThan": "ugt",
    "greaterThanOrEqual": "uge",
}
