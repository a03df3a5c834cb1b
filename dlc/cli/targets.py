"""`dlc-opt` output targets: `-t dl|mlir|llvm|asm` emitters and the default choice by
IR level (DLVM text at the graph level, MLIR below), plus the lowering to llvm they need:
the rest of the `-O` pipeline of `dlc.pipeline` from the module's level, the same
passes `dlc.compile(opt_level=...)` runs, so `-t llvm` prints the code the API runs.

`DlcOptTargets` is the base of `DlcOptMain` (`dlc_opt.py`), so the emitters reach the
parsed arguments, the pass registry and the context of the driver.
"""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.printer import Printer
from xdsl.xdsl_opt_main import xDSLOptMain

from dlc.dialects.levels import check_llvm_level, level_of

TARGETS = ("dl", "mlir", "llvm", "asm")


class UsageError(Exception):
    """A command-line error (bad option, unreadable file, unknown pass): one line, exit 1."""


class DlcOptTargets(xDSLOptMain):
    """The output half of the dlc-opt driver: target registry, emitters, llvm lowering."""

    def register_all_targets(self) -> None:
        emitters: dict[str, Callable[[ModuleOp, IO[str]], None]] = {
            "dl": self.emit_dl,
            "mlir": self.emit_mlir,
            "llvm": self.emit_llvm,
            "asm": self.emit_asm,
        }
        self.available_targets.update(emitters)

    # -- output -----------------------------------------------------------------------

    def default_text(self, module: ModuleOp) -> str:
        out = StringIO()
        (self.emit_dl if level_of(module) == "graph" else self.emit_mlir)(module, out)
        return out.getvalue()

    def output_resulting_program(self, prog: ModuleOp) -> str:
        target = self.args.target or ("dl" if level_of(prog) == "graph" else "mlir")
        out = StringIO()
        self.available_targets[target](prog, out)
        return out.getvalue()

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

        out.write(llvm_ir(self.lower_to_llvm(module), self.args.opt_level))

    def emit_asm(self, module: ModuleOp, out: IO[str]) -> None:
        from dlc.runtime.jit import assembly

        out.write(assembly(self.lower_to_llvm(module), self.args.opt_level))

    def lower_to_llvm(self, module: ModuleOp) -> ModuleOp:
        """Run the rest of the `-O` pipeline to bring `module` down to the llvm level
        (each step timed, verified and printed like a `-p` pass)."""
        from dlc import pipeline

        if level_of(module) != "llvm":
            steps = pipeline.steps(self.pipeline_options(), start=level_of(module))
            module = pipeline.run(module, steps, after=self.after_step, ctx=self.ctx)
        check_llvm_level(module)
        return module

    def pipeline_options(self):  # noqa: ANN201 -- dlc.pipeline.Options, imported lazily
        raise NotImplementedError

    def after_step(self, step, module: ModuleOp) -> None:  # noqa: ANN001
        raise NotImplementedError
