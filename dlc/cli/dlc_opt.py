"""`dlc-opt`: parse a dlc program, run passes, print it (DLVM, MLIR, LLVM IR or assembly).

A thin subclass of xDSL's `xDSLOptMain` that loads only dlc's dialects and passes,
reads `.dl` (DLVM syntax, also the default for stdin) and `.mlir` files, and reports
every user error as one diagnostic with exit code 1, never a traceback:

    dlc-opt model.dl -p lower-graph-to-tensor,lower-tensor-to-loop
    dlc-opt model.dl -t llvm -O 3 -o model.ll
    dlc-opt invalid.dl --split-input-file --verify-diagnostics
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from io import BytesIO
from typing import IO, NoReturn

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.tools.command_line_tool import CommandLineTool
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError
from xdsl.xdsl_opt_main import VersionAction

from dlc.cli.targets import TARGETS, DlcOptTargets, UsageError
from dlc.diagnostics import DiagnosticError, Location, verify_located
from dlc.dialects.levels import level_of
from dlc.passes.statistics import PassStatistics
from dlc.version import __version__


class IRVerifyError(Exception):
    """The IR failed xDSL's structural verifier: a one-line diagnostic."""


class _ArgumentParser(argparse.ArgumentParser):
    """argparse that raises instead of printing the usage and exiting with code 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


class DlcOptMain(DlcOptTargets):
    """xDSL's optimizer driver with dlc's dialects, passes, frontends and targets."""

    version_format = f"dlc-opt {__version__} (xdsl {{xdsl_version}})"

    def __init__(self, args: Sequence[str] | None = None):
        self.available_frontends = {}
        self.available_passes = {}
        self.available_targets = {}
        self.ctx = Context()
        self.register_all_dialects()
        self.register_all_frontends()
        self.register_all_passes()
        self.register_all_targets()
        arg_parser = _ArgumentParser(prog="dlc-opt", description=__doc__.splitlines()[0])
        self.register_all_arguments(arg_parser)
        self.args = arg_parser.parse_args(args=args)
        self.ctx.allow_unregistered = self.args.allow_unregistered_dialect
        self.input_is_verified = False
        self.setup_pipeline()

    # -- registries -------------------------------------------------------------------

    def register_all_dialects(self) -> None:
        from dlc.dialects import get_all_dialects

        for name, factory in get_all_dialects().items():
            self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        from dlc.pipeline import get_all_passes

        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)

    def register_all_frontends(self) -> None:
        def parse_dl(io: IO[bytes]) -> ModuleOp:
            from dlc.parser import parse_module

            return parse_module(io.read(), self.get_input_name())

        def parse_mlir(io: IO[bytes]) -> ModuleOp:
            try:
                text = io.read().decode("utf-8")
            except UnicodeDecodeError as e:
                raise UsageError(f"{self.get_input_name()}: not UTF-8 text: {e.reason}") from None
            from dlc.parser.mlir import parse_mlir as parse_located

            name = self.get_input_name()
            return parse_located(
                self.ctx, text, name, implicit_module=not self.args.no_implicit_module
            )

        self.available_frontends["dl"] = parse_dl
        self.available_frontends["mlir"] = parse_mlir

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        CommandLineTool.register_all_arguments(self, arg_parser)
        add = arg_parser.add_argument
        add(
            "-p",
            "--passes",
            default="",
            help=f"comma-separated passes: {', '.join(self.available_passes)}",
        )
        add(
            "-t",
            "--target",
            "--emit",
            dest="target",
            choices=TARGETS,
            help="output: dl (default at graph level), mlir (default below), llvm, asm",
        )
        add("-o", "--output-file", help="write the output here instead of stdout")
        add(
            "-O",
            "--opt-level",
            type=int,
            choices=range(4),
            default=2,
            help="the pipeline of dlc.compile(opt_level=N) that -t llvm/asm runs (default 2)",
        )
        add(
            "--split-input-file",
            action="store_true",
            help="process each `// -----` chunk on its own",
        )
        add(
            "--verify-diagnostics",
            action="store_true",
            help="print diagnostics to stdout and exit 0",
        )
        add(
            "--print-between-passes",
            action="store_true",
            help="print the IR after every pass but the last",
        )
        add(
            "--timing",
            "--time-passes",
            dest="timing",
            action="store_true",
            help="print per-pass wall time to stderr",
        )
        add("--print-op-generic", action="store_true", help="MLIR output in the generic format")
        add(
            "--report-changes",
            action="store_true",
            help="print `<pass>: changed|unchanged` per pass",
        )
        add("--pass-statistics", action="store_true", help="print per-pass statistics to stderr")
        add("-v", "--version", action=VersionAction, version_format=self.version_format)

    # -- input ------------------------------------------------------------------------

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        if self.args.input_file is None:
            return sys.stdin.buffer, "dl"
        path: str = self.args.input_file
        try:
            f = open(path, "rb")  # noqa: SIM115 -- closed by the chunk loop
        except OSError as e:
            raise UsageError(f"cannot read '{path}': {e.strerror or e}") from None
        extension = path.rsplit(".", 1)[-1] if "." in path.rsplit("/", 1)[-1] else ""
        return f, extension

    def get_input_name(self) -> str:
        return self.args.input_file or "<stdin>"

    def prepare_input(self) -> tuple[list[tuple[IO[bytes], int]], str]:
        """The input as (chunk, line offset of the chunk) pairs, and its syntax."""
        f, extension = self.get_input_stream()
        extension = self.args.frontend or extension
        if extension not in self.available_frontends:
            f.close()
            raise UsageError(
                f"cannot tell the input syntax from extension '{extension}'; use -f dl or -f mlir"
            )
        if not self.args.split_input_file:
            return [(f, 0)], extension
        pieces = f.read().split(b"// -----")
        f.close()
        chunks: list[tuple[IO[bytes], int]] = []
        offset = 0
        for piece in pieces:
            chunks.append((BytesIO(piece), offset))
            offset += piece.count(b"\n")
        return chunks, extension

    def prepare_output(self) -> IO[str]:
        if self.args.output_file is None:
            return sys.stdout
        try:
            return open(self.args.output_file, "w")  # noqa: SIM115 -- closed by run()
        except OSError as e:
            raise UsageError(f"cannot write '{self.args.output_file}': {e.strerror or e}") from None

    # -- passes -----------------------------------------------------------------------

    def setup_pipeline(self) -> None:
        spec: str = self.args.passes
        try:
            names = [p.name for p in parse_pipeline(spec)]
        except ArgSpecParseError as e:
            raise UsageError(
                f"invalid pass pipeline '{spec}': {str(e).splitlines()[-1].strip()}"
            ) from None
        for name in names:
            if name not in self.available_passes:
                raise UsageError(
                    f"unknown pass '{name}' (available: {', '.join(self.available_passes)})"
                )
        # Like DLVM's mandatory AD: a pipeline that lowers the graph level differentiates
        # the [adjoint] declarations first (see apply_passes).
        lowers = "lower-graph-to-tensor" in names
        self.auto_differentiate = (
            lowers
            and "differentiate"
            not in names[: names.index("lower-graph-to-tensor") if lowers else 0]
        )
        try:
            self.pipeline = PassPipeline.parse_spec(self.available_passes, spec, self.after_pass)
        except (ValueError, TypeError) as e:
            raise UsageError(f"invalid pass options in '{spec}': {e}") from None
        self.pass_start = time.perf_counter()

    def after_pass(
        self, done: ModulePass | None, module: ModuleOp, upcoming: ModulePass | None
    ) -> None:
        """Pipeline callback: time, verify and optionally print after each pass."""
        if done is not None and self.args.timing:
            self.report_time(done.name, self.pass_start)
        if self.args.report_changes or self.args.pass_statistics:
            self.report_pass(done, module)
        if done is not None or not self.input_is_verified:
            self.verify(module, done)
        if done is not None and upcoming is not None and self.args.print_between_passes:
            sys.stdout.write(
                f"// -----// IR after {done.name} //----- //\n{self.default_text(module)}\n"
            )
        self.pass_start = time.perf_counter()

    def report_pass(self, done: ModulePass | None, module: ModuleOp) -> None:
        """DLVM's `AS: changed` lines (stdout) and statistics (stderr) of the pass `done`."""
        text, ops = self.default_text(module), sum(1 for _ in module.walk()) - 1
        if done is not None and self.args.report_changes:
            print(f"{done.name}: {'changed' if text != self.last_text else 'unchanged'}")
        if done is not None and self.args.pass_statistics:
            stats = done.take_statistics() if isinstance(done, PassStatistics) else {}
            stats.update({"ops before": self.last_ops, "ops after": ops})
            for key, value in stats.items():
                print(f"dlc-opt: statistics: {done.name}: {key}: {value}", file=sys.stderr)
        self.last_text, self.last_ops = text, ops

    def verify(self, module: ModuleOp, done: ModulePass | None) -> None:
        """dlc's located verifier at the graph level, then xDSL's structural verifier."""
        if self.args.disable_verify:
            return
        if level_of(module) == "graph":
            from dlc.dialects.graph_verify import verify_module

            verify_module(module)
        try:
            verify_located(module)
        except DiagnosticError as e:
            where = f"after pass '{done.name}'" if done is not None else "in the input"
            message = f"IR does not verify {where}: {e.message}"
            if e.location is None:
                raise IRVerifyError(message) from None
            raise DiagnosticError(message, e.location) from None

    def pipeline_options(self):  # noqa: ANN201 -- dlc.pipeline.Options
        from dlc.pipeline import Options
        from dlc.runtime.native import openmp_available

        return Options(opt_level=self.args.opt_level, openmp=openmp_available())

    def after_step(self, step, module: ModuleOp) -> None:  # noqa: ANN001 -- pipeline.Step
        """A step of the `-t llvm|asm` pipeline: timed and verified like a `-p` pass."""
        self.after_pass(step.pass_, module, None)

    def report_time(self, what: str, start: float) -> None:
        print(
            f"dlc-opt: timing: {what}: {(time.perf_counter() - start) * 1e3:.3f} ms",
            file=sys.stderr,
        )

    def apply_passes(self, prog: ModuleOp) -> None:
        if self.auto_differentiate:
            self.available_passes["differentiate"]()().apply(self.ctx, prog)
        self.pipeline.apply(self.ctx, prog)

    # -- driver -----------------------------------------------------------------------

    def run(self) -> None:
        chunks, extension = self.prepare_input()
        output = self.prepare_output()
        self.input_is_verified = extension == "dl"
        try:
            for i, (chunk, offset) in enumerate(chunks):
                if i > 0:
                    output.write("// -----\n")
                try:
                    self.run_chunk(chunk, extension, offset, output)
                finally:
                    chunk.close()
        finally:
            if output is not sys.stdout:
                output.close()

    def run_chunk(self, chunk: IO[bytes], extension: str, offset: int, output: IO[str]) -> None:
        """Parse, transform and print one chunk; diagnostics go to stdout with --verify-diagnostics."""
        try:
            start = time.perf_counter()
            module = self.parse_chunk(chunk, extension, offset)
            if self.args.timing:
                self.report_time("parse", start)
            assert module is not None
            self.apply_passes(module)
            if self.args.target in ("llvm", "asm"):
                self.pass_start = time.perf_counter()
                self.lower_to_llvm(module)
            start = time.perf_counter()
            output.write(self.output_resulting_program(module))
            if self.args.timing:
                self.report_time(f"emit {self.args.target or 'default'}", start)
        except DiagnosticError as e:
            self.report_diagnostic(_shifted(e, offset).format(), output)
        except ParseError as e:
            self.report_diagnostic(_from_parse_error(e, offset).format(), output)
        except IRVerifyError as e:
            self.report_diagnostic(f"dlc-opt: error: {e}", output)
        output.flush()

    def report_diagnostic(self, text: str, output: IO[str]) -> None:
        if not self.args.verify_diagnostics:
            raise _Reported(text)
        output.flush()
        sys.stdout.write(text.rstrip("\n") + "\n")
        sys.stdout.flush()


