"""Type checks of the `graph` verifier (docs/reference/language.md, with dlc's limits):

- `TypeSizes`: every tensor nested in a type, and every value as a whole, stays within
  dlc's size limits;
- `check_stack_bytes`: a function's `allocateStack`s fit in a native stack frame;
- `check_recursive_types`: no struct contains itself by value through structs alone
  (tuples and arrays included). Such a type has no finite layout; holding it through a
  pointer, a box, a function type or an enum case is fine: an enum on a cycle is laid
  out indirectly, in boxes (recursive_types.py), like DLVM's `$Tree`. And every enum
  has a finite value.

All walks are iterative.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Operation

from dlc.diagnostics import error_at
from dlc.dialects.graph import EnumOp, FuncOp, StructOp, Symbols
from dlc.dialects.graph_memory import AllocateStackOp
from dlc.dialects.graph_types import (
    MAX_BYTES,
    MAX_PARTS,
    MAX_STACK_BYTES,
    ArrayType,
    BoxType,
    FunctionType,
    PointerType,
    TensorType,
    TupleType,
    dynamic_types,
    format_type,
    size_error,
)
from dlc.dialects.layout import Extent, extent
from dlc.dialects.recursive_types import holds, zero_cases


class TypeSizes:
    """Checks a type and every type nested in it (memoised) against dlc's limits: each
    tensor (`size_error`), and each value as a whole, at most `MAX_PARTS` parts (array
    elements and fields, all levels; values are flattened into their tensors) and
    `MAX_BYTES` bytes. Array sizes must not be negative (MLIR input can say so)."""

    def __init__(self, symbols: Symbols) -> None:
        self.symbols = symbols
        self.ok: set[Attribute] = set()
        self.extents: dict[Attribute, Extent] = {}

    def check(self, op: Operation, t: Attribute) -> None:
        work = [t]
        while work:
            current = work.pop()
            if current in self.ok:
                continue
            message = self._error(current)
            if message is not None:
                raise error_at(op, message)
            self.ok.add(current)
            if isinstance(current, TupleType):
                work.extend(current.types)
            elif isinstance(current, FunctionType):
                work.extend(current.args)
                work.append(current.output)
            elif isinstance(current, ArrayType):
                work.append(current.element)
            elif isinstance(current, PointerType):
                work.append(current.pointee)
            elif isinstance(current, BoxType):
                work.append(current.element)

    def _error(self, t: Attribute) -> str | None:
        if isinstance(t, TensorType):
            return size_error(t)
        if isinstance(t, ArrayType) and t.count.data < 0:
            return f"array size must be non-negative, got {t.count.data}"
        if isinstance(t, FunctionType) or dynamic_types(t):
            return None  # a tuple of symbolic tensors: sizes are checked per call
        size = extent(t, self.symbols, self.extents)
        if size.parts > MAX_PARTS:
            return f"type {format_type(t)} has more than 2^16 parts (elements and fields at all levels)"
        if size.size > MAX_BYTES:
            return f"type {format_type(t)} is larger than 2^42 bytes"
        return None


def check_stack_bytes(func: FuncOp, sizes: TypeSizes) -> None:
    """The `allocateStack`s of `func` hold at most `MAX_STACK_BYTES` in all: each is one
    slot of the native stack frame, and a larger frame would overflow the stack."""
    total = 0
    for op in func.walk():
        if not isinstance(op, AllocateStackOp):
            continue
        total += op.count.data * extent(op.elem_type, sizes.symbols, sizes.extents).size
        if total > MAX_STACK_BYTES:
            raise error_at(
                op,
                f"allocateStack: @{func.sym_name.data} would hold {total} bytes on the stack, "
                "more than the limit of 2^20 (use allocateHeap)",
            )


def check_recursive_types(module: ModuleOp) -> None:
    """A located error at a struct that contains itself by value through structs alone
    (the member of the first cycle found that is declared first): no enum on the cycle
    is laid out indirectly to break it (recursive_types.py). Then one at an enum that
    has no finite value."""
    decls: dict[str, Operation] = {}
    for op in module.ops:
        if isinstance(op, StructOp | EnumOp):
            decls[op.sym_name.data] = op
    symbols = Symbols.of_module(module)
    graph = holds(symbols)
    structs = {n: [m for m in graph[n] if m in symbols.structs] for n in symbols.structs}
    order = [n for n in decls if n in structs]
    cycle = _find_cycle(order, structs)
    if cycle is not None:
        found = cycle  # (a name the key function can see narrowed)
        first = min(range(len(found)), key=lambda i: order.index(found[i]))
        cycle = cycle[first:] + cycle[:first]
        through = "".join(
            f" through ${name}" if i == 0 else f", ${name}" for i, name in enumerate(cycle[1:])
        )
        raise error_at(
            decls[cycle[0]],
            f"recursive type ${cycle[0]} has infinite size: it contains itself by value"
            f"{through} (hold it through a pointer, a box or an enum case)",
        )
    zeros = zero_cases(symbols)
    for name in decls:
        if zeros.get(name, 0) is None and symbols.enums[name]:  # (no cases: no values)
            raise error_at(
                decls[name],
                f"enum ${name} has no finite value: each of its cases holds ${name} again "
                "(directly or through other types); give it a case that does not",
            )


def _find_cycle(order: list[str], contains: dict[str, list[str]]) -> list[str] | None:
    """The nodes of the first cycle a depth-first search in `order` meets, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in order:
        if root in state:
            continue
        path, stack = [root], [iter(contains[root])]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt) :]
            elif nxt in contains and nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(contains[nxt]))
    return None
