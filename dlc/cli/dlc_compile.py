"""`dlc-compile`: compile a `.dl` file (or an ONNX model) ahead of time into a C library.

    dlc-compile examples/mlp.dl -o libmlp.so
    dlc-compile model.dl -o model.o --entry f --prefix net --header include/net.h
    dlc-compile model.dl -o libmodel.so --target aarch64-linux-gnu
    dlc-compile bert.onnx -o libbert.so --dynamic

The output's suffix says what to write: `.so` (a shared library, linked by the C
compiler: `$CC` or `cc`, `<triple>-gcc` for a foreign `--target`), `.o` (an object
file) or `.a` (a static library). A C header with one prototype per exported function
goes next to it (`<prefix>.h`, or `--header PATH`); see `dlc.aot`. A function with
symbolic dimensions (`<%n x 8 x f32>`, or an ONNX model's dim_params with `--dynamic`)
takes their sizes at call time. Every user error is one diagnostic on stderr and exit
code 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from dlc.cli.dlc_run import (
    ArgumentParser,
    add_custom_op_argument,
    allowed_extern_names,
    custom_op_files,
    input_shapes,
    parse_file,
)
from dlc.cli.run_io import RunError


def _argument_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="dlc-compile", description=__doc__.splitlines()[0])
    parser.add_argument("file", help="a .dl file or an ONNX model (.onnx)")
    parser.add_argument(
        "--output", "-o", required=True, help="the library to write: NAME.so, NAME.o or NAME.a"
    )
    parser.add_argument(
        "--entry",
        "-e",
        action="append",
        metavar="NAME",
        help="a function to export (repeatable; default: every defined function)",
    )
    parser.add_argument(
        "--opt-level", "-O", type=int, choices=range(4), default=2, help="opt level (3: superopt)"
    )
    parser.add_argument(
        "--target", metavar="TRIPLE", help="e.g. aarch64-linux-gnu (default: this machine)"
    )
    parser.add_argument(
        "--target-cpu", metavar="CPU", help="LLVM CPU model (default: this CPU, or generic)"
    )
    parser.add_argument("--header", metavar="PATH", help="the C header (default: PREFIX.h)")
    parser.add_argument(
        "--prefix", metavar="NAME", help="start of the C names (default: from the output name)"
    )
    parser.add_argument("--cc", metavar="CC", help="the C compiler that links a .so")
    parser.add_argument(
        "--bounds-check",
        action="store_true",
        help="check every load and store (a violation returns a status code)",
    )
    parser.add_argument(
        "--allow-extern",
        action="append",
        default=[],
        metavar="NAME",
        help="let the program call the [extern] C function NAME (repeatable; 'libm': "
        "libm's scalar math functions); the library then needs it at link time",
    )
    parser.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="NAME=1x3x224x224",
        help="the shape of an ONNX graph input with dynamic dimensions",
    )
    parser.add_argument(
        "--dynamic",
        action="store_true",
        help="keep an ONNX model's dim_params that --input-shape does not fix as symbolic "
        "dimensions: the C functions take their sizes at call time",
    )
    parser.add_argument(
        "--external-data-dir",
        metavar="DIR",
        help="the directory an ONNX model's external tensor data is read from (default: "
        "the model's own directory); locations must be plain paths below it, no symlinks",
    )
    add_custom_op_argument(parser)
    return parser


def run(argv: Sequence[str] | None) -> str:
    """Parse, compile and write; the line to print (raises RunError, ExportError,
    DiagnosticError)."""
    args = _argument_parser().parse_args(argv)
    externs = allowed_extern_names(args.allow_extern)
    shapes = input_shapes(args.input_shape)
    module, _ = parse_file(
        args.file,
        shapes,
        None,
        args.external_data_dir,
        custom_op_files(args.custom_op),
        args.dynamic,
    )
    from dlc import pipeline
    from dlc.externs import check_externs
    from dlc.program_levels import export_graph_module

    called = check_externs(module, externs)
    options = pipeline.Options(opt_level=args.opt_level, bounds_check=args.bounds_check)
    exported = export_graph_module(
        module,
        args.output,
        options,
        called,
        entries=args.entry,
        prefix=args.prefix,
        header=args.header,
        target=args.target,
        target_cpu=args.target_cpu,
        cc=args.cc,
    )
    return f"wrote {exported.library} and {exported.header}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run dlc-compile; return the exit code (0 ok, 1 user error, 2 internal error)."""
    from dlc.aot import ExportError
    from dlc.cli import guarded_main

    return guarded_main("dlc-compile", lambda: print(run(argv)), (RunError, ExportError))


if __name__ == "__main__":
    sys.exit(main())
