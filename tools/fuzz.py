"""Differential random-program tester: compiled code against the reference interpreter.

    python tools/fuzz.py --seed 0 --count 200 [--size 12] [--out DIR] [--variants a,b]

For each seed, tools/fuzz_gen.py generates a random well-typed DLVM program (helpers,
`apply`, a `conditional`, tuple results, `[adjoint …]` declarations). The checker parses
it, differentiates it, runs every defined function in the reference interpreter on random
inputs, then compiles it in several configurations (VARIANTS, plus the graph pipeline
canonicalize,fold-constants,cse,dce before compiling and before the reference) and compares
each result leaf (f32/f64: |got - want| ≤ 1e-4·max(1, max|want|) + 1e-3·|want| where the
reference is finite; ints and bools: exact). A mismatch or crash is shrunk (delete
instructions, replace values by new arguments, drop outputs/adjoints/helpers/branches while
the same failure persists) and the reproducer is written to DIR. Exit status 1 on any finding.
A `DiagnosticError` (an unsupported feature) skips that configuration and is counted.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz_gen import Func, Inst, Program, Value, generate  # noqa: E402

VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "nofuse": {"fuse": False},
    "noplan": {"plan_memory": False},
    "O0": {"opt_level": 0},
    "nofastmath": {"fast_math_functions": False},
}
PIPELINE = ("canonicalize", "fold-constants", "cse", "dce")
ALL_VARIANTS = (*VARIANTS, "passes", "passes-ref")
RTOL, ATOL = 1e-3, 1e-4
NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "bool": np.bool_}


@dataclass
class Finding:
    """One failure: `kind` is mismatch / *-crash / parse-error; `variant` the configuration."""

    kind: str
    variant: str
    func: str
    detail: str
    error: float = 0.0

    def key(self) -> tuple[str, str]:
        return (self.kind, self.variant)

    def line(self) -> str:
        err = f" max error {self.error:.3g}" if self.kind == "mismatch" else ""
        return f"{self.kind} [{self.variant}] @{self.func}:{err} {self.detail}"


@dataclass
class Outcome:
    findings: list[Finding]
    skipped: list[str]  # DiagnosticErrors (unsupported features), one line each


# ---------------------------------------------------------------------------------------
# Running one program
# ---------------------------------------------------------------------------------------


def takes_tensors(func: Any) -> bool:
    from dlc.dialects.graph_types import TensorType

    return all(isinstance(a.type, TensorType) for a in func.body.blocks[0].args)


def random_inputs(func: Any, rng: np.random.Generator) -> list[np.ndarray]:
    """Inputs for a graph.func from its entry block's argument types."""
    out = []
    for arg in func.body.blocks[0].args:
        t = arg.type
        shape, dt = tuple(t.dims), t.dt
        if dt.startswith("f"):
            out.append(np.asarray(rng.standard_normal(shape) * 1.5, dtype=NP[dt]))
        elif dt == "bool":
            out.append(np.asarray(rng.random(shape) < 0.5))
        else:
            out.append(np.asarray(rng.integers(-6, 7, size=shape), dtype=NP[dt]))
    return out


def leaves(value: Any) -> list[np.ndarray]:
    out, stack = [], [value]
    while stack:
        v = stack.pop()
        if isinstance(v, tuple | list):
            stack.extend(reversed(v))
        elif v is not None:
            out.append(np.asarray(v))
    return out


def compare(got: Any, want: Any) -> tuple[bool, float, str]:
    """(ok, max error relative to the tolerance, description)."""
    g, w = leaves(got), leaves(want)
    if len(g) != len(w):
        return False, float("inf"), f"{len(g)} results, expected {len(w)}"
    worst, where = 0.0, ""
    for i, (a, b) in enumerate(zip(g, w, strict=True)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False, float("inf"), f"result {i}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
        if b.dtype.kind != "f":
            bad = int(np.sum(a != b))
            if bad:
                return False, float("inf"), f"result {i}: {bad} elements differ"
            continue
        fin = np.isfinite(b)
        if not fin.any():
            continue
        a64, b64 = a.astype(np.float64)[fin], b.astype(np.float64)[fin]
        scale = max(1.0, float(np.max(np.abs(b64))))
        tol = ATOL * scale + RTOL * np.abs(b64)
        err = np.abs(a64 - b64)
        err = np.where(np.isfinite(a64), err, np.inf)
        ratio = float(np.max(err / tol))
        if ratio > worst:
            k = int(np.argmax(err / tol))
            worst, where = ratio, f"result {i}: got {a64[k]!r}, want {b64[k]!r}"
    return worst <= 1.0, worst, where


def first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:300]


