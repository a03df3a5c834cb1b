"""dlc-opt's command line: its options and their help (`register_opt_arguments`; the
output options are `targets.register_output_arguments`) and a parser that raises
`UsageError` instead of exiting."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import NoReturn

from xdsl.xdsl_opt_main import VersionAction

from dlc.cli.targets import UsageError, register_output_arguments

SWITCHES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("--split-input-file",), "process each `// -----` chunk on its own (exit 1 if any fails)"),
    (
        ("--verify-diagnostics",),
        "check the input's `// expected-error {{...}}` comments (without any: print "
        "diagnostics to stdout and exit 0)",
    ),
    (("--print-between-passes",), "print the IR after every pass but the last"),
    (
        ("--print-ir-after-all", "--mlir-print-ir-after-all"),
        "print the IR to stderr after every pass (and -t llvm|asm step)",
    ),
    (
        ("--print-ir-after-failure", "--mlir-print-ir-after-failure"),
        "print the IR to stderr when a pass fails",
    ),
    (("--timing", "--time-passes"), "print per-pass wall time to stderr"),
    (("--print-op-generic",), "MLIR output in the generic format"),
    (("--report-changes",), "print `<pass>: changed|unchanged` per pass"),
    (("--pass-statistics",), "print per-pass statistics to stderr"),
)
"""dlc-opt's on/off options: their names (the first names the attribute) and help."""


INHERITED_HELP = {"disable_verify": "do not verify the IR after each pass"}
"""Help for the flags xDSL's CommandLineTool registers without one."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse that raises instead of printing the usage and exiting with code 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def register_opt_arguments(
    arg_parser: argparse.ArgumentParser, passes: Iterable[str], version_format: str
) -> None:
    """dlc-opt's options on top of xDSL's `CommandLineTool` ones (which get their help)."""
    for action in arg_parser._actions:  # xDSL's flags without help text
        action.help = action.help or INHERITED_HELP.get(action.dest)
    add = arg_parser.add_argument
    add(
        "-p",
        "--passes",
        default="",
        help=f"comma-separated passes: {', '.join(passes)}",
    )
    register_output_arguments(add)
    add(
        "--load-pass-plugin",
        action="append",
        default=[],
        metavar="PATH.py",
        help="load the xDSL passes and dialects a Python file defines (repeatable; "
        "it runs with your rights: load only code you trust)",
    )
    add(
        "--external-data-dir",
        metavar="DIR",
        help="the directory an ONNX model's external tensor data is read from (default: "
        "the model file's directory; from stdin, external data is refused without it)",
    )
    for names, description in SWITCHES:
        add(*names, action="store_true", help=description)
    add(
        "-v",
        "--version",
        action=VersionAction,
        version_format=version_format,
        help="print dlc-opt's and xDSL's versions and exit",
    )
