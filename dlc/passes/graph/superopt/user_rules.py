"""Rewrite rules users write in DLVM, proven before they are used.

A rule file is a DLVM module of function pairs `@NAME_lhs` / `@NAME_rhs` with the same
signature: for all inputs, the two functions return the same values. Their bodies are
read into the substitution terms of the superoptimizer (`terms.py`: element-wise `add`
and `multiply` of equal shapes, `multiply` by a scalar, `max %x, 0`, rank-2 `dot`,
`transpose`, two-part `concatenate` along axis 0 or 1). Sizes are symbolic: equal sizes
in the declared types are one dimension, different sizes different ones, so a rule
written at `<2 x 3>` and `<3 x 5>` holds for every `m × k` and `k × n` (give different
dimensions different sizes).

`check(rule)` first evaluates both functions with the reference interpreter on random
integer-valued inputs at the declared shapes (a difference is a refutation with that
counterexample), then asks the prover (z3, the superoptimizer's axioms, each checked on
random inputs first): `proven`, or `unknown` when it finds no proof within its step
limit. Only proven rules are applied (`superoptimize{rules=FILE.dl}`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from dlc.diagnostics import DiagnosticError, Location, get_loc
from dlc.dialects.graph import FuncOp, LiteralOp, ReturnOp
from dlc.dialects.graph_types import TensorType, TupleType, format_type
from dlc.passes.graph.superopt.graphs import classify
from dlc.passes.graph.superopt.library import Rule
from dlc.passes.graph.superopt.terms import Dim, Term, shapes_of

KINDS = ("ewadd", "ewmul", "smul", "relu", "matmul", "transpose", "concat0", "concat1")
"""The term ops user rules may use (windows and splits need configurations and cuts
that a DLVM type does not state)."""
TRIALS = 4


@dataclass(frozen=True)
class UserRule:
    """A rule of a user's file: its two functions and their terms."""

    name: str
    rule: Rule
    lhs: FuncOp
    rhs: FuncOp
    location: Location | None


@dataclass(frozen=True)
class Verdict:
    """`proven`, `refuted` (with `counterexample`) or `unknown`."""

    status: str
    counterexample: str = ""


def read_rules(module: ModuleOp, filename: str) -> list[UserRule]:
    """The rules of a parsed rule file; a malformed one is a located `DiagnosticError`."""
    funcs = {op.sym_name.data: op for op in module.ops if isinstance(op, FuncOp)}
    rules: list[UserRule] = []
    for name, func in funcs.items():
        if func.is_declaration:
            raise _error(func, filename, f"@{name}: a rule file holds function definitions only")
        base, _, side = name.rpartition("_")
        if side not in ("lhs", "rhs") or not base:
            raise _error(
                func, filename, f"@{name}: rule functions are named @NAME_lhs and @NAME_rhs"
            )
        other = funcs.get(f"{base}_{'rhs' if side == 'lhs' else 'lhs'}")
        if other is None:
            raise _error(
                func, filename, f"@{name} has no @{base}_{'rhs' if side == 'lhs' else 'lhs'}"
            )
        if side == "rhs":
            continue
        if other.function_type != func.function_type:
            raise _error(
                other,
                filename,
                f"@{base}_rhs has type {format_type(other.function_type)}, "
                f"@{base}_lhs {format_type(func.function_type)}",
            )
        rules.append(_rule(base, func, other, filename))
    if not rules:
        raise DiagnosticError(
            "the file defines no rule (@NAME_lhs and @NAME_rhs)", Location(filename, 1, 1)
        )
    return rules


def _rule(name: str, lhs: FuncOp, rhs: FuncOp, filename: str) -> UserRule:
    entry = lhs.entry
    assert entry is not None
    params = [_param_name(a, i) for i, a in enumerate(entry.args)]
    symbols: dict[int, str] = {}
    inputs: dict[str, tuple[Dim, ...]] = {}
    for pname, t in zip(params, lhs.function_type.args, strict=True):
        if not isinstance(t, TensorType) or t.rank not in (0, 2, 4):
            raise _error(
                lhs,
                filename,
                f"@{name}_lhs: parameter %{pname} of type {format_type(t)}: rule inputs are scalars, matrices or rank-4 tensors",
            )
        inputs[pname] = tuple(symbols.setdefault(d, _symbol(len(symbols))) for d in t.dims)
    sides = tuple(_terms(f, params, filename) for f in (lhs, rhs))
    rule = Rule(f"user.{name}", inputs, sides[0], sides[1])
    if shapes_of(rule.lhs + rule.rhs, inputs) is None:
        raise _error(
            lhs,
            filename,
            f"rule {name}: its sides are ill-typed over symbolic sizes (equal sizes are one "
            "dimension: give different dimensions different sizes)",
        )
    return UserRule(name, rule, lhs, rhs, get_loc(lhs))


