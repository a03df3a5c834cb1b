"""`dlc-run`: compile a `.dl` file, run one function on given or random inputs, print the outputs.

    dlc-run examples/mlp.dl --entry mlp --random-inputs --seed 0 --time
    dlc-run model.dl --entry f --input x=x.npy --input w=w.npy
    dlc-run model.dl --allow-extern libm --allow-extern my_fn

Inputs are named by their entry-block parameter (`x` or `%x`) or their position (`0`).
Random inputs are made in the parameter's dtype: floats standard normal, integers
uniform in [-10, 10], bools fair coins; `--seed` takes any int, mod 2**64 like
`CompiledModule.seed` (so -1 is 2**64 - 1), and an input, or all of them together,
above `MAX_RANDOM_INPUT_BYTES` (`run_io.py`) is refused. `--entry` also finds the functions that
differentiation defines (`[adjoint ...]` declarations and the `@g_grad` they
synthesize). `[extern]` C functions run only when named with `--allow-extern NAME`
(repeatable; `libm` is the preset of libm's scalar math functions): an allowed extern
runs native code with this process's rights. Every user error is one diagnostic on
stderr and exit code 1.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np

from dlc.cli.run_io import RunError, build_inputs, load_npy, print_outputs
from dlc.cli.run_profile import check_profile_path, report
from dlc.diagnostics import DiagnosticError, Location, location_in

_MIN_CALLS = 7
_MAX_CALLS = 10_000
_TIME_BUDGET_S = 0.25


class ArgumentParser(argparse.ArgumentParser):
    """argparse that raises `RunError` instead of printing the usage and exiting (also
    dlc-compile's)."""

    def error(self, message: str) -> NoReturn:
        raise RunError(message)


def _argument_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="dlc-run", description=__doc__.splitlines()[0])
    parser.add_argument("file", help="a .dl file or an ONNX model (.onnx)")
    parser.add_argument("--entry", "-e", help="function to run (default: the only defined one)")
    parser.add_argument(
        "--input",
        "-i",
        action="append",
        default=[],
        metavar="NAME=PATH.npy",
        help="an input from a .npy file",
    )
    parser.add_argument(
        "--constant",
        "-c",
        action="append",
        default=[],
        metavar="NAME=PATH.npy",
        help="bind parameter NAME to a .npy file's array at compile time (a weight): the "
        "function then takes the other parameters (an ONNX model: a graph input made a "
        "constant)",
    )
    parser.add_argument(
        "--random-inputs", action="store_true", help="random values for inputs not given"
    )
    parser.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="NAME=1x3x224x224",
        help="the shape of an ONNX graph input with dynamic dimensions",
    )
    parser.add_argument(
        "--external-data-dir",
        metavar="DIR",
        help="the directory an ONNX model's external tensor data is read from (default: "
        "the model's own directory); locations must be plain paths below it, no symlinks",
    )
    add_custom_op_argument(parser)
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of --random-inputs (default 0; any int, taken mod 2**64)",
    )
    parser.add_argument("--time", action="store_true", help="print the median time per call")
    parser.add_argument(
        "--profile",
        metavar="OUT.json",
        help="time every kernel of the calls: a table, slowest first, and a Chrome trace",
    )
    parser.add_argument(
        "--stats", action="store_true", help="print the compile report (loop nests, buffers, arena)"
    )
    parser.add_argument(
        "--allow-extern",
        action="append",
        default=[],
        metavar="NAME",
        help="let the program call the [extern] C function NAME (repeatable; 'libm': "
        "libm's scalar math functions); it runs with this process's rights",
    )
    parser.add_argument(
        "--tuning-db",
        metavar="PATH",
        help="a tuning database (dlc-tune) whose schedules to use; each contraction "
        "without a record is a warning saying why",
    )
    parser.add_argument(
        "--opt-level", "-O", type=int, choices=range(4), default=2, help="opt level (3: superopt)"
    )
    return parser


def _defined_functions(module: Any) -> list[Any]:
    from dlc.dialects.graph import FuncOp

    return [op for op in module.ops if isinstance(op, FuncOp) and not op.is_declaration]


def choose_name(names: list[str], entry: str | None) -> str:
    """The function named `entry` (`f` or `@f`) among the defined `names`, or the only one."""
    if entry is None:
        if len(names) == 1:
            return names[0]
        listed = ", ".join(f"@{n}" for n in names) or "none"
        raise RunError(f"choose a function with --entry (defined functions: {listed})")
    wanted = entry.removeprefix("@")
    if wanted in names:
        return wanted
    raise RunError(
        f"no function @{wanted} is defined (defined functions: {', '.join('@' + n for n in names) or 'none'})"
    )


