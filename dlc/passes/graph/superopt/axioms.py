"""Operator properties the verifier proves substitutions from, one law a line.

Each axiom is an equation between terms over inputs of symbolic shapes (terms.py).
None is trusted as written: `checked_axioms` evaluates both sides on random integer
inputs for several random dimension sizes (and convolution or pooling configurations)
and drops (and reports) any axiom that fails — published property lists have contained
false entries, and one false axiom proves anything. The prover uses an axiom at every
rank its terms allow (an element-wise or concatenation law written over matrices also
speaks about rank-4 tensors), so an axiom whose terms are well-typed over rank-4
inputs is checked at rank 4 as well.
"""

from __future__ import annotations

from collections.abc import Sequence

from dlc.passes.graph.superopt.library import Rule, holds_numerically
from dlc.passes.graph.superopt.terms import parse, parse_shape, shapes_of

# name, input shapes, lhs = rhs
# fmt: off
AXIOMS: tuple[tuple[str, str, str, str], ...] = (
    ("add-comm", "x:a b y:a b", "(ewadd x y)", "(ewadd y x)"),
    ("add-assoc", "x:a b y:a b z:a b", "(ewadd (ewadd x y) z)", "(ewadd x (ewadd y z))"),
    ("mul-comm", "x:a b y:a b", "(ewmul x y)", "(ewmul y x)"),
    ("mul-assoc", "x:a b y:a b z:a b", "(ewmul (ewmul x y) z)", "(ewmul x (ewmul y z))"),
    ("mul-add-dist", "x:a b y:a b z:a b", "(ewmul (ewadd x y) z)", "(ewadd (ewmul x z) (ewmul y z))"),
    ("smul-comm", "x:a b s: t:", "(smul (smul x s) t)", "(smul (smul x t) s)"),
    ("smul-add", "x:a b y:a b s:", "(smul (ewadd x y) s)", "(ewadd (smul x s) (smul y s))"),
    ("smul-mul", "x:a b y:a b s:", "(smul (ewmul x y) s)", "(ewmul x (smul y s))"),
    ("matmul-assoc", "x:a b y:b c z:c d", "(matmul (matmul x y) z)", "(matmul x (matmul y z))"),
    ("matmul-add-l", "x:a b y:a b z:b c", "(matmul (ewadd x y) z)", "(ewadd (matmul x z) (matmul y z))"),
    ("matmul-add-r", "x:a b y:b c z:b c", "(matmul x (ewadd y z))", "(ewadd (matmul x y) (matmul x z))"),
    ("matmul-smul-l", "x:a b y:b c s:", "(matmul (smul x s) y)", "(smul (matmul x y) s)"),
    ("matmul-smul-r", "x:a b y:b c s:", "(matmul x (smul y s))", "(smul (matmul x y) s)"),
    ("transpose-involution", "x:a b", "(transpose (transpose x))", "x"),
    ("transpose-matmul", "x:a b y:b c", "(transpose (matmul x y))", "(matmul (transpose y) (transpose x))"),
    ("transpose-add", "x:a b y:a b", "(transpose (ewadd x y))", "(ewadd (transpose x) (transpose y))"),
    ("transpose-mul", "x:a b y:a b", "(transpose (ewmul x y))", "(ewmul (transpose x) (transpose y))"),
    ("transpose-smul", "x:a b s:", "(transpose (smul x s))", "(smul (transpose x) s)"),
    ("transpose-relu", "x:a b", "(transpose (relu x))", "(relu (transpose x))"),
    ("transpose-concat0", "x:a c y:b c", "(transpose (concat0 x y))", "(concat1 (transpose x) (transpose y))"),
    ("transpose-concat1", "x:a b y:a c", "(transpose (concat1 x y))", "(concat0 (transpose x) (transpose y))"),
    ("split0a-concat0", "x:a c y:b c", "(split0a (concat0 x y))", "x"),
    ("split0b-concat0", "x:a c y:b c", "(split0b (concat0 x y))", "y"),
    ("split1a-concat1", "x:a b y:a c", "(split1a (concat1 x y))", "x"),
    ("split1b-concat1", "x:a b y:a c", "(split1b (concat1 x y))", "y"),
    ("matmul-concat0", "x:a c y:b c z:c d", "(matmul (concat0 x y) z)", "(concat0 (matmul x z) (matmul y z))"),
    ("matmul-concat1", "x:a b y:b c z:b d", "(matmul x (concat1 y z))", "(concat1 (matmul x y) (matmul x z))"),
    ("matmul-concat-inner", "x:a b y:a c z:b d w:c d", "(matmul (concat1 x y) (concat0 z w))", "(ewadd (matmul x z) (matmul y w))"),
    ("add-concat0", "x:a c y:b c z:a c w:b c", "(ewadd (concat0 x y) (concat0 z w))", "(concat0 (ewadd x z) (ewadd y w))"),
    ("add-concat1", "x:a b y:a c z:a b w:a c", "(ewadd (concat1 x y) (concat1 z w))", "(concat1 (ewadd x z) (ewadd y w))"),
    ("mul-concat0", "x:a c y:b c z:a c w:b c", "(ewmul (concat0 x y) (concat0 z w))", "(concat0 (ewmul x z) (ewmul y w))"),
    ("mul-concat1", "x:a b y:a c z:a b w:a c", "(ewmul (concat1 x y) (concat1 z w))", "(concat1 (ewmul x z) (ewmul y w))"),
    ("smul-concat0", "x:a c y:b c s:", "(smul (concat0 x y) s)", "(concat0 (smul x s) (smul y s))"),
    ("smul-concat1", "x:a b y:a c s:", "(smul (concat1 x y) s)", "(concat1 (smul x s) (smul y s))"),
    ("relu-concat0", "x:a c y:b c", "(relu (concat0 x y))", "(concat0 (relu x) (relu y))"),
    ("relu-concat1", "x:a b y:a c", "(relu (concat1 x y))", "(concat1 (relu x) (relu y))"),
    ("concat0-concat1", "x:a c y:a d z:b c w:b d", "(concat0 (concat1 x y) (concat1 z w))", "(concat1 (concat0 x z) (concat0 y w))"),
    ("relu-idempotent", "x:a b", "(relu (relu x))", "(relu x)"),
    ("relu-double", "x:a b", "(relu (ewadd x x))", "(ewadd (relu x) (relu x))"),  # max(2x, 0) = 2·max(x, 0)
    # convolutions (NCHW images, OIHW kernels) and max pooling
    ("conv-add-l", "x:n c h w y:n c h w k:o c r s", "(conv (ewadd x y) k)", "(ewadd (conv x k) (conv y k))"),
    ("conv-add-r", "x:n c h w k:o c r s l:o c r s", "(conv x (ewadd k l))", "(ewadd (conv x k) (conv x l))"),
    ("conv-smul-l", "x:n c h w k:o c r s t:", "(conv (smul x t) k)", "(smul (conv x k) t)"),
    ("conv-smul-r", "x:n c h w k:o c r s t:", "(conv x (smul k t))", "(smul (conv x k) t)"),
    ("conv-concat-batch", "x:n c h w y:m c h w k:o c r s", "(conv (concat0 x y) k)", "(concat0 (conv x k) (conv y k))"),
    ("conv-concat-kernel", "x:n c h w k:o c r s l:p c r s", "(conv x (concat0 k l))", "(concat1 (conv x k) (conv x l))"),
    ("conv-concat-inner", "x:n c h w y:n d h w k:o c r s l:o d r s", "(conv (concat1 x y) (concat1 k l))", "(ewadd (conv x k) (conv y l))"),
    ("maxpool-concat0", "x:n c h w y:m c h w", "(maxpool (concat0 x y))", "(concat0 (maxpool x) (maxpool y))"),
    ("maxpool-concat1", "x:n c h w y:n d h w", "(maxpool (concat1 x y))", "(concat1 (maxpool x) (maxpool y))"),
    ("maxpool-relu", "x:n c h w", "(maxpool (relu x))", "(relu (maxpool x))"),
    ("maxpool-double", "x:n c h w", "(maxpool (ewadd x x))", "(ewadd (maxpool x) (maxpool x))"),
)
# fmt: on