def _terms(func: FuncOp, params: list[str], filename: str) -> tuple[Term, ...]:
    entry = func.entry
    assert entry is not None
    if len(func.body.blocks) != 1:
        raise _error(func, filename, f"@{func.sym_name.data}: a rule side is one block")
    terms: dict[SSAValue, Term] = dict(zip(entry.args, params, strict=True))
    for op in entry.ops:
        if isinstance(op, ReturnOp):
            values = list(op.operands)
            if len(values) == 1 and isinstance(values[0].type, TupleType):
                tup = values[0].owner
                if not isinstance(tup, LiteralOp):
                    raise _error(
                        op, filename, "a rule returns its values or a tuple literal of them"
                    )
                values = list(tup.elements)
            return tuple(_term_of(v, terms, op, filename) for v in values)
        if isinstance(op, LiteralOp):
            continue  # constants (`max %x, 0`) and the returned tuple: no term of their own
        found = classify(op)
        if found is None or found[0] not in KINDS:
            raise _error(
                op,
                filename,
                f"'{op.name.split('.')[-1]}' is not in the rule language (add, multiply, "
                "max with 0, dot of matrices, transpose, concatenate along axis 0 or 1)",
            )
        kind, ins, _ = found
        terms[op.results[0]] = (kind, *(_term_of(v, terms, op, filename) for v in ins))
    raise _error(func, filename, f"@{func.sym_name.data} does not return")


def _term_of(value: SSAValue, terms: dict[SSAValue, Term], op: Any, filename: str) -> Term:
    if value not in terms:
        raise _error(op, filename, "rule terms read parameters and rule-language results only")
    return terms[value]


def _param_name(arg: SSAValue, index: int) -> str:
    name = getattr(arg, "_name", None) or f"arg{index}"
    return name.replace(".", "_")


def _symbol(k: int) -> str:
    letters = "mnkpqrstuvwxyzabcdefghij"
    return letters[k] if k < len(letters) else f"d{k}"


def _error(op: Any, filename: str, message: str) -> DiagnosticError:
    loc = get_loc(op)
    return DiagnosticError(message, loc if loc is not None else Location(filename, 1, 1))


@cache
def _prover() -> Any:
    from dlc.passes.graph.superopt.axioms import checked_axioms
    from dlc.passes.graph.superopt.prove import Prover

    trusted, _ = checked_axioms()
    return Prover(trusted)


def check(rule: UserRule, module: ModuleOp, seed: int = 0) -> Verdict:
    """Refuted by a counterexample of the reference interpreter, else proven or unknown."""
    found = counterexample(rule, module, seed)
    if found is not None:
        return Verdict("refuted", describe(rule, module, found))
    return Verdict(_prover().prove(rule.rule))


def counterexample(rule: UserRule, module: ModuleOp, seed: int = 0) -> list[np.ndarray] | None:
    """Inputs (small integers, as values of the declared types) on which the two
    functions of `rule` differ under the reference interpreter, or None."""
    rng = np.random.default_rng(seed)
    types = rule.lhs.function_type.args
    for trial in range(TRIALS):
        args = [_random(t, rng, negative=trial % 2 == 1) for t in types]
        left, right = sides(rule, module, args)
        if not _same(left, right):
            return args
    return None


def sides(rule: UserRule, module: ModuleOp, args: list[np.ndarray]) -> tuple[object, object]:
    """Both functions of `rule` on `args`, by the reference interpreter."""
    from dlc.semantics.interpreter import run_function

    left = run_function(module, rule.lhs.sym_name.data, args)
    return left, run_function(module, rule.rhs.sym_name.data, args)


def describe(rule: UserRule, module: ModuleOp, args: list[np.ndarray]) -> str:
    """`%x = ..., %y = ...: lhs ..., rhs ...`."""
    left, right = sides(rule, module, args)
    shown = ", ".join(f"%{n} = {_show(a)}" for n, a in zip(rule.rule.inputs, args))
    return f"{shown}: lhs {_show(left)}, rhs {_show(right)}"


def _random(t: Any, rng: np.random.Generator, negative: bool) -> np.ndarray:
    assert isinstance(t, TensorType)
    from dlc.dtypes import numpy_dtype

    values = rng.integers(-3, 4, size=t.dims)
    if negative:
        values = -np.abs(values)
    return np.asarray(values, dtype=numpy_dtype(t.dt))


def _same(a: object, b: object) -> bool:
    if isinstance(a, tuple | list):
        return isinstance(b, tuple | list) and len(a) == len(b) and all(map(_same, a, b))
    x, y = np.asarray(a), np.asarray(b)
    return x.shape == y.shape and np.allclose(x, y, rtol=1e-6, atol=1e-6, equal_nan=True)


def _show(value: object) -> str:
    if isinstance(value, tuple | list):
        return "(" + ", ".join(_show(v) for v in value) + ")"
    array = np.asarray(value)
    text = np.array2string(array, separator=", ", threshold=64)
    return " ".join(text.split())


def user_library(path: str) -> tuple[list[Rule], int]:
    """The proven rules of the rule file `path` (status `proven`) and how many others
    it has; proved once per process and version of the file. An unreadable or malformed
    file is a `DiagnosticError`."""
    import os

    try:
        st = os.stat(path)
    except OSError as e:
        raise DiagnosticError(f"cannot read rule file '{path}': {e.strerror or e}") from None
    return _user_library(path, st.st_size, st.st_mtime_ns)


@cache
def _user_library(path: str, size: int, mtime: int) -> tuple[list[Rule], int]:
    from dataclasses import replace

    from dlc.parser import parse_module

    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as e:
        raise DiagnosticError(f"cannot read rule file '{path}': {e.strerror or e}") from None
    module = parse_module(text, path)
    proven: list[Rule] = []
    rules = read_rules(module, path)
    for rule in rules:
        if check(rule, module).status == "proven":
            proven.append(replace(rule.rule, status="proven"))
    return proven, len(rules) - len(proven)
