"""`verify`: check a module and change nothing."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from dlc.analysis.levels import is_graph_level


@dataclass(frozen=True)
class VerifyPass(ModulePass):
    """Verify a module at any level; never rewrites.

    Input: any dlc module. At the graph level it runs dlc's located verifier
    (`graph_verify.verify_module`, raising `DiagnosticError`), then xDSL's structural
    verifier at every level. Afterwards the module is unchanged.
    """

    name = "verify"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if is_graph_level(op):
            from dlc.dialects.graph_verify import verify_module

            verify_module(op)
        op.verify()