def choose_function(module: Any, entry: str | None) -> Any:
    """The function named `entry` (`f` or `@f`), else the module's entry (an ONNX
    model's graph, beside the functions of its custom operators), else the only
    defined function."""
    functions = {f.sym_name.data: f for f in _defined_functions(module)}
    default = module.attributes.get("dlc.entry")
    if entry is None and default is not None and default.data in functions:
        entry = default.data
    return functions[choose_name(list(functions), entry)]


def median_call_time(fn: Callable[..., Any], args: Sequence[Any]) -> tuple[float, int]:
    """Median wall time per call in seconds, over ≥ 7 calls (about 0.25 s of calls)."""
    fn(*args)  # warm-up
    times: list[float] = []
    budget_end = time.perf_counter() + _TIME_BUDGET_S
    while len(times) < _MIN_CALLS or (time.perf_counter() < budget_end and len(times) < _MAX_CALLS):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    import statistics  # imports random, fractions, decimal: only for --time

    return statistics.median(times), len(times)


_LOCATED = re.compile(r"(?P<file>.+?):(?P<line>\d+):(?P<column>\d+): (?P<message>.*)", re.S)


def runtime_diagnostic(error: Exception, path: str, text: bytes) -> DiagnosticError:
    """A run-time error of compiled code (`trap`, a bounds check, out of memory, whose
    messages start with `FILE:LINE:COL: `) as a located diagnostic with the source line."""
    found = _LOCATED.fullmatch(str(error))
    if found is None:
        return DiagnosticError(f"{type(error).__name__}: {error}", Location(path, 0, 0))
    source = text.decode("utf-8", errors="replace")
    line, column = int(found["line"]), int(found["column"])
    return DiagnosticError(found["message"], location_in(source, found["file"], line, column))


def _call(fn: Callable[..., Any], inputs: Sequence[Any], path: str, text: bytes) -> Any:
    from dlc.diagnostics import TrapError

    try:
        return fn(*inputs)
    except (TypeError, ValueError) as e:
        raise RunError(str(e)) from None
    except (TrapError, IndexError) as e:
        raise runtime_diagnostic(e, path, text) from None


def allowed_extern_names(names: list[str]) -> frozenset[str]:
    """The C symbols `--allow-extern` names (a bad name is a RunError)."""
    from dlc.externs import allowed_externs

    try:
        return allowed_externs(names, option="--allow-extern")
    except ValueError as e:
        raise RunError(str(e)) from None


def _quick(args: argparse.Namespace, externs: frozenset[str]) -> tuple[Any, bytes, float] | None:
    """The compiled module of a `.dl` file compiled before with these options, from its
    quick record (`dlc.warm`: no parsing), its text and the seconds it took;
    None to take the full path (which also reports every error)."""
    if args.file.endswith(".onnx") or args.input_shape or args.tuning_db is not None:
        return None
    if args.constant or args.profile is not None:
        return None
    from dlc.warm import compile_cached

    try:
        with open(args.file, "rb") as f:
            text = f.read()
    except OSError:
        return None
    start = time.perf_counter()
    compiled = compile_cached(
        text,
        args.file,
        externs,
        seed=0,
        num_threads=None,
        opt_level=args.opt_level,
        fuse=True,
        plan_memory=True,
        fast_math_functions=True,
        bounds_check=None,
        fma=None,
        target_cpu="host",
        tuning_db=None,
    )
    return None if compiled is None else (compiled, text, time.perf_counter() - start)


def run(argv: Sequence[str] | None) -> None:
    """Compile, build inputs, run, print (raises RunError / DiagnosticError)."""
    args = _argument_parser().parse_args(argv)
    if args.profile is not None:
        check_profile_path(args.profile)
    externs = allowed_extern_names(args.allow_extern)
    quick = _quick(args, externs)
    if quick is not None:
        compiled, text, compile_s = quick
        name = choose_name(list(compiled.functions), args.entry)
        func: Any = compiled[name].signature
        inputs = build_inputs(func, args.input, args.random_inputs, args.seed)
    else:
        constants = constant_arrays(args.constant)
        onnx = args.file.endswith(".onnx")
        module, text = parse_file(
            args.file,
            input_shapes(args.input_shape),
            constants if onnx else None,
            args.external_data_dir,
            custom_op_files(args.custom_op),
        )
        func = choose_function(module, args.entry)
        name = func.sym_name.data
        if constants and not onnx:
            from dlc.bind import bind_constants

            module = bind_constants(module, {name: constants})
            func = choose_function(module, name)
        inputs = build_inputs(func, args.input, args.random_inputs, args.seed)
        from dlc.api import compile_graph_module

        start = time.perf_counter()
        compiled = compile_graph_module(
            module,
            opt_level=args.opt_level,
            externs=externs,
            tuning_db=args.tuning_db,
            source=text or None,
            profile=args.profile is not None,
        )
        compile_s = time.perf_counter() - start
    fn = compiled[name]
    print_outputs(_call(fn, inputs, args.file, text), func)
    if args.stats:
        for key, value in compiled.stats(name).items():
            print(f"{key}: {value}")
    if args.time:
        per_call, calls = _call(lambda *xs: median_call_time(fn, xs), inputs, args.file, text)
        print(f"compile time: {compile_s * 1e3:.1f} ms")
        print(f"time per call: {per_call * 1e6:.2f} µs (median of {calls} calls)")
    if args.profile is not None:  # the first call trapped if any does
        report(compiled, fn, inputs, args.profile)


