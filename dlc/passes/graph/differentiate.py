"""`differentiate`: reverse-mode automatic differentiation, source to source.

Turns every `[adjoint …]` (or `[gradient …]`) declaration into a definition with DLVM's
signature: the primal's control flow unfolded into a tree (acyclic CFGs only), swept in
reverse per return with the adjoint rules (`autodiff/adjoint_rules.py`), calls
differentiated through synthesized `@g_grad`s that read their forward values from a tape
(`autodiff/differentiate_tape.py`). Only float tensors carry gradients; an op without a
rule on an active path is a located error. The machinery is the `autodiff` subpackage
(`autodiff/differentiator.py` first). Details: docs/guide/differentiation.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from dlc.analysis.levels import require_level
from dlc.diagnostics import clone_located
from dlc.passes.graph.autodiff.differentiate_paths import is_adjoint_decl
from dlc.passes.graph.autodiff.differentiator import Differentiator


def has_adjoint_declarations(module: ModuleOp) -> bool:
    return any(is_adjoint_decl(op) for op in module.body.block.ops)


def differentiated(module: ModuleOp) -> ModuleOp:
    """`module` itself without adjoint declarations, else a differentiated clone."""
    if not has_adjoint_declarations(module):
        return module
    work = clone_located(module)
    Differentiator(work).run()
    return work


@dataclass(frozen=True)
class DifferentiatePass(ModulePass):
    """Define every adjoint declaration of a graph module (see the module docstring).

    Input: a verified graph module. Afterwards no function is an adjoint declaration,
    synthesized callee adjoints (`@g_grad`) follow their caller's adjoint, and the
    module verifies. Modules without adjoint declarations are unchanged.
    """

    name = "differentiate"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "graph", self.name)
        Differentiator(op).run()