def crash_line(err: BaseException) -> str:
    tb = traceback.extract_tb(err.__traceback__)
    at = next(
        (f"{Path(f.filename).name}:{f.lineno}" for f in reversed(tb) if "/dlc/" in f.filename), "?"
    )
    return f"{first_line(err)} (at {at})"


def apply_pipeline(module: Any) -> None:
    from dlc.pipeline import get_all_passes

    for name in PIPELINE:
        get_all_passes()[name]()().apply(None, module)


def defined_functions(module: Any) -> list[Any]:
    from dlc.dialects.graph import FuncOp

    return [
        f
        for f in module.body.block.ops
        if isinstance(f, FuncOp) and not f.is_declaration and f.body.blocks
    ]


class Checker:
    """Checks one program text in the chosen variants."""

    def __init__(self, text: str, seed: int, variants: tuple[str, ...]):
        self.text, self.seed, self.variants = text, seed, variants
        self.findings: list[Finding] = []
        self.skipped: list[str] = []

    def run(self) -> Outcome:
        import dlc
        from dlc.diagnostics import DiagnosticError
        from dlc.passes.graph.differentiate import differentiated

        try:
            module = dlc.parse(self.text, f"fuzz{self.seed}.dl")
        except Exception as err:  # a generator or parser bug
            self.findings.append(Finding("parse-error", "parse", "-", crash_line(err)))
            return Outcome(self.findings, self.skipped)
        try:
            dmodule = differentiated(module)
        except DiagnosticError as err:
            self.skipped.append("differentiate: " + first_line(err))
            return Outcome(self.findings, self.skipped)
        except Exception as err:
            self.findings.append(Finding("ad-crash", "differentiate", "-", crash_line(err)))
            return Outcome(self.findings, self.skipped)
        rng = np.random.default_rng(self.seed)
        funcs = defined_functions(dmodule)
        # Functions taking non-tensors (the tapes of synthesized adjoints) run through
        # their callers only: a random tape is no tape the forward run could make.
        inputs = {f.sym_name.data: random_inputs(f, rng) for f in funcs if takes_tensors(f)}
        want = self.reference(dmodule, inputs, "reference")
        if not want:
            return Outcome(self.findings, self.skipped)
        for variant in self.variants:
            if variant in VARIANTS:
                self.compiled(module, inputs, want, variant, VARIANTS[variant])
            elif variant in ("passes", "passes-ref"):
                self.pipeline(inputs, want, variant)
        return Outcome(self.findings, self.skipped)

    def reference(self, module: Any, inputs: dict, variant: str) -> dict[str, Any]:
        from dlc.diagnostics import DiagnosticError
        from dlc.semantics.interpreter import run_function

        out = {}
        for name, args in inputs.items():
            try:
                out[name] = run_function(module, name, [a.copy() for a in args])
            except DiagnosticError as err:
                self.skipped.append(f"{variant} @{name}: {first_line(err)}")
            except Exception as err:
                self.findings.append(Finding("reference-crash", variant, name, crash_line(err)))
        return out

    def pipeline(self, inputs: dict, want: dict, variant: str) -> None:
        import dlc
        from dlc.diagnostics import DiagnosticError
        from dlc.passes.graph.differentiate import differentiated

        module = dlc.parse(self.text, f"fuzz{self.seed}.dl")
        try:
            apply_pipeline(module)
            module.verify()
        except DiagnosticError as err:
            self.skipped.append(f"{variant}: {first_line(err)}")
            return
        except Exception as err:
            self.findings.append(Finding("pass-crash", variant, "-", crash_line(err)))
            return
        if variant == "passes":
            self.compiled(module, inputs, want, variant, {})
            return
        try:
            got = self.reference(differentiated(module), inputs, variant)
        except DiagnosticError as err:
            self.skipped.append(f"{variant}: {first_line(err)}")
            return
        except Exception as err:
            self.findings.append(Finding("ad-crash", variant, "-", crash_line(err)))
            return
        self.compare_all(got, want, variant)

    def compiled(self, module: Any, inputs: dict, want: dict, variant: str, options: dict) -> None:
        from dlc.api import compile_graph_module
        from dlc.diagnostics import DiagnosticError

        try:
            mod = compile_graph_module(module, **options)
        except DiagnosticError as err:
            self.skipped.append(f"{variant}: {first_line(err)}")
            return
        except Exception as err:
            self.findings.append(Finding("compile-crash", variant, "-", crash_line(err)))
            return
        got = {}
        for name in want:
            try:
                got[name] = mod[name](*[a.copy() for a in inputs[name]])
            except Exception as err:
                self.findings.append(Finding("run-crash", variant, name, crash_line(err)))
        self.compare_all(got, want, variant)

    def compare_all(self, got: dict, want: dict, variant: str) -> None:
        for name, value in got.items():
            ok, err, where = compare(value, want[name])
            if not ok:
                self.findings.append(Finding("mismatch", variant, name, where, err))


