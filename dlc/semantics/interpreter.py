"""The NumPy reference interpreter of the graph level: the semantic oracle of dlc.

    value = run_function(module, "f", [np.ones((2, 3), np.float32)])
    interp = Interpreter(module)          # keeps `var` globals across calls
    interp.call("step", [x]); interp.call("read", [])

Values are described in `values.py`; element-wise semantics in
`ops.py`, reductions/windows/convolution in `tensor.py`.
Calls use an explicit frame stack (no Python recursion per DLVM call), so deep DLVM
recursion works. Function combinators of reduce/scan/reduceWindow run the callee in a
nested interpreter loop (Python recursion): at most `MAX_NESTED_INVOKES` of them may be
active at once (a combinator calling back into the function that reduces); deeper
nesting, like more than `MAX_CALL_DEPTH` frames, raises UndefinedBehaviorError "call
depth limit exceeded ... in @f" (never a raw RecursionError). `random` draws from `np.random.default_rng(seed)` of the
Interpreter: floats uniform in [lo, hi) (computed in the dtype and clamped below hi),
integers in [lo, hi); if hi ≤ lo every element is lo.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from dlc.diagnostics import DiagnosticError, TrapError, error_at
from dlc.dialects.graph import (
    BranchEnumOp,
    BranchOp,
    ConditionalOp,
    FuncOp,
    LiteralOp,
    ReturnOp,
    Symbols,
    VarOp,
)
from dlc.dialects.graph_memory import ApplyIndirectOp, ApplyOp
from dlc.dialects.graph_types import TensorType
from dlc.semantics.handlers import HANDLERS, load
from dlc.semantics.values import (
    Buffer,
    FunctionRef,
    Pointer,
    UndefinedBehaviorError,
    coerce_value,
    numpy_dtype,
    zero_value,
)

__all__ = [
    "Interpreter",
    "TrapError",
    "UndefinedBehaviorError",
    "numpy_dtype",
    "run_function",
]

MAX_CALL_DEPTH = 1_000_000
MAX_NESTED_INVOKES = 40
"""Nested interpreter loops (function combinators calling back into reductions): each
costs about ten Python frames, so 40 stay well below Python's recursion limit."""

_BRANCHES = (BranchOp, ConditionalOp, BranchEnumOp)
_Plan = tuple[Callable[..., object], tuple[SSAValue, ...], SSAValue | None]


@dataclass
class _Frame:
    """One active call: its values, the next op to run and its stack allocations."""

    func: FuncOp
    env: dict[SSAValue, object]
    op: Operation | None
    allocations: list[Buffer] = field(default_factory=list[Buffer])