# A false entry of the kind published property lists have contained; tests plant it.
FALSE_AXIOM = ("planted-false", "x:a b y:a b", "(ewadd x (ewadd y (ewadd x y)))", "(ewadd x y)")


def parse_inputs(spec: str) -> dict[str, tuple]:
    """`x:a b y:b c s:` -> {x: (a, b), y: (b, c), s: ()}."""
    out: dict[str, tuple] = {}
    name = None
    words: list[str] = []
    for word in spec.split():
        if ":" in word:
            if name is not None:
                out[name] = parse_shape(" ".join(words))
            name, first = word.split(":", 1)
            words = [first] if first else []
        else:
            words.append(word)
    if name is not None:
        out[name] = parse_shape(" ".join(words))
    return out


def axiom_rule(entry: tuple[str, str, str, str]) -> Rule:
    name, spec, lhs, rhs = entry
    return Rule(name, parse_inputs(spec), (parse(lhs),), (parse(rhs),), "unknown")


def at_rank4(rule: Rule) -> Rule | None:
    """`rule` over rank-4 inputs (two more dimensions on each non-scalar input), when
    its terms are well-typed so."""
    inputs = {k: (*v, "r4g", "r4h") if v else v for k, v in rule.inputs.items()}
    if shapes_of(rule.lhs + rule.rhs, inputs) is None:
        return None
    return Rule(rule.name, inputs, rule.lhs, rule.rhs)


def checked_axioms(
    entries: Sequence[tuple[str, str, str, str]] = AXIOMS,
) -> tuple[list[Rule], list[Rule]]:
    """(trusted, rejected): each axiom evaluated on random integer inputs first, at
    every rank the prover may use it at."""
    trusted: list[Rule] = []
    rejected: list[Rule] = []
    for entry in entries:
        rule = axiom_rule(entry)
        wide = at_rank4(rule) if all(len(v) in (0, 2) for v in rule.inputs.values()) else None
        holds = holds_numerically(rule, trials=5)
        holds = holds and (wide is None or holds_numerically(wide, trials=3))
        (trusted if holds else rejected).append(rule)
    return trusted, rejected
