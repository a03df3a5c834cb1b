"""Signatures of compiled functions as plain data: tensors and (nested) tuples of them.

The calling convention (`convention.py`) of a function whose parameters are tensors and
whose result is a tensor, a (nested) tuple of tensors or void needs only each tensor's
data type and shape. These classes carry exactly that, without xDSL, so that a module
loaded from the compile cache in a new process (`dlc.runtime.quick`) is callable
without importing the IR classes or parsing its program. `func_signature` makes one
from a graph-level function; `to_json` / `from_json` store one in the cache (the JSON
read back is checked field by field: nothing in it is trusted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from dlc.dtypes import NATIVE_DTYPES


@dataclass(frozen=True, slots=True)
class TensorSig:
    """A tensor of data type `dt` (one of `NATIVE_DTYPES`) and shape `dims`."""

    dt: str
    dims: tuple[int, ...]

    @property
    def num_elements(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n


@dataclass(frozen=True, slots=True)
class TupleSig:
    """A tuple of tensors and tuples; `TupleSig(())` is void."""

    types: tuple[Sig, ...]


Sig: TypeAlias = TensorSig | TupleSig


@dataclass(frozen=True, slots=True)
class FuncSig:
    """A function's name, parameter names (DLVM's, without `%`), parameter types and
    result type."""

    name: str
    params: tuple[str, ...]
    args: tuple[TensorSig, ...]
    output: Sig


def format_sig(t: Sig) -> str:
    """DLVM's spelling of `t` (`<2 x 3 x f32>`, `f32`, `(f32, <4 x i8>)`, `()`)."""
    if isinstance(t, TensorSig):
        return t.dt if not t.dims else "<" + " x ".join([*map(str, t.dims), t.dt]) + ">"
    out: list[str] = []
    stack: list[Sig | str] = [t]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, TensorSig):
            out.append(format_sig(item))
        else:
            parts: list[Sig | str] = ["("]
            for i, e in enumerate(item.types):
                parts.extend([", ", e] if i else [e])
            stack.extend(reversed([*parts, ")"]))
    return "".join(out)


def tensor_leaves(t: Sig) -> list[TensorSig]:
    """The tensors of `t` in order (depth first, left to right)."""
    leaves: list[TensorSig] = []
    stack: list[Sig] = [t]
    while stack:
        item = stack.pop()
        if isinstance(item, TupleSig):
            stack.extend(reversed(item.types))
        else:
            leaves.append(item)
    return leaves


def rebuild(t: Sig, leaves: Any) -> Any:
    """The value of `t` from an iterator of its leaves' values: one value for a tensor,
    (nested) Python tuples for tuples."""
    if isinstance(t, TensorSig):
        return next(leaves)
    root: list[Any] = []
    stack: list[tuple[Any, list[Any]]] = [(iter(t.types), root)]
    while stack:
        types, items = stack[-1]
        element = next(types, None)
        if element is None:
            stack.pop()
            if stack:
                stack[-1][1].append(tuple(items))
        elif isinstance(element, TupleSig):
            stack.append((iter(element.types), []))
        else:
            items.append(next(leaves))
    return tuple(root)


def func_signature(graph_func: Any) -> FuncSig | None:
    """The signature of graph-level function `graph_func` when its parameters are
    tensors and its result tensors or tuples of them, all of natively supported data
    types; None otherwise (structs, pointers, ...: `values.py` handles those)."""
    from dlc.dialects.graph_types import TensorType, TupleType

    def sig(t: Any) -> Sig | None:
        if isinstance(t, TensorType):
            return TensorSig(t.dt, tuple(t.dims)) if t.dt in NATIVE_DTYPES else None
        if not isinstance(t, TupleType):
            return None
        # Iterative (tuples may nest deeply): build bottom-up from a post-order walk.
        built: dict[int, Sig] = {}
        stack: list[tuple[Any, bool]] = [(t, False)]
        while stack:
            item, done = stack.pop()
            if isinstance(item, TensorType):
                if item.dt not in NATIVE_DTYPES:
                    return None
                built[id(item)] = TensorSig(item.dt, tuple(item.dims))
            elif not isinstance(item, TupleType):
                return None
            elif done:
                built[id(item)] = TupleSig(tuple(built[id(e)] for e in item.types))
            else:
                stack.append((item, True))
                stack.extend((e, False) for e in item.types)
        return built[id(t)]

    ftype = graph_func.function_type
    args = [a for a in map(sig, ftype.args) if isinstance(a, TensorSig)]
    output = sig(ftype.output)
    if output is None or len(args) != len(ftype.args):
        return None
    entry = graph_func.body.blocks.first
    names = entry.args if entry is not None else ()
    params = tuple(getattr(a, "_name", None) or str(i) for i, a in enumerate(names))
    if len(params) != len(args):
        return None
    return FuncSig(graph_func.sym_name.data, params, tuple(args), output)


def to_json(f: FuncSig) -> dict[str, Any]:
    """`f` as JSON-able data (`from_json` reads it back)."""

    def dump(t: Sig) -> Any:
        if isinstance(t, TensorSig):
            return [t.dt, list(t.dims)]
        return {"tuple": [dump(e) for e in t.types]}

    return {
        "name": f.name,
        "params": list(f.params),
        "args": [dump(a) for a in f.args],
        "output": dump(f.output),
    }


_MAX_DEPTH = 64  # tuples nested deeper are not read back (the full path handles them)


def _load(data: Any, depth: int = 0) -> Sig | None:
    if isinstance(data, list) and len(data) == 2:
        dt, dims = data
        if dt in NATIVE_DTYPES and isinstance(dims, list):
            if all(type(d) is int and d >= 0 for d in dims):
                return TensorSig(dt, tuple(dims))
        return None
    if isinstance(data, dict) and list(data) == ["tuple"] and depth < _MAX_DEPTH:
        items = data["tuple"]
        if not isinstance(items, list):
            return None
        loaded = [_load(e, depth + 1) for e in items]
        kids = [e for e in loaded if e is not None]
        if len(kids) != len(loaded):
            return None
        return TupleSig(tuple(kids))
    return None


def from_json(data: Any) -> FuncSig | None:
    """The signature `to_json` wrote, or None for anything malformed."""
    if not isinstance(data, dict) or set(data) != {"name", "params", "args", "output"}:
        return None
    name, params, args = data["name"], data["params"], data["args"]
    if not isinstance(name, str) or not isinstance(params, list) or not isinstance(args, list):
        return None
    if len(params) != len(args) or not all(isinstance(p, str) for p in params):
        return None
    loaded = [_load(a) for a in args]
    tensors = [a for a in loaded if isinstance(a, TensorSig)]
    output = _load(data["output"])
    if output is None or len(tensors) != len(loaded):
        return None
    return FuncSig(name, tuple(params), tuple(tensors), output)
