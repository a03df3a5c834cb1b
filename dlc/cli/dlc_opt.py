"""`dlc-opt`: parse a dlc program, run passes, print it (DLVM, MLIR, LLVM IR or assembly).

A thin subclass of xDSL's `xDSLOptMain` with dlc's dialects and passes. It reads `.dl`
(DLVM syntax; also stdin, `-` and files without an extension) and `.mlir`, follows
`mlir-opt`'s conventions (`--split-input-file` processes every chunk, fails if any
failed; `--verify-diagnostics` checks `// expected-error {{...}}` comments, see
`opt_diagnostics.py`; `--print-ir-after-all`, `--mlir-print-ir-after-failure`), and
reports every user error as one diagnostic with exit code 1, never a traceback:

    dlc-opt model.dl -p lower-graph-to-tensor,lower-tensor-to-loop
    dlc-opt model.dl -t llvm -O 3 -o model.ll
    dlc-opt invalid.dl --split-input-file --verify-diagnostics
    dlc-opt model.onnx --view=fused -o model.html
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from io import BytesIO
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.tools.command_line_tool import CommandLineTool
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException

from dlc.analysis.levels import level_of
from dlc.cli import plain_warnings
from dlc.cli.opt_arguments import ArgumentParser, register_opt_arguments
from dlc.cli.opt_diagnostics import (
    IRVerifyError,
    as_diagnostic,
    differences,
    first_line,
    format_diagnostic,
    has_expectations,
)
from dlc.cli.targets import DlcOptTargets, Output, UsageError
from dlc.diagnostics import DiagnosticError, verify_located
from dlc.passes.graph.superopt import measure
from dlc.passes.statistics import PassStatistics
from dlc.version import __version__


class DlcOptMain(DlcOptTargets):
    """xDSL's optimizer driver with dlc's dialects, passes, frontends and targets."""

    version_format = f"dlc-opt {__version__} (xdsl {{xdsl_version}})"

    def __init__(self, args: Sequence[str] | None = None):
        self.available_frontends = {}
        self.available_passes = {}
        self.available_targets = {}
        self.ctx = Context()
        self.load_plugins(sys.argv[1:] if args is None else list(args))
        self.register_all_dialects()
        self.register_all_frontends()
        self.register_all_passes()
        self.register_all_targets()
        arg_parser = ArgumentParser(prog="dlc-opt", description=__doc__.splitlines()[0])
        self.register_all_arguments(arg_parser)
        self.args = arg_parser.parse_args(args=args)
        self.ctx.allow_unregistered = self.args.allow_unregistered_dialect
        self.input_is_verified = False
        self.expecting = False  # --verify-diagnostics and the input has expected-* comments
        self.running: ModulePass | None = None  # the pass at work (for after-failure dumps)
        self.last_text, self.last_ops = "", 0  # the IR after the last pass, its op count
        self.check_view()
        self.setup_pipeline()

    # -- registries -------------------------------------------------------------------

    def load_plugins(self, argv: list[str]) -> None:
        """Installed plugins' entry points and each `--load-pass-plugin PATH` (read
        before the other arguments: their passes are in `-p`'s choices and `--help`)."""
        from dlc.plugins import PluginError, load_entry_points, load_plugin, plugin_paths

        try:
            load_entry_points()
            for path in plugin_paths(argv):
                load_plugin(path)
        except PluginError as e:
            raise UsageError(str(e)) from None

    def register_all_dialects(self) -> None:
        from dlc.dialects import get_all_dialects
        from dlc.plugins import DIALECTS, dialect_factory

        for name, factory in get_all_dialects().items():
            self.ctx.register_dialect(name, factory)
        for name in DIALECTS:
            self.ctx.register_dialect(name, dialect_factory(name))

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

        def parse_onnx(io: IO[bytes]) -> ModuleOp:
            from dlc.onnx import load

            name = self.get_input_name()
            base = self.args.external_data_dir
            if base is None and not self.reads_stdin():  # a file: its own directory
                base = os.path.dirname(os.path.abspath(self.args.input_file))
            return load(io.read(), filename=name, external_data_dir=base)

        self.available_frontends["dl"] = parse_dl
        self.available_frontends["mlir"] = parse_mlir
        self.available_frontends["onnx"] = parse_onnx

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        CommandLineTool.register_all_arguments(self, arg_parser)
        register_opt_arguments(arg_parser, self.available_passes, self.version_format)

    # -- input ------------------------------------------------------------------------

    def reads_stdin(self) -> bool:
        return self.args.input_file in (None, "-")

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        """The input and its syntax by extension: stdin (no name or `-`) and files
        without an extension are DLVM text (`.dl`), dlc's own syntax."""
        if self.reads_stdin():
            return sys.stdin.buffer, "dl"
        path: str = self.args.input_file
        try:
            f = open(path, "rb")  # noqa: SIM115 -- closed by prepare_input
        except OSError as e:
            raise UsageError(f"cannot read '{path}': {e.strerror or e}") from None
        base = path.rsplit("/", 1)[-1]
        extension = base.rsplit(".", 1)[-1] if "." in base.lstrip(".") else "dl"
        return f, extension

    def get_input_name(self) -> str:
        return "<stdin>" if self.reads_stdin() else self.args.input_file

    def prepare_input(self) -> tuple[list[tuple[IO[bytes], int]], str]:
        """The input as (chunk, line offset of the chunk) pairs, and its syntax."""
        f, extension = self.get_input_stream()
        extension = self.args.frontend or extension
        try:
            if extension not in self.available_frontends:
                raise UsageError(
                    f"cannot tell the input syntax from extension '{extension}'; use -f dl or -f mlir"
                )
            text = f.read()
        except OSError as e:
            raise UsageError(f"cannot read '{self.get_input_name()}': {e.strerror or e}") from None
        finally:
            if f is not sys.stdin.buffer:
                f.close()
        pieces = text.split(b"// -----") if self.args.split_input_file else [text]
        chunks: list[tuple[IO[bytes], int]] = []
        offset = 0
        for piece in pieces:
            chunks.append((BytesIO(piece), offset))
            offset += piece.count(b"\n")
        return chunks, extension

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
        # the [adjoint] declarations first, and decomposes einsum and top-k, which have
        # no code generation of their own (see apply_passes).
        lowers = "lower-graph-to-tensor" in names
        before = names[: names.index("lower-graph-to-tensor") if lowers else 0]
        self.auto_differentiate = lowers and "differentiate" not in before
        self.auto_decompose = lowers and "decompose-composites" not in before
        try:
            self.pipeline = PassPipeline.parse_spec(self.available_passes, spec, self.after_pass)
        except (ValueError, TypeError) as e:
            raise UsageError(f"invalid pass options in '{spec}': {e}") from None
        self.pipeline = self.with_tuning_db(self.pipeline)
        self.pass_start = time.perf_counter()

    def after_pass(
        self, done: ModulePass | None, module: ModuleOp, upcoming: ModulePass | None
    ) -> None:
        """Pipeline callback: time, verify and optionally print after each pass."""
        if done is not None and self.args.timing:
            self.report_time(done.name, self.pass_start)
        if self.args.report_changes or self.args.pass_statistics:
            self.report_pass(done, module)
        if done is not None and self.args.print_ir_after_all:
            self.dump_ir(f"IR Dump After {done.name}", module)
        if done is not None or not self.input_is_verified:
            self.verify(module, done)
        if done is not None and upcoming is not None and self.args.print_between_passes:
            sys.stdout.write(
                f"// -----// IR after {done.name} //----- //\n{self.default_text(module)}\n"
            )
        self.running = upcoming
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

    def report_time(self, what: str, start: float) -> None:
        elapsed_ms = (time.perf_counter() - start) * 1e3
        print(f"dlc-opt: timing: {what}: {elapsed_ms:.3f} ms", file=sys.stderr)

    def apply_passes(self, prog: ModuleOp) -> None:
        for name, wanted in (
            ("differentiate", self.auto_differentiate),
            ("decompose-composites", self.auto_decompose),
        ):
            if wanted and level_of(prog) == "graph":
                self.running = self.available_passes[name]()()
                self.running.apply(self.ctx, prog)
        self.pipeline.apply(self.ctx, prog)

    # -- driver -----------------------------------------------------------------------

    def run(self) -> int:
        """Process every chunk; the exit code: 1 if any chunk failed (with
        --verify-diagnostics: if any chunk's diagnostics differ from its expectations)."""
        chunks, extension = self.prepare_input()
        self.input_is_verified = extension == "dl"
        texts = [chunk.read() for chunk, _ in chunks]
        self.expecting = self.args.verify_diagnostics and any(map(has_expectations, texts))
        output = Output(self.args.output_file)
        failed = False
        try:
            for i, (text, (_, offset)) in enumerate(zip(texts, chunks, strict=True)):
                if i > 0:
                    output.write("// -----\n")
                produced = self.run_chunk(BytesIO(text), extension, offset, output)
                failed |= self.report(produced, text, offset, output)
        finally:
            output.close()
        return 1 if failed else 0

    def run_chunk(
        self, chunk: IO[bytes], extension: str, offset: int, output: Output
    ) -> DiagnosticError | None:
        """Parse, transform and print one chunk; its diagnostic, if any (located in the
        whole file, or without a location)."""
        module: ModuleOp | None = None
        self.running = None
        try:
            if self.args.timing and extension == "dl":  # start-up apart from the parse
                start = time.perf_counter()
                from dlc.parser import prepare

                prepare()
                self.report_time("load parser (imports, tables)", start)
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
            text = self.output_resulting_program(module)
            if self.args.timing:
                self.report_time(f"emit {self.args.target or 'default'}", start)
        except Exception as e:
            if module is not None and self.running is not None and self.args.print_ir_after_failure:
                self.dump_ir(f"IR Dump After {self.running.name} Failed", module)
            diagnostic = as_diagnostic(e, offset)
            if diagnostic is None:
                raise
            return diagnostic
        output.write(text)
        output.flush()
        return None

    def report(
        self, produced: DiagnosticError | None, text: bytes, offset: int, output: Output
    ) -> bool:
        """Report a chunk's diagnostic (or, when the input has `expected-*` comments, its
        differences from them); whether the chunk failed."""
        if self.expecting:
            errors = differences(text, self.get_input_name(), offset, produced)
            for error in errors:
                print(format_diagnostic(error), file=sys.stderr)
            return bool(errors)
        if produced is None:
            return False
        if self.args.verify_diagnostics:  # no expectations: the diagnostic is the output
            output.flush()
            sys.stdout.write(format_diagnostic(produced) + "\n")
            sys.stdout.flush()
            return False
        print(format_diagnostic(produced), file=sys.stderr)
        return True