def input_shapes(specs: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """`--input-shape NAME=2x3` options as a mapping (a malformed one is a RunError)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        name, _, dims = spec.partition("=")
        try:
            shapes[name] = tuple(int(d) for d in dims.split("x")) if dims else ()
        except ValueError:
            raise RunError(f"--input-shape {spec}: expected NAME=DIMxDIMx...") from None
        if not name or any(d < 0 for d in shapes[name]):
            raise RunError(f"--input-shape {spec}: expected NAME=DIMxDIMx...")
    return shapes


def add_custom_op_argument(parser: argparse.ArgumentParser) -> None:
    """`--custom-op DOMAIN::OP=FILE.dl` (dlc-run's and dlc-compile's)."""
    parser.add_argument(
        "--custom-op",
        action="append",
        default=[],
        metavar="DOMAIN::OP=FILE.dl",
        help="import the ONNX operator DOMAIN::OP as a call of the function in FILE.dl "
        "(its @OP, or its only function); repeatable",
    )


def custom_op_files(specs: Sequence[str]) -> dict[tuple[str, str], str]:
    """`--custom-op DOMAIN::OP=FILE.dl` options: (domain, op) -> the file's DLVM text
    (a malformed option or an unreadable file is a RunError)."""
    mappings: dict[tuple[str, str], str] = {}
    for spec in specs:
        operator, sep, path = spec.partition("=")
        domain, colons, op = operator.rpartition("::")
        if not sep or not path or not colons or not op:
            raise RunError(f"--custom-op expects DOMAIN::OP=FILE.dl, got '{spec}'")
        if (domain, op) in mappings:
            raise RunError(f"--custom-op {operator}: given twice")
        try:
            with open(path, encoding="utf-8") as f:
                mappings[(domain, op)] = f.read()
        except (OSError, UnicodeDecodeError) as e:
            reason = getattr(e, "strerror", None) or e
            raise RunError(f"--custom-op {operator}: cannot read '{path}': {reason}") from None
    return mappings


def constant_arrays(specs: Sequence[str]) -> dict[str, np.ndarray]:
    """`--constant NAME=PATH.npy` options: parameter name -> array (a malformed option
    or an unreadable file is a RunError)."""
    arrays: dict[str, np.ndarray] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        name = name.removeprefix("%")
        if not sep or not path or not name:
            raise RunError(f"--constant expects NAME=PATH.npy, got '{spec}'")
        if name in arrays:
            raise RunError(f"--constant {name}: given twice")
        arrays[name] = load_npy(path, name, "--constant")
    return arrays


def parse_file(
    path: str,
    input_shapes: dict[str, tuple[int, ...]],
    constant_inputs: dict[str, np.ndarray] | None = None,
    external_data_dir: str | None = None,
    custom_ops: dict[tuple[str, str], str] | None = None,
    dynamic: bool = False,
) -> tuple[Any, bytes]:
    """The program of `path`, differentiated (so `--entry` finds the functions of
    `[adjoint ...]` declarations and the `@g_grad` they synthesize), and its text.
    An `.onnx` file is imported (its text is empty: diagnostics name nodes, not lines),
    with `constant_inputs` as constants and its external data read from
    `external_data_dir` (default: the model's directory), `custom_ops` and `dynamic`
    (see `dlc.onnx.load`)."""
    import dlc
    from dlc.passes.graph.differentiate import differentiated

    if path.endswith(".onnx"):
        import dlc.onnx

        module = dlc.onnx.load(
            path,
            input_shapes,
            constant_inputs=constant_inputs,
            external_data_dir=external_data_dir,
            custom_ops=custom_ops,
            dynamic=dynamic,
        )
        return module, b""
    given = {"--input-shape": input_shapes, "--custom-op": custom_ops, "--dynamic": dynamic}
    for flag in (flag for flag, value in given.items() if value):
        raise RunError(f"{flag} applies to ONNX models only")
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as e:
        raise RunError(f"cannot read '{path}': {e.strerror or e}") from None
    return differentiated(dlc.parse(text, path)), text


def main(argv: Sequence[str] | None = None) -> int:
    """Run dlc-run; return the exit code (0 ok, 1 user error, 2 internal error)."""
    from dlc.cli import guarded_main

    return guarded_main("dlc-run", lambda: run(argv), (RunError,), quiet=(BrokenPipeError,))


if __name__ == "__main__":
    sys.exit(main())
