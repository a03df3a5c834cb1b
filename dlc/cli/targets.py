"""`dlc-opt` output targets: `-t dl|mlir|llvm|asm` emitters and the default choice by
IR level (DLVM text at the graph level, MLIR below), plus the lowering to llvm they need:
the rest of the `-O` pipeline of `dlc.pipeline` from the module's level, the same
passes `dlc.compile(opt_level=...)` runs, so `-t llvm` prints the code the API runs.
`Output` is where the result goes (stdout or `-o FILE`).

`DlcOptTargets` is the base of `DlcOptMain` (`dlc_opt.py`), so the emitters reach the
parsed arguments, the pass registry and the context of the driver.
"""

from __future__ import annotations

import dataclasses
import io
import sys
from collections.abc import Callable
from io import StringIO
from typing import IO, TYPE_CHECKING, TypeVar

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.xdsl_opt_main import xDSLOptMain

from dlc.analysis.levels import check_llvm_level, level_of
from dlc.files import AtomicFile, is_device

if TYPE_CHECKING:  # imported where used: dlc-opt starts without the pipeline
    from dlc.options import Options
    from dlc.pipeline import Step

TARGETS = ("dl", "mlir", "llvm", "asm")


def register_output_arguments(add: Callable[..., object]) -> None:
    """dlc-opt's options of the output and of the `-t llvm|asm` pipeline."""
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
        "--view",
        choices=("graph", "fused"),
        help="draw the program instead of printing it: graph (the graph level, with "
        "shapes) or fused (fusion groups and schedules as frames, at -O's level); the "
        "format follows -o: .dot, .svg (needs Graphviz's dot) or .html (DOT on stdout)",
    )
    add(
        "-O",
        "--opt-level",
        type=int,
        choices=range(4),
        default=2,
        help="the pipeline of dlc.compile(opt_level=N) that -t llvm/asm runs (default 2)",
    )
    add(
        "--tuning-db",
        metavar="PATH",
        help="a tuning database (dlc-tune): the schedule pass (in -p and in the -t "
        "llvm/asm pipeline) uses its records and warns per contraction without one",
    )


T = TypeVar("T")


class UsageError(Exception):
    """A command-line error (bad option, unreadable file, unknown pass): one line, exit 1."""