class Interpreter:
    """Runs functions of one graph module; `var` globals persist across `call`s."""

    def __init__(self, module: ModuleOp, *, seed: int = 0):
        self.module = module
        self.symbols = Symbols.of_module(module)
        self.functions: dict[str, FuncOp] = {}
        self.globals: dict[str, Buffer] = {}
        self.rng = np.random.default_rng(seed)
        for op in module.ops:
            if isinstance(op, FuncOp):
                self.functions[op.sym_name.data] = op
            elif isinstance(op, VarOp):
                cell = zero_value(op.var_type, self.symbols)
                self.globals[op.sym_name.data] = Buffer([cell], op.var_type, "var")
        self._frames: list[_Frame] = []
        self._nesting = 0
        self._plans: dict[Operation, _Plan] = {}

    def call(self, name: str, args: Sequence[object]) -> object:
        """Call function `name` with Python/numpy arguments (coerced to its argument types)."""
        func = self.functions.get(name)
        if func is None:
            raise DiagnosticError(f"reference interpreter: no function @{name}")
        types = func.function_type.args
        if len(args) != len(types):
            raise ValueError(f"@{name} takes {len(types)} arguments, got {len(args)}")
        values = [
            coerce_value(a, t, f"argument {i} of @{name}", self.symbols)
            for i, (a, t) in enumerate(zip(args, types, strict=True))
        ]
        return self.invoke(func, values)

    def invoke(self, func: FuncOp, args: Sequence[object]) -> object:
        """Run `func` on interpreter values to completion (re-entrant, at most
        `MAX_NESTED_INVOKES` deep)."""
        name = func.sym_name.data
        if self._nesting >= MAX_NESTED_INVOKES:
            raise UndefinedBehaviorError(
                f"call depth limit exceeded ({MAX_NESTED_INVOKES} nested function-combinator"
                f" calls) in @{name}"
            )
        self._nesting += 1
        try:
            with np.errstate(all="ignore"):
                return self._run(func, list(args))
        except RecursionError:
            if self._nesting > 1:
                raise  # unwind to the outermost call, where the stack is shallow again
            raise UndefinedBehaviorError(
                f"call depth limit exceeded (Python recursion limit) in @{name}"
            ) from None
        finally:
            self._nesting -= 1

    def call_value(self, callee: object, args: Sequence[object]) -> object:
        """Call a function value (a `FunctionRef` or a pointer to one)."""
        return self.invoke(self.resolve(callee, None), args)

    @property
    def current_function(self) -> str:
        return self._frames[-1].func.sym_name.data if self._frames else "?"

    def global_pointer(self, name: str) -> Pointer:
        buffer = self.globals[name]
        return Pointer(buffer, 0, buffer.elem_type)

    def note_allocation(self, buffer: Buffer) -> None:
        """Stack allocations die when the current call returns."""
        self._frames[-1].allocations.append(buffer)

    # -- the run loop ---------------------------------------------------------

    def _run(self, func: FuncOp, args: list[object]) -> object:
        base = len(self._frames)
        self._push(func, args, None)
        try:
            while True:
                frame = self._frames[-1]
                op = frame.op
                if op is None:
                    raise error_at(
                        frame.func,
                        f"reference interpreter: block of @{frame.func.sym_name.data} has no terminator",
                    )
                kind = type(op)
                if kind is ApplyOp or kind is ApplyIndirectOp:
                    self._call(op, frame)  # type: ignore[arg-type]
                    continue
                if kind is ReturnOp:
                    value = () if op.value is None else frame.env[op.value]  # type: ignore[attr-defined]
                    self._pop()
                    if len(self._frames) == base:
                        return value
                    self._resume(self._frames[-1], value)
                    continue
                if kind in _BRANCHES:
                    self._branch(op, frame)
                    continue
                self._step(op, frame.env)
                frame.op = op.next_op
        finally:
            del self._frames[base:]

    def _push(self, func: FuncOp, args: list[object], at: Operation | None) -> None:
        if func.is_declaration or func.entry is None:
            kind = func.decl.data if func.decl is not None else "bodiless"
            raise error_at(
                at or func,
                f"reference interpreter: cannot call {kind} function @{func.sym_name.data}",
            )
        if len(self._frames) >= MAX_CALL_DEPTH:
            raise UndefinedBehaviorError(
                f"call depth limit exceeded ({MAX_CALL_DEPTH}) in @{func.sym_name.data}"
            )
        frame = _Frame(func, {}, None)
        self._frames.append(frame)
        self._enter(frame, func.entry, args)

    def _pop(self) -> None:
        frame = self._frames.pop()
        for buffer in frame.allocations:
            buffer.freed = True

    def _call(self, op: ApplyOp | ApplyIndirectOp, frame: _Frame) -> None:
        env = frame.env
        if isinstance(op, ApplyOp):
            callee = self.functions.get(op.callee.data)
            if callee is None:
                raise error_at(op, f"reference interpreter: no function @{op.callee.data}")
        else:
            callee = self.resolve(env[op.callee], op)
        self._push(callee, [env[a] for a in op.args], op)

    def resolve(self, value: object, at: Operation | None) -> FuncOp:
        if isinstance(value, Pointer):
            value = load(self, value)
        if not isinstance(value, FunctionRef) or value.name not in self.functions:
            raise error_at(at, f"reference interpreter: {value!r} is not a callable function")
        return self.functions[value.name]

    def _resume(self, caller: _Frame, value: object) -> None:
        pending = caller.op
        assert isinstance(pending, ApplyOp | ApplyIndirectOp)
        if pending.results:
            caller.env[pending.results[0]] = value
        caller.op = pending.next_op

    def _enter(self, frame: _Frame, block: Block, values: Sequence[object]) -> None:
        for arg, value in zip(block.args, values, strict=True):
            frame.env[arg] = value
        frame.op = block.first_op

    def _branch(self, op: Operation, frame: _Frame) -> None:
        env = frame.env
        if isinstance(op, BranchOp):
            self._enter(frame, op.dest, [env[a] for a in op.args])
        elif isinstance(op, ConditionalOp):
            if bool(env[op.cond]):
                self._enter(frame, op.then_block, [env[a] for a in op.then_args])
            else:
                self._enter(frame, op.else_block, [env[a] for a in op.else_args])
        else:
            assert isinstance(op, BranchEnumOp)
            chosen = env[op.value]
            assert isinstance(chosen, tuple), "an enum value is (case, values)"
            case, values = chosen
            names = [c.data for c in op.cases.data]
            if case not in names:
                raise UndefinedBehaviorError(f"branchEnum: no destination for case ?{case}")
            self._enter(frame, op.dests[names.index(case)], list(values))

    def _step(self, op: Operation, env: dict[SSAValue, object]) -> None:
        plan = self._plans.get(op)
        if plan is None:
            plan = self._plans[op] = self._plan(op)
        handler, operands, result = plan
        value = handler(self, op, [env[o] for o in operands])
        if result is not None:
            env[result] = value

    def _plan(self, op: Operation) -> _Plan:
        """Handler, operands and result of `op`, looked up once per op."""
        handler = HANDLERS.get(type(op))
        if handler is None:
            raise error_at(op, f"reference interpreter: unsupported operation {op.name}")
        if isinstance(op, LiteralOp) and not op.operands and isinstance(op.result.type, TensorType):
            # Constant tensors are built once; read-only because values are shared.
            value = handler(self, op, [])
            assert isinstance(value, np.ndarray)
            value.flags.writeable = False
            return (lambda *_: value), (), op.result
        return handler, tuple(op.operands), op.results[0] if op.results else None


def run_function(module: ModuleOp, name: str, args: Sequence[object], *, seed: int = 0) -> object:
    """Run `@name` of a graph module on `args` with a fresh module state."""
    return Interpreter(module, seed=seed).call(name, args)