def check_text(text: str, seed: int, variants: tuple[str, ...] = ALL_VARIANTS) -> Outcome:
    """Run one program through the reference and every variant."""
    return Checker(text, seed, variants).run()


# ---------------------------------------------------------------------------------------
# Shrinking
# ---------------------------------------------------------------------------------------


def all_insts(func: Func) -> list[Inst]:
    return [i for b in func.blocks for i in [*b.insts, *([b.term] if b.term else [])]]


def uses(func: Func, v: Value) -> int:
    n = sum(o is v for i in all_insts(func) for o in i.operands)
    return n + sum(o is v for o in func.outputs)


def replace_uses(func: Func, old: Value, new: Value) -> None:
    for inst in all_insts(func):
        inst.operands = [new if o is old else o for o in inst.operands]
    func.outputs = [new if o is old else o for o in func.outputs]
    if func.adjoint is not None and func.adjoint.source is old:
        func.adjoint.source = new


def dce(prog: Program) -> None:
    for func in prog.funcs:
        changed = True
        while changed:
            changed = False
            for block in func.blocks:
                keep = [i for i in block.insts if i.result is None or uses(func, i.result)]
                changed |= len(keep) != len(block.insts)
                block.insts = keep


def edit_candidates(prog: Program) -> list[Callable[[Program], bool]]:
    """Edits to try, each a function mutating a deep copy (False: not applicable)."""
    edits: list[Callable[[Program], bool]] = []
    for fi, func in enumerate(prog.funcs):
        if func.adjoint is not None:
            edits.append(lambda p, fi=fi: drop_adjoint(p, fi))
        if len(prog.funcs) > 1 and not func.called and fi < len(prog.funcs) - 1:
            edits.append(lambda p, fi=fi: drop_func(p, fi))
        if len(func.blocks) > 1:
            edits.append(lambda p, fi=fi: flatten(p, fi))
        for k in range(len(func.outputs)):
            edits.append(lambda p, fi=fi, k=k: drop_output(p, fi, k))
        for bi, block in enumerate(func.blocks):
            for ii in reversed(range(len(block.insts))):
                edits.append(lambda p, fi=fi, bi=bi, ii=ii: replace_inst(p, fi, bi, ii))
        for ai in range(len(func.args)):
            edits.append(lambda p, fi=fi, ai=ai: drop_arg(p, fi, ai))
    return edits


def drop_adjoint(p: Program, fi: int) -> bool:
    p.funcs[fi].adjoint = None
    return True


def drop_func(p: Program, fi: int) -> bool:
    name = p.funcs[fi].name
    if any(f"@{name}(" in f.text() for f in p.funcs if f is not p.funcs[fi]):
        return False
    del p.funcs[fi]
    return True


def flatten(p: Program, fi: int) -> bool:
    """Replace the conditional by its `then` value: one block."""
    func = p.funcs[fi]
    entry, join = func.blocks[0], func.blocks[-1]
    if entry.term is None or not join.params:
        return False
    then_value = entry.term.operands[1] if len(entry.term.operands) > 1 else None
    if then_value is None:  # arms with their own instructions: take the first arm's result
        arm = func.blocks[1]
        entry.insts.extend(arm.insts)
        then_value = arm.term.operands[0] if arm.term else None
    if then_value is None:
        return False
    entry.insts.extend(join.insts)
    entry.term = None
    func.blocks = [entry]
    replace_uses(func, join.params[0], then_value)
    return True


