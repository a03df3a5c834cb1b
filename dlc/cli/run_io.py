"""dlc-run's inputs and outputs: one array per parameter from `--input NAME=PATH.npy` or
`--random-inputs` (`build_inputs`, at most `MAX_RANDOM_INPUT_BYTES`), and the printed
outputs (`print_outputs`); `RunError` is its user errors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dlc.dtypes import NATIVE_DTYPES, numpy_dtype
from dlc.runtime.signature import FuncSig, TensorSig, TupleSig, format_sig

MAX_RANDOM_INPUT_BYTES = 1 << 31
"""The most `--random-inputs` makes, per input and in all (2 GiB); larger ones come from
--input files."""


class RunError(Exception):
    """A user error of dlc-run: printed as `dlc-run: error: ...`, exit 1."""


def param_names(func: Any) -> list[str]:
    if isinstance(func, FuncSig):
        return list(func.params)
    entry = func.entry
    if entry is None:
        return []
    return [arg._name or str(i) for i, arg in enumerate(entry.args)]  # noqa: SLF001 -- DLVM names


def _arg_types(func: Any) -> list[Any]:
    return list(func.args) if isinstance(func, FuncSig) else list(func.function_type.args)


def format_param(t: Any) -> str:
    if isinstance(t, TensorSig | TupleSig):
        return format_sig(t)
    from dlc.dialects.graph_types import format_type

    return format_type(t)


def _parse_input_specs(specs: Sequence[str], names: list[str]) -> dict[int, str]:
    """`NAME=PATH` options -> parameter index -> path."""
    chosen: dict[int, str] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not path:
            raise RunError(f"--input expects NAME=PATH.npy, got '{spec}'")
        name = name.removeprefix("%")
        if name in names:
            index = names.index(name)
        elif name.isdigit() and int(name) < len(names):
            index = int(name)
        else:
            raise RunError(
                f"--input {name}: no such parameter (parameters: {', '.join('%' + n for n in names)})"
            )
        chosen[index] = path
    return chosen


def _tensor_param(t: Any, name: str) -> tuple[tuple[int, ...], Any]:
    if isinstance(t, TensorSig):
        return t.dims, numpy_dtype(t.dt)
    from dlc.dialects.graph_types import TensorType

    if not isinstance(t, TensorType):
        raise RunError(f"parameter %{name} has type {format_param(t)}; dlc-run passes tensors only")
    if t.dt not in NATIVE_DTYPES:
        raise RunError(f"parameter %{name}: {t.dt} tensors are not supported by dlc-run")
    return t.dims, numpy_dtype(t.dt)


def _check_random_size(t: Any, name: str, shape: tuple[int, ...], dtype: Any) -> int:
    """The bytes of parameter `name`'s random input, refused above the limit (and for
    a symbolic dimension: its size is the caller's to choose)."""
    symbol = next((d for d in shape if isinstance(d, str)), None)
    if symbol is not None:
        raise RunError(
            f"--random-inputs: parameter %{name} ({format_param(t)}) has the symbolic "
            f"dimension %{symbol}; give it with --input {name}=PATH.npy"
        )
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    if nbytes > MAX_RANDOM_INPUT_BYTES:
        raise RunError(
            f"--random-inputs: parameter %{name} ({format_param(t)}) takes {nbytes} bytes, "
            f"more than the limit of {MAX_RANDOM_INPUT_BYTES}; give it with --input {name}=PATH.npy"
        )
    return nbytes


def load_npy(path: str, name: str, option: str = "--input") -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise RunError(f"{option} {name}: cannot load '{path}': {e}") from None


def random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Standard normal floats, integers in [-10, 10], fair-coin bools, made in `dtype`
    (f16 through f32: NumPy draws normals in f32 and f64 only)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f" and dtype.itemsize < 4:
        return rng.standard_normal(shape, dtype=np.float32).astype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(shape, dtype=dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape, dtype=np.bool_)
    return rng.integers(-10, 11, size=shape, dtype=dtype)


def build_inputs(
    func: Any, specs: Sequence[str], random_inputs: bool, seed: int
) -> list[np.ndarray]:
    """One array per parameter, from --input files or, with --random-inputs, random."""
    names = param_names(func)
    from_files = _parse_input_specs(specs, names)
    rng = np.random.default_rng(seed % (1 << 64))  # default_rng refuses negative seeds
    params = [
        (name, t, *_tensor_param(t, name)) for name, t in zip(names, _arg_types(func), strict=True)
    ]
    if random_inputs:  # all sizes first: nothing is drawn for a program that asks too much
        total = sum(
            _check_random_size(t, name, shape, dtype)
            for index, (name, t, shape, dtype) in enumerate(params)
            if index not in from_files
        )
        if total > MAX_RANDOM_INPUT_BYTES:
            raise RunError(
                f"--random-inputs: the random inputs take {total} bytes together, more than "
                f"the limit of {MAX_RANDOM_INPUT_BYTES}; give some with --input NAME=PATH.npy"
            )
    inputs: list[np.ndarray] = []
    for index, (name, _, shape, dtype) in enumerate(params):
        if index in from_files:
            inputs.append(load_npy(from_files[index], name))
        elif random_inputs:
            inputs.append(random_array(rng, shape, dtype))
        else:
            raise RunError(
                f"no value for parameter %{name}: give --input {name}=PATH.npy or --random-inputs"
            )
    return inputs


def _outputs(result: Any) -> list[Any]:
    if result is None:
        return []
    if isinstance(result, tuple | list):
        return list(result)
    return [result]


def _output_types(func: Any) -> list[str]:
    if isinstance(func, FuncSig):
        out = func.output
        return [format_param(t) for t in (out.types if isinstance(out, TupleSig) else (out,))]
    from dlc.dialects.graph_types import TupleType

    out = func.function_type.output
    types = out.types if isinstance(out, TupleType) else (out,)
    return [format_param(t) for t in types]


def print_outputs(result: Any, func: Any) -> None:
    outputs = _outputs(result)
    types = _output_types(func)
    if not outputs:
        print("(no outputs)")
    for i, value in enumerate(outputs):
        header = f"output {i}" + (
            f": {types[i]}" if i < len(types) and len(types) == len(outputs) else ""
        )
        print(header)
        print(repr(value))
