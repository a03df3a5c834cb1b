"""Compile a graph module to native code and call its functions with NumPy arrays.

`compile_graph_module(module)` runs graph -> tensor -> loop -> llvm on a clone, JITs the
result and returns a `CompiledModule`; `mod.f(x, w)` (or `mod["f"]`) checks the
arguments (count, dtype, shape), allocates the outputs and calls the native code.

A compile first asks the compile cache (cache.py) for the machine code of the same program,
options and host: a hit loads that object code into a fresh engine (so every compiled
module has its own globals, variables, generator state and arenas) without lowering.
Neither a hit nor a compile keeps the tensor / loop levels: `ir(level)` and the tests'
`_stages` lower the module again on first use (the compile report `stats` is recorded).

Calling convention (/work/notes/conventions.md): `f(ptr in0, ..., ptr out0, ...)` on
C-contiguous data, tuple results flattened, void result. For a small per-call cost each
function also gets an entry `_dlc_py_<f>` that takes the `PyArrayObject*`s themselves
(`id(array)`) and loads their data pointers natively (`array.ctypes.data` alone costs
about a microsecond). The caller keeps every array alive during the call.
"""

from __future__ import annotations

import ctypes
import numbers
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from xdsl.context import Context
from xdsl.dialects import llvm
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i8, i64
from xdsl.ir import Attribute, Block, Region

from dlc.diagnostics import clone_located
from dlc.dialects.graph_types import TensorType, TupleType, format_type, nest_leaves
from dlc.dialects.layout import LayoutError, leaves
from dlc.runtime.jit import JITModule
from dlc.runtime.values import from_leaves, is_plain, to_leaves