def install_superopt_costs() -> None:
    """Give superoptimize dlc's runtime (`measure.provide_lazily`: when a pass first asks
    for it): kernels compiled at opt 2 on one thread, the timed guard's functions on the
    default threads."""
    from dlc.api import compile_kernel, compile_timed
    from dlc.options import check_threads
    from dlc.superopt_costs import install

    install(compile_kernel, lambda module, name: compile_timed(module, name, check_threads(None)))


def main(argv: Sequence[str] | None = None, tool: type[DlcOptMain] = DlcOptMain) -> int:
    """Run dlc-opt; return the exit code (0 ok, 1 user error, 2 internal error). `tool`
    is the driver class: a subclass registers more passes or dialects (a plugin)."""
    plain_warnings()
    # superoptimize{costs=measured} times dlc's kernels and its guard whole functions
    # (the runtime side is imported only when a pass first asks for it)
    measure.provide_lazily(install_superopt_costs)
    try:
        return tool(args=argv).run()
    except DiagnosticError as e:
        print(format_diagnostic(e), file=sys.stderr)
        return 1
    except UsageError as e:
        print(f"dlc-opt: error: {e}", file=sys.stderr)
        return 1
    except DiagnosticException as e:
        print(f"dlc-opt: error: {first_line(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
    except (Exception, ArgSpecParseError, RecursionError) as e:
        print(f"dlc-opt: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
