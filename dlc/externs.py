"""Extern functions are a capability: which `[extern]` C functions a program may call.

An `[extern]` declaration binds a symbol of the compiling process, and the compiled
code calls it with the process's rights (integers where C expects pointers included:
`getpid` + `kill`, or `malloc` + `memset` + `system`, are enough to take over the host).
So a compile allows no extern unless asked: `dlc.compile(..., externs=...)` and
`dlc-run --allow-extern NAME` name the C symbols that may be called, and the preset
`"libm"` names libm's pure scalar math functions (`LIBM`).

`check_externs` runs on the graph module before anything else sees it (the compile
cache, the pipeline, the symbol lookup): an `[extern]` declaration that the program
references (`apply @f`, `@f` as a function value, `[adjoint @f ...]`) and the
allow-list does not name is a located error at the declaration. A declaration that
nothing references is never compiled or looked up, so it is harmless and allowed.

Calling convention. An extern whose parameters and result are scalars (at most one
result) takes and returns them by value: `[extern] func @expf: (f32) -> f32` is C's
`float expf(float)`. Any other extern takes its scalars by value and its tensors as
pointers to their row-major elements, then one pointer per result (a tuple's elements
in order) that it writes, and returns nothing: `(f32, <2 x 3 x f32>) -> (<2 x 3 x f32>,
f32)` is `void f(float, const float *x, float *out, float *sum)`. The buffers hold
exactly the declared number of elements; the C function must stay within them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the IR classes are loaded by the functions that walk a module
    from xdsl.dialects.builtin import ModuleOp

    from dlc.dialects.graph import FuncOp

LIBM: tuple[str, ...] = (
    "sin", "cos", "tan", "asin", "acos", "atan", "atan2",
    "sinf", "cosf", "tanf", "asinf", "acosf", "atanf", "atan2f",
    "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
    "sinhf", "coshf", "tanhf", "asinhf", "acoshf", "atanhf",
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
    "expf", "exp2f", "expm1f", "logf", "log2f", "log10f", "log1pf",
    "pow", "sqrt", "cbrt", "hypot",
    "powf", "sqrtf", "cbrtf", "hypotf",
    "erf", "erfc", "tgamma", "lgamma",
    "erff", "erfcf", "tgammaf", "lgammaf",
    "fabs", "floor", "ceil", "round", "trunc",
    "fabsf", "floorf", "ceilf", "roundf", "truncf",
    "fmod", "remainder", "copysign", "fmin", "fmax", "fdim",
    "fmodf", "remainderf", "copysignf", "fminf", "fmaxf", "fdimf",
)  # fmt: skip
"""The `"libm"` preset: C99 math functions of float scalars, each in double and in
`f`-suffixed float. They take and return scalars only, never a pointer, and keep no
state (but `lgamma`, which sets libm's `signgam`)."""

PRESETS: dict[str, tuple[str, ...]] = {"libm": LIBM}

ExternsOption = str | Iterable[str] | None
"""The `externs` compile option: None, a preset name, or symbol and preset names."""

_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def allowed_externs(externs: object, option: str = "externs") -> frozenset[str]:
    """The C symbol names the `externs` compile option allows: None (no extern), a
    preset name (`"libm"`), or an iterable of symbol names and preset names.
    Raise TypeError / ValueError naming the option (`option`) otherwise."""
    if externs is None:
        return frozenset()
    if isinstance(externs, str):
        if externs not in PRESETS:
            raise ValueError(
                f"{option}: unknown preset {externs!r} (presets: {', '.join(PRESETS)}); "
                f"name C symbols in a list, e.g. {option}=[{externs!r}]"
            )
        return frozenset(PRESETS[externs])
    if isinstance(externs, bytes | bytearray) or not isinstance(externs, Iterable):
        raise TypeError(
            f"{option} must be None, a preset name or an iterable of C symbol names, "
            f"got {type(externs).__name__}"
        )
    names: set[str] = set()
    for item in externs:
        if not isinstance(item, str):
            raise TypeError(f"{option}: expected C symbol names (str), got {type(item).__name__}")
        if item in PRESETS:
            names.update(PRESETS[item])
        elif _C_IDENTIFIER.fullmatch(item):
            names.add(item)
        else:
            raise ValueError(f"{option}: {item!r} is neither a C identifier nor a preset name")
    return frozenset(names)


def referenced_symbols(module: ModuleOp) -> set[str]:
    """The function names a graph module refers to: callees, function values, primals."""
    from dlc.dialects.graph import FuncOp, GlobalRefOp
    from dlc.dialects.graph_aggregate import ApplyOp

    names: set[str] = set()
    for op in module.walk():
        if isinstance(op, ApplyOp):
            names.add(op.callee.data)
        elif isinstance(op, GlobalRefOp):
            names.add(op.symbol.data)
        elif isinstance(op, FuncOp) and op.primal is not None:
            names.add(op.primal.data)
    return names


def used_externs(module: ModuleOp) -> list[FuncOp]:
    """The `[extern]` declarations of a graph module that it references, in order."""
    from dlc.dialects.graph import FuncOp

    used = referenced_symbols(module)
    return [
        op
        for op in module.body.block.ops
        if isinstance(op, FuncOp)
        and op.decl is not None
        and op.decl.data == "extern"
        and op.sym_name.data in used
    ]


def not_allowed_message(name: str) -> str:
    """The diagnostic for a referenced extern the allow-list does not name."""
    preset = " (or the preset 'libm')" if name in LIBM else ""
    return (
        f"extern function @{name} is not allowed: externs run native code with this "
        f"process's rights; allow it with externs=[{name!r}] or "
        f"dlc-run --allow-extern {name}{preset}"
    )


def check_externs(module: ModuleOp, allowed: frozenset[str]) -> frozenset[str]:
    """The extern symbols graph `module` calls, all in `allowed`; a located
    `DiagnosticError` at the first referenced `[extern]` declaration that is not."""
    from dlc.diagnostics import error_at

    used = used_externs(module)
    for decl in used:
        if decl.sym_name.data not in allowed:
            raise error_at(decl, not_allowed_message(decl.sym_name.data))
    return frozenset(decl.sym_name.data for decl in used)