LEVELS = ("graph", "tensor", "loop", "llvm")
NUMPY_DTYPES = {
    "f16": np.dtype(np.float16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "bool": np.dtype(np.bool_),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
}


def _array_data_offset() -> int | None:
    """Byte offset of the data pointer in a `PyArrayObject`, checked in this process."""
    probe = np.arange(3, dtype=np.int64)
    offset = 2 * ctypes.sizeof(ctypes.c_void_p)  # right after PyObject_HEAD
    if ctypes.c_void_p.from_address(id(probe) + offset).value != probe.ctypes.data:
        return None
    return offset


DATA_OFFSET = _array_data_offset()
SMALL_CALL_ELEMENTS = 1 << 14


def python_entry(name: str, n_args: int, offset: int) -> llvm.FuncOp:
    """`_dlc_py_<name>(PyArrayObject*...)`: load each array's data pointer, call `name`."""
    ptr = llvm.LLVMPointerType()
    entry = Block(arg_types=[ptr] * n_args)
    offset_value = llvm.ConstantOp(IntegerAttr(offset, i64), i64)
    entry.add_op(offset_value)
    data = []
    for obj in entry.args:
        field = llvm.GEPOp(obj, [llvm.GEP_USE_SSA_VAL], i8, ssa_indices=[offset_value])
        load = llvm.LoadOp(field, ptr, alignment=8)
        entry.add_ops([field, load])
        data.append(load.dereferenced_value)
    entry.add_ops([llvm.CallOp(name, *data), llvm.ReturnOp()])
    ftype = llvm.LLVMFunctionType([ptr] * n_args)
    return llvm.FuncOp(
        f"_dlc_py_{name}", ftype, linkage=llvm.LinkageAttr("external"), body=Region(entry)
    )


def tensor_leaves(t: Attribute) -> list[TensorType] | None:
    """Tensor leaves of a tensor / nested-tuple type in order; None for anything else."""
    leaves: list[TensorType] = []
    stack = [t]
    while stack:
        item = stack.pop()
        if isinstance(item, TupleType):
            stack.extend(reversed(item.types))
        elif isinstance(item, TensorType) and item.dt in NUMPY_DTYPES:
            leaves.append(item)
        else:
            return None
    return leaves


def rebuild(t: Attribute, leaves: Iterator[np.ndarray]) -> Any:
    """The value of (nested) tuple type `t` made of `leaves` in order."""
    return nest_leaves(t, leaves, tuple)


class Param:
    """One parameter of a compiled function: position, DLVM name, type, NumPy dtype."""

    __slots__ = ("dtype", "func", "index", "name", "shape", "ttype")

    def __init__(self, func: str, index: int, name: str, ttype: TensorType) -> None:
        self.func, self.index, self.name, self.ttype = func, index, name, ttype
        self.shape = ttype.dims
        self.dtype = NUMPY_DTYPES[ttype.dt]

    def expected(self) -> str:
        return f"argument {self.index} (%{self.name}) of @{self.func}: expected {format_type(self.ttype)}"

    def convert(self, value: object) -> np.ndarray:
        """The C-contiguous array to pass for `value` (the slow path of a call)."""
        if isinstance(value, np.ndarray):
            got = f"{value.dtype} array of shape {value.shape}"
            if value.dtype != self.dtype:
                raise TypeError(f"{self.expected()}, got {got}")
            if value.shape != self.shape:
                raise ValueError(f"{self.expected()}, got {got}")
            return np.ascontiguousarray(value)
        if self.shape == () and isinstance(value, numbers.Number | np.generic):
            return self.scalar(value)
        raise TypeError(f"{self.expected()}, got {type(value).__name__}")

    def scalar(self, value: Any) -> np.ndarray:
        """A Python / NumPy scalar converted exactly (no lossy conversion) to the dtype."""
        kind = self.dtype.kind
        ok = False
        if kind == "b":
            ok = isinstance(value, bool | np.bool_) or (
                isinstance(value, numbers.Integral) and int(value) in (0, 1)
            )
        elif kind == "i" and isinstance(value, numbers.Real | np.bool_):
            info = np.iinfo(self.dtype)
            whole = isinstance(value, numbers.Integral | np.bool_) or float(value).is_integer()
            ok = whole and info.min <= int(value) <= info.max
        elif kind == "f":
            ok = isinstance(value, numbers.Real | np.bool_)
        if not ok:
            raise TypeError(f"{self.expected()}, got {type(value).__name__} {value!r}")
        return np.array(value, dtype=self.dtype)


class CompiledFunction:
    """A native function called with NumPy arrays / scalars; returns NumPy arrays.

    A tensor result is an array (0-d for scalars), a tuple result a (nested) tuple of
    arrays, a void result None.
    """

    def __init__(self, name: str, graph_func: Any, jit: JITModule, native: bool = True) -> None:
        self.name = name
        self._jit = jit  # keeps the native code alive
        ftype = graph_func.function_type
        entry = graph_func.body.blocks.first
        args = entry.args if entry is not None else ()
        self.param_names = [getattr(a, "_name", None) or str(i) for i, a in enumerate(args)]
        self._output_type = ftype.output
        self._error = ""
        self._checks: list[tuple[np.dtype, tuple[int, ...], Param]] | None = None
        self._structured = None
        symbols = _symbols_of(graph_func)
        # The fast path takes tensor arguments; tuple arguments go the structured way.
        plain = is_plain(ftype.output) and all(isinstance(t, TensorType) for t in ftype.args)
        try:
            structured = (
                None
                if plain
                else ([leaves(t, symbols) for t in ftype.args], leaves(ftype.output, symbols))
            )
        except LayoutError:
            structured = None
        if (
            structured is not None
            and native
            and all(t.dt in NUMPY_DTYPES for ts in structured[0] for t in ts)
        ):
            self._init_structured(name, ftype, symbols, structured, jit)
            return
        outputs = tensor_leaves(ftype.output)
        if outputs is None or any(
            not isinstance(t, TensorType) or tensor_leaves(t) is None for t in ftype.args
        ):
            signature = (
                f"({', '.join(format_type(t) for t in ftype.args)}) -> {format_type(ftype.output)}"
            )
            self._error = (
                f"@{name} is not callable from Python: its type {signature} is not made of tensors"
            )
            return
        if not native:
            self._error = f"@{name} was not compiled to native code"
            return
        self._params = [
            Param(name, i, n, t)
            for i, (n, t) in enumerate(zip(self.param_names, ftype.args, strict=True))
        ]
        self._outputs = [(t.dims, NUMPY_DTYPES[t.dt]) for t in outputs]
        self._single = not isinstance(ftype.output, TupleType)
        self._checks = [(p.dtype, p.shape, p) for p in self._params]
        self._native = self._entry_point(jit, [*ftype.args, *outputs])

    def _init_structured(self, name, ftype, symbols, structured, jit) -> None:  # noqa: ANN001
        """Structs, enums, pointers...: one Param per leaf (values.py conventions)."""
        arg_leaves, out_leaves = structured
        self._params = [
            Param(name, i, f"{n}[{k}]" if len(ts) > 1 or not isinstance(t, TensorType) else n, leaf)
            for i, (n, t, ts) in enumerate(
                zip(self.param_names, ftype.args, arg_leaves, strict=True)
            )
            for k, leaf in enumerate(ts)
        ]
        self._outputs = [(t.dims, NUMPY_DTYPES[t.dt]) for t in out_leaves]
        self._single = False
        self._checks = [(p.dtype, p.shape, p) for p in self._params]
        self._structured = (list(ftype.args), symbols)
        self._native = self._entry_point(jit, [*(t for ts in arg_leaves for t in ts), *out_leaves])

    def _flatten_args(self, args: tuple[object, ...]) -> list[object]:
        types, symbols = self._structured  # type: ignore[misc]
        if len(args) != len(types):
            names = ", ".join(self.param_names)
            raise TypeError(
                f"{self.name}() takes {len(types)} arguments ({names}), got {len(args)}"
            )
        flat: list[object] = []
        for i, (value, t) in enumerate(zip(args, types, strict=True)):
            what = f"argument {i} (%{self.param_names[i]}) of @{self.name}"
            flat.extend(to_leaves(value, t, symbols, what))
        return flat

    def _entry_point(self, jit: JITModule, buffers: list[TensorType]) -> Callable[..., None]:
        """A cached ctypes callable of the native code (and how to pass an array to it)."""
        by_object = DATA_OFFSET is not None
        self._pointer: Callable[[np.ndarray], int] = id if by_object else _data_pointer
        # Small calls keep the GIL (releasing and re-taking it costs more than the work).
        small = sum(t.num_elements for t in buffers) <= SMALL_CALL_ELEMENTS
        small = small or self.name in getattr(jit, "keep_gil", ())  # arena: not reentrant
        factory = ctypes.PYFUNCTYPE if small else ctypes.CFUNCTYPE
        prototype = factory(None, *([ctypes.c_void_p] * len(buffers)))
        symbol = f"_dlc_py_{self.name}" if by_object else self.name
        return prototype(jit.address(symbol))

    def __repr__(self) -> str:
        return f"<CompiledFunction @{self.name}({', '.join(self.param_names)})>"

    def __call__(self, *args: object) -> Any:
        checks = self._checks
        if checks is None:
            raise TypeError(self._error)
        if self._structured is not None:
            args = tuple(self._flatten_args(args))
        if len(args) != len(checks):
            names = ", ".join(self.param_names)
            raise TypeError(
                f"{self.name}() takes {len(checks)} arguments ({names}), got {len(args)}"
            )
        pointer = self._pointer
        converted = []  # keeps converted arguments alive during the call
        pointers = []
        i = 0
        for value in args:
            dtype, shape, param = checks[i]
            i += 1
            # fast path: an ndarray of the exact dtype and shape, C-contiguous
            if (
                type(value) is not np.ndarray
                or value.dtype is not dtype
                or value.shape != shape
                or not value.flags.c_contiguous
            ):
                value = param.convert(value)
                converted.append(value)
            pointers.append(pointer(value))
        outputs = [np.empty(shape, dtype) for shape, dtype in self._outputs]
        self._native(*pointers, *map(pointer, outputs))
        status = self._jit.status
        if status is not None and status.value:
            self._jit.raise_status()
        if self._structured is not None:
            return from_leaves(self._output_type, iter(outputs), self._structured[1])
        if self._single:
            return outputs[0]
        if not outputs and not self._output_type.types:
            return None
        return rebuild(self._output_type, iter(outputs))


def _symbols_of(graph_func: Any) -> Any:
    from dlc.dialects.graph import Symbols, enclosing_symbols

    return enclosing_symbols(graph_func) or Symbols()


def _attach_vars(jit: JITModule, sizes: dict[str, int]) -> dict[str, np.ndarray]:
    """Zeroed storage of the module's variables (name -> byte size, the `dlc.vars`
    attribute), installed in their address slots."""
    from dlc.lowering.loop_to_llvm.memory import VAR_PREFIX

    storage: dict[str, np.ndarray] = {}
    for name, size in sizes.items():
        buffer = np.zeros(max(1, size) + 16, np.uint8)
        storage[name] = buffer
        slot = jit.global_address(VAR_PREFIX + name)
        ctypes.c_int64.from_address(slot).value = (buffer.ctypes.data + 15) // 16 * 16  # type: ignore[arg-type]
    jit.var_storage = storage  # type: ignore[attr-defined]
    return storage


def _data_pointer(array: np.ndarray) -> int:
    return array.ctypes.data


class CompiledModule:
    """Native code for a graph module: `mod.f(...)`, `mod["f"]`, `mod.ir(level)`."""

    def __init__(
        self,
        graph: ModuleOp,
        stages: dict[str, ModuleOp] | None,
        jit: JITModule,
        funcs: dict[str, Any],
        native: set[str],
        *,
        stats: dict[str, dict[str, int]] | None = None,
        relower: Callable[[], tuple[ModuleOp, dict[str, ModuleOp]]] | None = None,
    ) -> None:
        """`stages` None (a compile-cache hit): `relower()` recomputes the tensor /
        loop / llvm levels when `ir` asks for them; `stats` answers `stats`."""
        self._graph = graph
        self._snapshots = stages
        self._stats = stats
        self._relower = relower
        self._jit = jit
        self._functions = {
            name: CompiledFunction(name, f, jit, name in native) for name, f in funcs.items()
        }

    def seed(self, value: int) -> None:
        """Restart the `random` generator: seed `value` (any int, taken mod 2**64),
        counter 0. Draws are a pure function of (seed, number of earlier draws).

        On a module that never uses `random` (no generator state) this does nothing
        and raises nothing (the type check still applies): seeding is then harmless."""
        from dlc.lowering.graph_to_tensor.runtime_ops import RNG_VAR

        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise TypeError(f"seed: expected an int, got {type(value).__name__}")
        state = getattr(self._jit, "var_storage", {}).get(RNG_VAR)
        if state is None:
            return  # the module never calls `random`
        words = state[(-state.ctypes.data) % 16 :][:16].view(np.uint64)
        words[0] = int(value) % (1 << 64)
        words[1] = 0

    @property
    def functions(self) -> tuple[str, ...]:
        return tuple(self._functions)

    def __getitem__(self, name: str) -> CompiledFunction:
        try:
            return self._functions[name]
        except KeyError:
            raise KeyError(f"no function @{name} in the compiled module") from None

    def __getattr__(self, name: str) -> CompiledFunction:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._functions[name]
        except KeyError:
            raise AttributeError(f"no function @{name} in the compiled module") from None

    def stats(self, name: str) -> dict[str, int]:
        """Compile report of function `name`: `loop_nests` (top-level loop nests run per
        call), `buffers` (intermediate buffers), `arena_bytes`, `min_live_bytes`."""
        from dlc.dialects import loop
        from dlc.passes.loop.plan_memory import function_stats

        self[name]  # KeyError for an unknown function
        if self._stats is not None:
            if name in self._stats:
                return dict(self._stats[name])
            raise KeyError(f"@{name} has no loop-level code")
        for f in self._levels()["loop"].body.block.ops:
            if isinstance(f, loop.FuncOp) and f.sym_name.data == name:
                return function_stats(f)
        raise KeyError(f"@{name} has no loop-level code")

    @property
    def _stages(self) -> dict[str, ModuleOp]:
        return self._levels()

    def _levels(self) -> dict[str, ModuleOp]:
        """The tensor / loop snapshots, lowered again on first use (a compile does not
        keep them; a compile-cache hit never had them)."""
        if self._snapshots is None:
            llvm_level, self._snapshots = self._relower()  # type: ignore[misc]
            if self._jit.optimized_ir is None:
                from dlc.runtime.jit import llvm_ir

                self._jit.optimized_ir = llvm_ir(llvm_level, self._jit.opt_level)
        return self._snapshots

    def ir(self, level: str = "llvm") -> str:
        """The program at `level` (graph|tensor|loop|llvm; llvm = optimized LLVM IR)."""
        if level == "graph":
            from dlc.parser import print_module

            return print_module(self._graph)
        if level not in LEVELS:
            raise ValueError(f"unknown IR level {level!r}; expected one of {', '.join(LEVELS)}")
        if level == "llvm" and self._jit.optimized_ir is not None:
            return self._jit.optimized_ir
        stages = self._levels()
        if level == "llvm":
            return self._jit.optimized_ir  # type: ignore[return-value]
        return str(stages[level])


def _context() -> Context:
    from dlc.dialects import get_all_dialects

    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    return ctx


def _function_names(stages: dict[str, ModuleOp]) -> list[str]:
    loop_level = stages.get("loop")
    if loop_level is None:
        return []
    return [f.sym_name.data for f in loop_level.body.block.ops if hasattr(f, "sym_name")]


def _arena_functions(stages: dict[str, ModuleOp]) -> set[str]:
    """Functions whose code uses a static arena (see dlc/passes/loop/plan_memory.py)."""
    from dlc.passes.loop.plan_memory import ARENA_BYTES

    loop_level = stages.get("loop")
    if loop_level is None:
        return set()
    return {
        f.sym_name.data  # type: ignore[attr-defined]
        for f in loop_level.body.block.ops
        if getattr(f.attributes.get(ARENA_BYTES), "data", 0)
    }


def _process_symbol(name: str) -> int | None:
    """Address of C symbol `name` in the process or libm (dlsym), or None."""
    import ctypes.util

    libraries = [None, ctypes.util.find_library("m")]
    for library in libraries:
        try:
            return ctypes.cast(getattr(ctypes.CDLL(library), name), ctypes.c_void_p).value
        except (AttributeError, OSError):
            continue
    return None


def external_names(llvm_level: ModuleOp) -> list[str]:
    """The functions an llvm-level module declares without defining them."""
    return [
        f.sym_name.data
        for f in llvm_level.body.block.ops
        if isinstance(f, llvm.FuncOp) and not f.body.blocks
    ]


def check_symbols(llvm_level: ModuleOp | list[str], graph: ModuleOp) -> None:
    """Every external function the code calls (those of an llvm-level module, or a list
    of names) must exist in this process (MCJIT would crash on an unresolved symbol):
    a located error at the `[extern]` declaration."""
    import llvmlite.binding as llvm_binding

    from dlc.diagnostics import error_at
    from dlc.dialects.graph import FuncOp as GraphFuncOp

    decls = {f.sym_name.data: f for f in graph.body.block.ops if isinstance(f, GraphFuncOp)}
    for name in external_names(llvm_level) if isinstance(llvm_level, ModuleOp) else llvm_level:
        if llvm_binding.address_of_symbol(name):
            continue
        address = _process_symbol(name)
        if address:
            llvm_binding.add_symbol(name, address)
            continue
        raise error_at(
            decls.get(name),
            f"extern function @{name}: no symbol {name!r} in this process "
            "(load its library first, e.g. llvmlite.binding.load_library_permanently)",
        )


def level_passes(
    opt_level: int = 2,
    *,
    fuse: bool = True,
    plan_memory: bool = True,
    fast_math_functions: bool = True,
) -> dict[str, list[Any]]:
    """Passes run right after each lowering (issue 5): `fuse` on the tensor level
    (opt_level >= 1), `plan-memory` and polynomial `math-approx` on the loop level."""
    from dlc.passes.loop.math_approx import MathApproxPass
    from dlc.passes.loop.plan_memory import PlanMemoryPass
    from dlc.passes.tensor.fuse import FusePass

    tensor_passes: list[Any] = [FusePass()] if fuse and opt_level >= 1 else []
    loop_passes: list[Any] = [PlanMemoryPass()] if plan_memory else []
    loop_passes += [MathApproxPass()] if fast_math_functions else []
    return {"tensor": tensor_passes, "loop": loop_passes}


def lower_to_llvm(
    module: ModuleOp,
    passes: dict[str, list[Any]] | None = None,
    *,
    bounds_check: bool = False,
    snapshots: bool = True,
    on_loop: Callable[[ModuleOp], None] | None = None,
) -> tuple[ModuleOp, dict[str, ModuleOp]]:
    """Lower a clone of graph `module` to the llvm level; also return tensor/loop snapshots
    (none when `snapshots` is False: cloning them costs a noticeable part of a compile).

    `passes` maps a level to the passes run on it before its snapshot (`level_passes`);
    `on_loop` sees the verified loop level before it is lowered further."""
    from dlc.lowering.graph_to_tensor.lower_graph_to_tensor import LowerGraphToTensorPass
    from dlc.lowering.loop_to_llvm.lower_loop_to_llvm import LowerLoopToLLVMPass
    from dlc.lowering.tensor_to_loop.lower_tensor_to_loop import LowerTensorToLoopPass

    ctx = _context()
    work = clone_located(module)
    stages: dict[str, ModuleOp] = {}
    for level, lowering in (
        ("tensor", LowerGraphToTensorPass()),
        ("loop", LowerTensorToLoopPass()),
    ):
        lowering.apply(ctx, work)
        for extra in (passes or {}).get(level, ()):
            extra.apply(ctx, work)
        work.verify()
        if snapshots:
            stages[level] = work.clone()
    if on_loop is not None:
        on_loop(work)
    LowerLoopToLLVMPass(bounds_check=bounds_check).apply(ctx, work)
    return work, stages


class NativeStatus:
    """The status word of a compiled module (see lower_loop_to_llvm.STATUS) and its
    messages; `raise_status` resets the word and raises TrapError / IndexError."""

    def __init__(self, address: int, messages: list[str], depth: int | None = None) -> None:
        self.word = ctypes.c_int64.from_address(address)
        self.messages = messages
        self.depth = ctypes.c_int64.from_address(depth) if depth is not None else None

    def raise_status(self) -> None:
        code, self.word.value = self.word.value, 0
        if self.depth is not None:  # every frame uncounts itself on the way out; be sure
            self.depth.value = 0
        kind, _, text = self.messages[code - 1].partition("\t")
        if kind == "bounds":
            raise IndexError(text)
        from dlc.diagnostics import TrapError

        raise TrapError(text)


def _attach_status(jit: JITModule, messages: list[str] | None, recursive: bool) -> None:
    from dlc.lowering.loop_to_llvm.lower_loop_to_llvm import CALL_DEPTH, STATUS

    jit.status = None  # type: ignore[attr-defined]
    address = jit.global_address(STATUS) if messages is not None else None
    if address is None:
        return
    depth = jit.global_address(CALL_DEPTH) if recursive else None
    status = NativeStatus(address, list(messages), depth)  # type: ignore[arg-type]
    jit.status = status.word  # type: ignore[attr-defined]
    jit.raise_status = status.raise_status  # type: ignore[attr-defined]


def _add_python_entries(llvm_level: ModuleOp, funcs: dict[str, Any]) -> set[str]:
    """Add `_dlc_py_<f>` entries for the natively compiled graph functions; their names."""
    defined = {
        f.sym_name.data: f
        for f in llvm_level.body.block.ops
        if isinstance(f, llvm.FuncOp) and f.body.blocks
    }
    native = {name for name in funcs if name in defined}
    for name in sorted(native) if DATA_OFFSET is not None else ():
        n_args = len(defined[name].function_type.inputs.data)
        llvm_level.body.block.add_op(python_entry(name, n_args, DATA_OFFSET))
    return native


def _loop_facts(loop_level: ModuleOp) -> dict[str, Any]:
    """The loop-level part of `_metadata`: compile stats, arena and function names."""
    from dlc.dialects import loop
    from dlc.passes.loop.plan_memory import function_stats

    stages = {"loop": loop_level}
    return {
        "arena": sorted(_arena_functions(stages)),
        "functions": _function_names(stages),
        "stats": {
            f.sym_name.data: function_stats(f)
            for f in loop_level.body.block.ops
            if isinstance(f, loop.FuncOp)
        },
    }


def _metadata(llvm_level: ModuleOp, facts: dict[str, Any], native: set[str]) -> dict:
    """What a compiled module needs besides the graph module and the machine code, as
    JSON-able data (the compile cache stores it; cache.valid_meta checks its shape).
    `facts` come from the loop level (`_loop_facts`)."""
    keep_gil = set(facts["arena"])  # planned arenas are not reentrant
    recursive = "dlc.recursive" in llvm_level.attributes
    if recursive:  # the call-depth counter is not per thread
        keep_gil |= set(facts["functions"])
    messages = llvm_level.attributes.get("dlc.messages")
    sizes = llvm_level.attributes.get("dlc.vars")
    return {
        "native": sorted(native),
        "keep_gil": sorted(keep_gil),
        "externs": external_names(llvm_level),
        "messages": None if messages is None else [m.data for m in messages.data],  # type: ignore[union-attr]
        "recursive": recursive,
        "vars": {n: v.value.data for n, v in sizes.data.items()} if sizes is not None else {},  # type: ignore[union-attr]
        "stats": facts["stats"],
    }


def _facts_into(facts: dict[str, Any]) -> Callable[[ModuleOp], None]:
    return lambda loop_level: facts.update(_loop_facts(loop_level))


def _attach(jit: JITModule, meta: dict) -> None:
    """Install the runtime state described by `meta` (`_metadata`) on a fresh engine."""
    jit.keep_gil = set(meta["keep_gil"])  # type: ignore[attr-defined]
    _attach_status(jit, meta["messages"], meta["recursive"])
    _attach_vars(jit, meta["vars"])


def _cacheable(jit: JITModule) -> bool:
    """Object code alone reproduces the module (no static constructors to run)."""
    ir = jit.optimized_ir or ""
    return jit.object_code is not None and "@llvm.global_ctors" not in ir


def _from_cache(
    entry: Any, module: ModuleOp, funcs: dict[str, Any], opt_level: int, relower: Callable
) -> CompiledModule | None:
    """A fresh compiled module from a cache entry's object code and metadata."""
    meta = entry.meta
    native = set(meta["native"])
    if not native <= set(funcs):
        return None  # not this program's entry after all: compile it
    check_symbols(meta["externs"], module)
    try:
        jit = JITModule.from_object(entry.obj, opt_level)
    except RuntimeError:  # LLVM rejected the object file: compile again
        return None
    jit.optimized_ir = entry.optimized_ir
    _attach(jit, meta)
    stats = {name: dict(value) for name, value in meta["stats"].items()}
    return CompiledModule(module.clone(), None, jit, funcs, native, stats=stats, relower=relower)


def compile_graph_module(
    module: ModuleOp,
    *,
    opt_level: int = 2,
    fuse: bool = True,
    plan_memory: bool = True,
    fast_math_functions: bool = True,
    bounds_check: bool | None = None,
    seed: int = 0,
) -> CompiledModule:
    """Compile every defined function of a verified graph module to native code.

    `fuse` (tensor-level fusion, at opt_level >= 1), `plan_memory` (one static arena per
    function) and `fast_math_functions` (f32 exp/log/tanh as polynomials instead of libm
    calls) can be turned off. `bounds_check` guards every load and store (IndexError
    naming the op's location on a violation); None means the environment variable
    DLC_BOUNDS_CHECK=1. `seed` seeds the `random` generator (`CompiledModule.seed`)."""
    from dlc.dialects.graph import FuncOp as GraphFuncOp
    from dlc.passes.graph.differentiate import differentiated
    from dlc.runtime import cache

    if bounds_check is None:  # DLC_BOUNDS_CHECK=1 runs a whole test suite checked
        bounds_check = os.environ.get("DLC_BOUNDS_CHECK", "") == "1"
    options = {
        "opt_level": opt_level,
        "fuse": fuse,
        "plan_memory": plan_memory,
        "fast_math_functions": fast_math_functions,
        "bounds_check": bounds_check,
        "data_offset": DATA_OFFSET,
    }  # not `seed`: it only sets the generator state after loading
    key = cache.cache_key(module, options) if cache.enabled() else None
    module = differentiated(module)  # adjoint declarations become definitions first
    funcs = {
        f.sym_name.data: f
        for f in module.body.block.ops
        if isinstance(f, GraphFuncOp) and not f.is_declaration and f.body.blocks
    }

    def passes() -> dict[str, list[Any]]:
        return level_passes(
            opt_level, fuse=fuse, plan_memory=plan_memory, fast_math_functions=fast_math_functions
        )

    def relower() -> tuple[ModuleOp, dict[str, ModuleOp]]:
        llvm_level, stages = lower_to_llvm(module, passes(), bounds_check=bounds_check)
        _add_python_entries(llvm_level, funcs)
        return llvm_level, stages

    entry = cache.lookup(key) if key is not None else None
    compiled = _from_cache(entry, module, funcs, opt_level, relower) if entry else None
    if compiled is None:
        facts: dict[str, Any] = {}
        llvm_level, _ = lower_to_llvm(
            module, passes(), bounds_check=bounds_check, snapshots=False, on_loop=_facts_into(facts)
        )
        check_symbols(llvm_level, module)
        native = _add_python_entries(llvm_level, funcs)
        jit = JITModule(llvm_level, opt_level)
        meta = _metadata(llvm_level, facts, native)
        _attach(jit, meta)
        stats = {name: dict(value) for name, value in meta["stats"].items()}
        compiled = CompiledModule(
            module.clone(), None, jit, funcs, native, stats=stats, relower=relower
        )
        if key is not None and _cacheable(jit):
            cache.store(key, cache.Entry(jit.object_code, meta, jit.optimized_ir))  # type: ignore[arg-type]
    compiled.seed(seed)
    return compiled
