"""dlc: a multi-level deep-learning compiler for a DLVM-like IR, on xDSL and LLVM.

The public Python API is small:

>>> import dlc, numpy as np
>>> mod = dlc.compile('''
... module "m"
... stage raw
...
... func @axpy: (f32, <4 x f32>, <4 x f32>) -> <4 x f32> {
... 'entry(%a: f32, %x: <4 x f32>, %y: <4 x f32>):
...     %0.0 = multiply %a: f32, %x: <4 x f32>
...     %0.1 = add %0.0: <4 x f32>, %y: <4 x f32>
...     return %0.1: <4 x f32>
... }
... ''')
>>> mod.axpy(np.float32(2), np.ones(4, np.float32), np.arange(4, dtype=np.float32))
array([2., 3., 4., 5.], dtype=float32)

- `parse(text)` gives the verified graph-level module (an xDSL `ModuleOp`);
- `compile(text)` / `compile_file(path)` give a `CompiledModule` whose functions are
  called with NumPy arrays and whose `.ir(level)` shows the program at each level;
- `print_module(module)` prints a graph-level module in DLVM syntax;
- `view(module, kind, path)` draws it (`dlc-opt --view`): the graph level, or its
  fusion groups and schedules, as Graphviz DOT, SVG or self-contained HTML.

`[extern]` C functions are a capability, off by default: `compile(text,
externs=["libm", "my_fn"])` names the C symbols a program may call (`"libm"` is the
preset of libm's scalar math functions, `dlc.externs.LIBM`). An allowed extern runs
with this process's rights: allowing externs to untrusted IR is running untrusted code.

Every user error (bad syntax, a type error, an unsupported feature, a missing file)
raises `DiagnosticError`, which carries `.filename`, `.line`, `.column` and `.message`
and prints as `FILE:LINE:COL: error: MESSAGE` with the source line and a caret.
Compiled functions take their arguments positionally or by the DLVM parameter names
(`mod.axpy(a=2.0, x=x, y=y)`); calling one wrongly raises `TypeError` / `ValueError`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dlc.diagnostics import DiagnosticError, Location, TrapError
from dlc.version import __version__ as __version__  # re-exported

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from dlc.externs import ExternsOption
    from dlc.runtime.module import CompiledModule
    from dlc.tuner.report import TuneReport

__all__ = [
    "DiagnosticError",
    "TrapError",
    "compile",
    "compile_file",
    "compile_onnx",
    "load_plugin",
    "parse",
    "print_module",
    "tune",
    "view",
]


def _check_text(text: object, what: str) -> str | bytes:
    if not isinstance(text, str | bytes):
        raise TypeError(
            f"{what}: expected the program text as str or bytes, got {type(text).__name__}"
        )
    return text


def _check_opt_level(opt_level: object) -> int:
    if isinstance(opt_level, bool) or not isinstance(opt_level, int):
        raise TypeError(f"opt_level must be an int in 0..3, got {type(opt_level).__name__}")
    if not 0 <= opt_level <= 3:
        raise ValueError(f"opt_level must be in 0..3, got {opt_level}")
    return opt_level


def parse(text: str | bytes, filename: str = "<string>") -> ModuleOp:
    """Parse DLVM text into a verified graph-level module; raise `DiagnosticError`."""
    from dlc.parser import parse_module

    return parse_module(_check_text(text, "parse"), filename)


def print_module(module: ModuleOp) -> str:
    """The DLVM text of a graph-level module (re-parses to an equal module)."""
    from xdsl.dialects.builtin import ModuleOp

    from dlc.parser import print_module as _print_module

    if not isinstance(module, ModuleOp):
        raise TypeError(f"print_module: expected a ModuleOp, got {type(module).__name__}")
    return _print_module(module)


def compile(
    text: str | bytes,
    *,
    opt_level: int = 2,
    filename: str = "<string>",
    bounds_check: bool | None = None,
    seed: int = 0,
    fuse: bool = True,
    plan_memory: bool = True,
    fast_math_functions: bool = True,
    externs: ExternsOption = None,
    fma: bool | None = None,
    target_cpu: str = "host",
    num_threads: int | None = None,
    tuning_db: str | os.PathLike[str] | None = None,
    constants: Mapping[str, Mapping[str, Any]] | None = None,
    budget: Any = None,
    rules: str | os.PathLike[str] | None = None,
    extra_passes: Mapping[str, Any] | None = None,
    profile: bool = False,
) -> CompiledModule:
    """Parse, verify, differentiate, lower and JIT-compile DLVM text; the compiled
    functions are called with NumPy arrays.

    - `opt_level` (0..3): the optimization level; fusion needs at least 1, and 3 adds
      the graph superoptimizer (LLVM's pass pipeline runs at its O2 for both 2 and 3:
      `dlc.runtime.jit.LLVM_PIPELINE_LEVEL`). At 2 and 3 float sums over a contiguous
      axis use vectorized partial sums, so they differ from levels 0 and 1 in the last
      bits, within the bound docs/design/numerics.md states.
    - `bounds_check=True` guards every generated load and store: a violation raises
      IndexError("FILE:LINE:COL: out-of-bounds ...") from the call (None: the
      environment variable DLC_BOUNDS_CHECK=1).
    - `seed` seeds the `random` generator (any int, taken mod 2**64; reseed with
      `mod.seed(n)`).
    - `fuse`, `plan_memory`: the tensor-level fusion and loop-level arena planning.
    - `fast_math_functions`: f32 exp/log/tanh/erf as vectorizable polynomials (≤ 2, 2,
      5 and 2 ULP); False keeps exact libm calls.
    - `fma`: float sums (`dot`, `convolve`, `reduce by add`) fuse their multiply-adds
      (one rounding per step instead of two; within the K·ε bound of the reference for
      a length-K sum). None: on at opt_level >= 2; False keeps results bit-identical to
      the reference interpreter.
    - `target_cpu`: the LLVM CPU model to compile for (`"host"`, or an older model this
      machine can run, such as `"haswell"` or `"x86-64-v3"`): schedules and instructions
      follow it.
    - `num_threads`: threads for parallel loops (None: `DLC_NUM_THREADS`, else the
      cores this process may use), through the OpenMP runtime (libgomp); results are
      the same for any count.
    - `tuning_db`: a tuning database written by `dlc-tune` / `dlc.tune` (JSON lines):
      each nest with a record for this CPU runs the record's schedule; each contraction
      without one is a `TuningWarning` naming the nest and why (no record, another
      target or dlc version, a record that does not fit). Corrupt lines are a warning,
      never an error.
    - `rules`: a DLVM rule file (`@NAME_lhs` / `@NAME_rhs` pairs, see `dlc-prove`): at
      opt_level 3 the superoptimizer applies the rules of it that are proven, besides
      its own; unproven ones never (the pass statistics name each rule that fired).
    - `extra_passes`: passes of loaded plugins to run after a level's own passes,
      `{"graph": ["my-pass", "other{opt=1}"], "tensor": [...], "loop": [...]}` (load a
      plugin file with `dlc.load_plugin(path)`; installed plugins' `dlc.passes` entry
      points are found by themselves). Such compiles bypass the compile cache.
    - `constants`: parameters bound to arrays at compile time, by function and
      parameter name (`{"attention": {"wq": wq, "wk": wk}}`): the compiled function
      takes the other parameters only, and the optimizer treats the bound ones as
      constants (folds what is computed from them alone; at opt_level 3 merges
      products over them). Each array must have the parameter's dtype and shape
      (`dlc.bind`); an unknown name is a `DiagnosticError`.
    - `externs`: the `[extern]` C functions the program may call. None (the default)
      allows none; `"libm"` allows libm's scalar math functions (`dlc.externs.LIBM`);
      an iterable names C symbols and presets (`["libm", "my_fn"]`). Calling or
      referencing any other extern is a `DiagnosticError` at its declaration, before
      anything is compiled or looked up. An allowed extern runs native code with this
      process's rights: never allow externs to IR you do not trust.
    - `profile`: time every kernel (loop nest, with its parallel regions) of every
      call: `mod.profile()` then gives each kernel's time, source lines, FLOPs, bytes
      and roofline verdict as a table or a Chrome trace (`dlc.runtime.profile`). The
      marks cost two clock reads per kernel; without `profile` the code has none.
      Such compiles bypass the compile cache.
    - `budget`: a `dlc.budget.ModuleBudget` (functions, instructions, call nesting) a
      compile takes on; beyond it a located `DiagnosticError` (default: its defaults).

    Object code is cached in memory and on disk (`DLC_CACHE_DIR`, `DLC_CACHE=0` to turn
    it off): compiling the same program with the same options again is fast. Every call
    returns an independent module (its own globals, arenas and random state)."""
    from dlc import warm
    from dlc.externs import allowed_externs

    level = _check_opt_level(opt_level)
    allowed = allowed_externs(externs)
    settings: dict[str, Any] = {
        "opt_level": level,
        "fuse": fuse,
        "plan_memory": plan_memory,
        "fast_math_functions": fast_math_functions,
        "bounds_check": bounds_check,
        "fma": fma,
        "target_cpu": target_cpu,
        "tuning_db": tuning_db,
        "rules": rules,
        "seed": seed,
        "num_threads": num_threads,
    }
    compiled = None
    quick = constants is None and budget is None and extra_passes is None and not profile
    if isinstance(text, str | bytes) and isinstance(filename, str) and quick:
        compiled = warm.compile_cached(text, filename, allowed, **settings)
    if compiled is not None:  # compiled before: from the cache, without parsing
        return compiled
    from dlc.api import compile_graph_module

    module = parse(text, filename)
    return compile_graph_module(
        module,
        externs=allowed,
        source=text,
        constants=constants,
        budget=budget,
        extra_passes=extra_passes,
        profile=profile,
        **settings,
    )


def compile_file(path: str | os.PathLike[str], **options: Any) -> CompiledModule:
    """`compile` the contents of a `.dl` file, with `compile`'s keyword options; an
    unreadable file is a `DiagnosticError`."""
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"compile_file: expected a path, got {type(path).__name__}")
    if "filename" in options:
        raise TypeError("compile_file: the file name is the path")
    filename = os.fspath(path)
    try:
        with open(filename, "rb") as f:
            data = f.read()
    except OSError as e:
        reason = e.strerror or str(e)
        raise DiagnosticError(
            f"cannot read '{filename}': {reason}", Location(filename, 0, 0)
        ) from None
    return compile(data, filename=filename, **options)


def compile_onnx(
    path_or_model: object,
    *,
    input_shapes: dict[str, tuple[int, ...]] | None = None,
    external_data_dir: str | os.PathLike[str] | None = None,
    limits: Any = None,
    custom_ops: Any = None,
    dynamic: bool = False,
    **options: Any,
) -> CompiledModule:
    """Import an ONNX model (an `onnx.ModelProto`, bytes or a file path; needs the `onnx`
    extra) and compile it with `compile`'s keyword options. External tensor data is
    read only from `external_data_dir` (default: a model file's own directory; bytes
    and protos refuse external data without it); `limits` (a `dlc.onnx.ImportLimits`)
    bounds the sizes a node may make at import time; `custom_ops` maps operators dlc
    does not know, (domain, op_type) -> DLVM text or a function returning it (see
    `dlc.onnx.load`; their `[extern]` C functions need `externs=`). The compiled module has
    one function named after the graph, called with NumPy arrays in graph-input order
    or by input name; `input_shapes` fixes dynamic input dimensions. With `dynamic`,
    input dimensions named by a `dim_param` (and not fixed by `input_shapes`) stay
    symbolic: one compile serves every size (models in the symbolic subset, such as
    an MLP with a symbolic batch: docs/reference/dynamic-shapes.md). An unsupported
    model raises `dlc.onnx.OnnxImportError` (a `DiagnosticError`) naming every
    unsupported node at once."""
    from dlc.api import compile_graph_module
    from dlc.onnx import load

    if "filename" in options:
        raise TypeError("compile_onnx: the file name is the model's path")
    if "opt_level" in options:
        options["opt_level"] = _check_opt_level(options["opt_level"])
    module = load(
        path_or_model,
        input_shapes,
        external_data_dir=external_data_dir,
        limits=limits,
        custom_ops=custom_ops,
        dynamic=dynamic,
    )
    return compile_graph_module(module, **options)


def view(
    module: ModuleOp,
    kind: str = "graph",
    path: str | os.PathLike[str] | None = None,
    *,
    opt_level: int = 2,
) -> str:
    """Draw a graph-level module (from `parse` or `dlc.onnx.load`), as `dlc-opt --view`.

    `kind` is "graph" (each instruction with its result type) or "fused" (a copy lowered
    to the tensor level with `opt_level`'s passes: fusion groups as frames with their
    schedules). Repeated blocks (transformer layers, ResNet blocks) are drawn once in a
    "×N" frame. Returns the drawing: Graphviz DOT, or with `path` the text written
    there in the format its name asks for (`.dot`, `.svg` via Graphviz's `dot`,
    self-contained `.html`). A wrong kind, format or level is a `ValueError`."""
    from xdsl.dialects.builtin import ModuleOp

    from dlc.viewer import format_of, render

    if not isinstance(module, ModuleOp):
        raise TypeError(f"view: expected a ModuleOp, got {type(module).__name__}")
    target = None if path is None else os.fspath(path)
    text = render(
        module,
        kind,
        format_of(target),
        opt_level=_check_opt_level(opt_level),
        title=os.path.basename(target) if target else "dlc",
    )
    if target is not None:
        with open(target, "w", encoding="utf-8") as f:
            f.write(text)
    return text


def __getattr__(name: str) -> Any:
    """`dlc.onnx` without `import dlc.onnx` (imported on first use: it needs `onnx`)."""
    if name == "onnx":
        import importlib

        return importlib.import_module("dlc.onnx")
    raise AttributeError(f"module 'dlc' has no attribute '{name}'")


def load_plugin(path: str | os.PathLike[str]) -> Any:
    """Load a pass/dialect plugin file (a Python file defining xDSL `ModulePass`
    subclasses with a `name`, or `Dialect`s): its passes can then run in
    `compile(..., extra_passes={"graph": ["my-pass"]})` and `dlc-opt -p`. Loading runs the
    file's code with this process's rights. Returns a `dlc.plugins.Plugin` (`.passes`,
    `.dialects`); a file that fails to import, defines nothing or clashes with a built-in
    name raises `dlc.plugins.PluginError`."""
    from dlc.plugins import load_plugin as load

    return load(path)


def tune(path: str | os.PathLike[str], **options: Any) -> TuneReport:
    """Tune the schedules of the contractions of a `.dl` file's function on this
    machine and append the measured records to a tuning database (`dlc-tune`; needs
    the `tune` extra). Keywords: `entry`, `trials` (per nest, default 64), `db`
    (default "tune.jsonl"), `search` ("model", "random" or "both"), `cluster` (None,
    "local:N" or a Dask scheduler address), `plot` (a PNG path), `seed`, `batch`,
    `timeout`, `budget`, `progress`. Returns a report (`.table()`, `.nests`); apply the
    records with `compile(..., tuning_db=db)`. See `dlc.tuner.tune`."""
    from dlc.tuner import tune as _tune

    return _tune(path, **options)
