"""`dlc-bisect`: find the first kernel whose compiled numbers differ from the reference interpreter.

    dlc-bisect model.dl --entry f                  # random inputs, seed 0
    dlc-bisect model.onnx --input x=x.npy --seed 3
    dlc-bisect model.dl --rtol 1e-5 --ulps 16 -O 3

Compiles the function with every kernel's output (fusion group or lone loop nest)
returned as well, runs it and the reference interpreter on the same inputs (`--input`
files; random in the parameter's dtype, seeded by `--seed`, for the others) and compares
kernel by kernel in program order (`dlc.bisector`). The first kernel whose error exceeds
both `--ulps` and `--rtol` is reported with the value it computes, its source location,
its schedules, and its error again at opt_level=0 and with fma off. Exit code 0 when
every kernel is within tolerance, 3 when one is not, 1 for a user error (a located
diagnostic), 2 for an internal error.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from dlc.cli.dlc_run import (
    ArgumentParser,
    RunError,
    build_inputs,
    choose_name,
    input_shapes,
    parse_file,
)
from dlc.diagnostics import DiagnosticError, Location

FOUND = 3
"""The exit code when a kernel exceeds the tolerance."""


def _argument_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="dlc-bisect", description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("program", help="a .dl file or an ONNX model (.onnx, or any name with --onnx)")
    add("--entry", "-e", help="the function to check (default: the only defined one)")
    add("--onnx", action="store_true", help="read PROGRAM as an ONNX model whatever its name")
    add(
        "--input",
        "-i",
        action="append",
        default=[],
        metavar="NAME=PATH.npy",
        help="an input from a .npy file (the others are random)",
    )
    add(
        "--input-shape",
        action="append",
        default=[],
        metavar="NAME=1x3x224x224",
        help="the shape of an ONNX graph input with dynamic dimensions",
    )
    add("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    add("--opt-level", "-O", type=int, choices=range(4), default=2, help="opt level (default 2)")
    add(
        "--rtol",
        type=float,
        default=1e-4,
        help="relative error (largest difference over the largest reference magnitude) a "
        "kernel may have (default 1e-4)",
    )
    add(
        "--ulps",
        type=float,
        default=64,
        help="distance in units in the last place a kernel may have (default 64); a "
        "kernel is reported when it exceeds both",
    )
    return parser


def _module(args: Any) -> Any:
    """The program as a differentiated graph module (an ONNX model imported)."""
    path = args.program
    if not os.path.isfile(path):
        raise DiagnosticError(f"cannot read '{path}': no such file", Location(path, 0, 0))
    if not args.onnx or path.endswith(".onnx"):
        return parse_file(path, input_shapes(args.input_shape))[0]
    import dlc.onnx
    from dlc.passes.graph.differentiate import differentiated

    return differentiated(dlc.onnx.load(path, input_shapes(args.input_shape)))


def check_inputs(func: Any, inputs: list[Any]) -> None:
    """Each input has its parameter's shape and dtype (a RunError naming it otherwise)."""
    from dlc.dialects.graph_types import format_type
    from dlc.dtypes import numpy_dtype

    params = func.body.blocks[0].args
    for param, value in zip(params, inputs, strict=True):
        t = param.type
        if value.shape != t.dims or value.dtype != numpy_dtype(t.dt):
            raise RunError(
                f"--input {param.name_hint or param.index}: expected {format_type(t)}, got "
                f"{value.dtype} array of shape {value.shape}"
            )


def _format(value: float) -> str:
    return "inf" if value == float("inf") else f"{value:.3g}"


def report(result: Any, args: Any, name: str) -> list[str]:
    """The lines dlc-bisect prints for a `dlc.bisector.Bisection`."""
    checks, first = result.checks, result.first_bad
    kernels = len({c.kernel.number for c in checks})
    head = f"@{name} at -O{args.opt_level}, seed {args.seed}: {len(checks)} values of {kernels} kernels checked"
    tolerance = f"{_format(args.ulps)} ULPs and relative error {_format(args.rtol)}"
    if first is None:
        worst = max(checks, key=lambda c: c.rel, default=None)
        lines = [head, f"no kernel exceeds the tolerance ({tolerance})"]
        if worst is not None:
            lines.append(f"largest error: {worst.value}: {_error(worst)}")
        return lines
    kind = f"fusion group {first.kernel.group}" if first.kernel.group is not None else "loop nest"
    lines = [
        head,
        f"first kernel over the tolerance ({tolerance}): kernel {first.kernel.number} ({kind})",
        f"  value:    {first.value}" + (f" at {first.location}" if first.location else ""),
        f"  error:    {_error(first)}",
    ]
    for n, (instruction, location, schedule) in enumerate(first.kernel.members):
        at = f" at {location}" if location else ""
        lines.append(f"  {'nests:' if n == 0 else '':9} {instruction}{at}: {schedule}")
    for label, check, cause in (
        ("at -O0", result.at_opt0, f"the optimizations of -O{args.opt_level}"),
        ("fma off", result.fma_off, "fused multiply-adds"),
    ):
        verdict = "still over the tolerance" if check.bad else f"within tolerance: {cause}"
        lines.append(f"  {label + ':':9} {_error(check)} ({verdict})")
    return lines


def _error(check: Any) -> str:
    return f"{_format(check.ulps)} ULPs, relative error {_format(check.rel)}"


def run(argv: Sequence[str] | None) -> int:
    """Bisect as the arguments say; the exit code (0 or FOUND)."""
    from dlc.api import defined_functions
    from dlc.bisector import bisect

    args = _argument_parser().parse_args(argv)
    for option, value in (("--rtol", args.rtol), ("--ulps", args.ulps)):
        if not value >= 0:
            raise RunError(f"{option} must be a number >= 0, got {value}")
    try:
        module = _module(args)
        functions = defined_functions(module)
        name = choose_name(list(functions), args.entry)
        inputs = build_inputs(functions[name], args.input, True, args.seed)
        check_inputs(functions[name], inputs)
    except RunError as e:  # about the program or its inputs: name the file
        raise DiagnosticError(str(e), Location(args.program, 0, 0)) from None
    result = bisect(module, name, inputs, opt_level=args.opt_level, rtol=args.rtol, ulps=args.ulps)
    print("\n".join(report(result, args, name)))
    return 0 if result.first_bad is None else FOUND


def main(argv: Sequence[str] | None = None) -> int:
    """Run dlc-bisect; the exit code (0 within tolerance, 3 a kernel over it, 1 user
    error, 2 internal error)."""
    from dlc.cli import guarded_main

    code = [0]

    def go() -> None:
        code[0] = run(argv)

    from dlc.diagnostics import TrapError

    status = guarded_main("dlc-bisect", go, (RunError, TrapError), quiet=(BrokenPipeError,))
    return status or code[0]


if __name__ == "__main__":
    sys.exit(main())