def drop_output(p: Program, fi: int, k: int) -> bool:
    func = p.funcs[fi]
    if len(func.outputs) <= 1 or func.called:
        return False
    adj = func.adjoint
    if adj is not None and adj.source is func.outputs[k]:
        return False
    del func.outputs[k]
    if adj is not None:
        adj.keeping = [j - (j > k) for j in adj.keeping if j != k]
    return True


def replace_inst(p: Program, fi: int, bi: int, ii: int) -> bool:
    """Delete an instruction; its uses read a new argument (or an existing value)."""
    func = p.funcs[fi]
    inst = func.blocks[bi].insts[ii]
    r = inst.result
    if r is None:
        return False
    if not func.called:
        new = Value(f"s{len(func.args)}_{r.name}", r.shape, r.dt, r.bound, True)
        func.args.append(new)
    else:
        same = [a for a in func.args if a.shape == r.shape and a.dt == r.dt]
        if not same:
            return False
        new = same[0]
    del func.blocks[bi].insts[ii]
    replace_uses(func, r, new)
    return True


def drop_arg(p: Program, fi: int, ai: int) -> bool:
    func = p.funcs[fi]
    arg = func.args[ai]
    if func.called or uses(func, arg):
        return False
    del func.args[ai]
    if func.adjoint is not None and arg in func.adjoint.wrt:
        func.adjoint.wrt.remove(arg)
    return True


def shrink(prog: Program, seed: int, target: Finding, budget_s: float = 240.0) -> Program:
    """Greedy reduction of `prog` while a finding with `target.key()` persists."""
    variants = (target.variant,) if target.variant in ALL_VARIANTS else ()
    deadline = time.monotonic() + budget_s

    def still_fails(candidate: Program) -> bool:
        out = check_text(candidate.text(), seed, variants)
        return any(f.key() == target.key() for f in out.findings)

    best = copy.deepcopy(prog)
    progress = True
    while progress and time.monotonic() < deadline:
        progress = False
        for i in range(len(edit_candidates(best))):
            if time.monotonic() > deadline:
                break
            cand = copy.deepcopy(best)
            edits = edit_candidates(cand)
            if i >= len(edits) or not edits[i](cand):
                continue
            dce(cand)
            if still_fails(cand):
                best, progress = cand, True
                break
    return best


# ---------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------


def fuzz_one(seed: int, size: int, variants: tuple[str, ...]) -> tuple[Program, Outcome]:
    prog = generate(seed, size)
    return prog, check_text(prog.text(), seed, variants)


def write_reproducer(out: Path, seed: int, prog: Program, finding: Finding) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"seed{seed}_{finding.kind}_{finding.variant}.dl"
    header = f"// fuzz seed {seed}: {finding.line()}\n"
    path.write_text(header + prog.text())
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--size", type=int, default=12)
    ap.add_argument("--out", type=Path, default=Path("fuzz_findings"))
    ap.add_argument("--variants", default=",".join(ALL_VARIANTS))
    ap.add_argument("--no-shrink", action="store_true")
    args = ap.parse_args(argv)
    variants = tuple(v for v in args.variants.split(",") if v)
    skipped: Counter[str] = Counter()
    found = 0
    start = time.monotonic()
    for seed in range(args.seed, args.seed + args.count):
        prog, outcome = fuzz_one(seed, args.size, variants)
        skipped.update(s.split(":", 1)[-1].strip()[:100] for s in outcome.skipped)
        seen = set()
        for f in outcome.findings:
            if f.key() in seen:
                continue
            seen.add(f.key())
            found += 1
            small = prog if args.no_shrink else shrink(prog, seed, f)
            path = write_reproducer(args.out, seed, small, f)
            print(f"seed {seed}: {f.line()}\n    -> {path}", flush=True)
    took = time.monotonic() - start
    print(f"{args.count} programs, {found} findings, {took:.0f} s")
    for msg, n in skipped.most_common(10):
        print(f"  skipped {n}x: {msg}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