class _Reported(Exception):
    """A diagnostic already formatted for stderr; exit 1."""


def _first_line(e: BaseException) -> str:
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return lines[0] if lines else type(e).__name__


def _from_parse_error(e: ParseError, line_offset: int) -> DiagnosticError:
    """xDSL's MLIR parse error as a dlc diagnostic, its line counted in the whole file."""
    span = e.span
    where = span.get_location()
    start = span.input.get_start_of_line(span.start)
    source = span.input.content[start : span.input.get_end_of_line(span.start)]
    if isinstance(source, bytes):
        source = source.decode("utf-8", "replace")
    message = " ".join(e.msg.split())
    return DiagnosticError(
        message, Location(where.file, where.line + line_offset, where.col, source)
    )


def _shifted(e: DiagnosticError, line_offset: int) -> DiagnosticError:
    """`e` with its line counted from the start of the whole file, not of its chunk."""
    loc = e.location
    if loc is None or line_offset == 0 or loc.line <= 0:
        return e
    moved = Location(loc.filename, loc.line + line_offset, loc.column, loc.source_line)
    return DiagnosticError(e.message, moved)


def main(argv: Sequence[str] | None = None) -> int:
    """Run dlc-opt; return the exit code (0 ok, 1 user error, 2 internal error)."""
    try:
        DlcOptMain(args=argv).run()
    except _Reported as e:
        print(str(e), file=sys.stderr)
        return 1
    except DiagnosticError as e:
        print(e.format(), file=sys.stderr)
        return 1
    except UsageError as e:
        print(f"dlc-opt: error: {e}", file=sys.stderr)
        return 1
    except DiagnosticException as e:
        print(f"dlc-opt: error: {_first_line(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
    except (Exception, ArgSpecParseError, RecursionError) as e:
        print(f"dlc-opt: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