class Output:
    """stdout, or the `-o` file. An OSError while opening, writing or closing it (a full
    disk, `-o /proc/version`) is a UsageError naming it, never a traceback."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.stream: IO[str] = sys.stdout
        self.atomic: AtomicFile | None = None
        if path is not None and is_device(path):  # /dev/null: nothing to replace
            self.stream = self.guard(lambda: open(path, "w"))  # noqa: SIM115 -- closed by close()
        elif path is not None:  # a fresh file renamed into place (dlc/files.py)
            self.atomic = self.guard(lambda: AtomicFile(path))
            self.stream = io.TextIOWrapper(self.atomic.stream, encoding="utf-8")

    def write(self, text: str) -> None:
        self.guard(lambda: self.stream.write(text))

    def flush(self) -> None:
        self.guard(self.stream.flush)

    def close(self) -> None:
        if self.atomic is not None:
            self.guard(self.stream.flush)
            assert isinstance(self.stream, io.TextIOWrapper)  # the wrapper of atomic.stream
            self.stream.detach()
            self.guard(self.atomic.commit)
            return
        self.guard(self.stream.flush if self.path is None else self.stream.close)

    def guard(self, action: Callable[[], T]) -> T:
        try:
            return action()
        except BrokenPipeError:  # a closed pipe ends dlc-opt quietly (exit 1)
            raise
        except OSError as e:
            where = "to stdout" if self.path is None else f"'{self.path}'"
            raise UsageError(f"cannot write {where}: {e.strerror or e}") from None


class DlcOptTargets(xDSLOptMain):
    """The output half of the dlc-opt driver: target registry, emitters, llvm lowering."""

    running: ModulePass | None  # the pass at work (dlc-opt dumps the IR when it fails)
    emitters: dict[str, Callable[[ModuleOp, IO[str]], None]]  # -t's choices

    def register_all_targets(self) -> None:
        self.emitters = {
            "dl": self.emit_dl,
            "mlir": self.emit_mlir,
            "llvm": self.emit_llvm,
            "asm": self.emit_asm,
        }
        self.available_targets.update(self.emitters)

    # -- output -----------------------------------------------------------------------

    def default_text(self, module: ModuleOp) -> str:
        out = StringIO()
        (self.emit_dl if level_of(module) == "graph" else self.emit_mlir)(module, out)
        return out.getvalue()

    def generic_text(self, module: ModuleOp) -> str:
        out = StringIO()
        Printer(stream=out, print_generic_format=True).print_op(module)
        return out.getvalue() + "\n"

    def dump_ir(self, title: str, module: ModuleOp) -> None:
        """mlir-opt's `// -----// IR Dump After <pass> //----- //` and the IR, on stderr
        (generic MLIR when the IR no longer prints in its own syntax)."""
        try:
            text = self.default_text(module)
        except Exception:  # noqa: BLE001 -- a failed pass may leave IR that only prints generically
            text = self.generic_text(module)
        sys.stderr.write(f"// -----// {title} //----- //\n{text}\n")
        sys.stderr.flush()

    def output_resulting_program(self, prog: ModuleOp) -> str:
        if self.args.view:
            return self.emit_view(prog)
        target = self.args.target or ("dl" if level_of(prog) == "graph" else "mlir")
        out = StringIO()
        self.emitters[target](prog, out)
        return out.getvalue()

    def check_view(self) -> None:
        """--view's conflicts and its output format, checked before any work."""
        if not self.args.view:
            return
        from dlc.viewer import MissingDot, ViewError, dot_program, format_of

        for flag, given in (
            ("-t", self.args.target),
            ("--split-input-file", self.args.split_input_file),
        ):
            if given:
                raise UsageError(f"--view draws one program; it does not take {flag}")
        try:
            if format_of(self.args.output_file) == "svg":
                dot_program()
        except (ViewError, MissingDot) as e:
            raise UsageError(str(e)) from None

    def emit_view(self, module: ModuleOp) -> str:
        """The program drawn as --view asks, in the format of the -o file's name."""
        from dlc.viewer import MissingDot, ViewError, format_of, render

        name = self.args.input_file or "<stdin>"
        title = name.rsplit("/", 1)[-1]
        fmt = format_of(self.args.output_file)
        try:
            return render(module, self.args.view, fmt, title=title, opt_level=self.args.opt_level)
        except (ViewError, MissingDot) as e:
            raise UsageError(str(e)) from None

    def emit_dl(self, module: ModuleOp, out: IO[str]) -> None:
        from dlc.parser import print_module

        level = level_of(module)
        if level != "graph":
            raise UsageError(
                f"-t dl prints graph-level modules only; this one is at the {level} level (use -t mlir)"
            )
        out.write(print_module(module))

    def emit_mlir(self, module: ModuleOp, out: IO[str]) -> None:
        Printer(stream=out, print_generic_format=self.args.print_op_generic).print_op(module)
        out.write("\n")

    def emit_llvm(self, module: ModuleOp, out: IO[str]) -> None:
        from dlc.runtime.jit import llvm_ir

        options = self.pipeline_options()
        out.write(llvm_ir(self.lower_to_llvm(module), options.opt_level, options.target))

    def emit_asm(self, module: ModuleOp, out: IO[str]) -> None:
        from dlc.runtime.jit import assembly

        options = self.pipeline_options()
        out.write(assembly(self.lower_to_llvm(module), options.opt_level, options.target))

    def lower_to_llvm(self, module: ModuleOp) -> ModuleOp:
        """Run the rest of the `-O` pipeline to bring `module` down to the llvm level
        (each step timed, verified and printed like a `-p` pass)."""
        from dlc import pipeline
        from dlc.dialects.graph_symbolic import is_symbolic

        if level_of(module) != "llvm":
            options, start = self.pipeline_options(), level_of(module)
            symbolic = start == "graph" and is_symbolic(module)
            steps = pipeline.symbolic_steps(options) if symbolic else pipeline.steps(options, start)
            for step in steps:
                self.running = step.pass_
                pipeline.run(module, [step], after=self.after_step, ctx=self.ctx)
        check_llvm_level(module)
        return module

    def pipeline_options(self) -> Options:
        from dlc.options import Options
        from dlc.runtime.native import openmp_available

        return Options(
            opt_level=self.args.opt_level,
            openmp=openmp_available(),
            tuning_db=self.args.tuning_db or None,
        )

    def with_tuning_db(self, pipeline: PassPipeline) -> PassPipeline:
        """`pipeline` whose schedule passes without a database of their own use
        --tuning-db (unchanged without the option)."""
        path = self.args.tuning_db
        if not path:
            return pipeline
        from dlc.passes.tensor.schedule import SchedulePass

        passes = tuple(
            dataclasses.replace(p, tuning_db=path)
            if isinstance(p, SchedulePass) and not p.tuning_db
            else p
            for p in pipeline.passes
        )
        return PassPipeline(passes, pipeline.callback)

    def after_step(self, step: Step, module: ModuleOp) -> None:
        """A step of the `-t llvm|asm` pipeline: timed, verified and printed like a `-p` pass."""
        self.after_pass(step.pass_, module, None)

    def after_pass(
        self, done: ModulePass | None, module: ModuleOp, upcoming: ModulePass | None
    ) -> None:  # the driver's pipeline callback
        raise NotImplementedError
