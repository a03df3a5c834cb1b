"""Type checks of the `graph` verifier (shared/DLVM.md §5.1, with dlc's limits):

- `TypeSizes`: every tensor nested in a type stays within dlc's size limits;
- `check_recursive_types`: no struct or enum contains itself by value, directly or
  through other structs, enums, tuples or arrays. Such a type has no finite layout;
  holding it through a pointer or a box (or a function type) is fine. DLVM's own
  `enum.dl` example declares one, and dlc once looped forever laying it out.

All walks are iterative.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Operation

from dlc.diagnostics import error_at
from dlc.dialects.graph import EnumOp, StructOp
from dlc.dialects.graph_types import (
    ArrayType,
    BoxType,
    FunctionType,
    NominalType,
    PointerType,
    TensorType,
    TupleType,
    size_error,
)


class TypeSizes:
    """Checks every tensor nested in a type against dlc's size limits (memoised)."""

    def __init__(self) -> None:
        self.ok: set[Attribute] = set()

    def check(self, op: Operation, t: Attribute) -> None:
        if t in self.ok:
            return
        work = [t]
        while work:
            current = work.pop()
            if isinstance(current, TensorType):
                message = size_error(current)
                if message is not None:
                    raise error_at(op, message)
            elif isinstance(current, TupleType):
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
        self.ok.add(t)


def held_by_value(types: list[Attribute]) -> list[str]:
    """The structs and enums that values of `types` hold inline: through tuples and
    non-empty arrays, not behind pointers, boxes or function types."""
    names: list[str] = []
    work = list(types)
    while work:
        current = work.pop()
        if isinstance(current, TupleType):
            work.extend(current.types)
        elif isinstance(current, ArrayType) and current.count.data > 0:
            work.append(current.element)
        elif isinstance(current, NominalType) and current.kind.data in ("struct", "enum"):
            names.append(current.ident)
    return names


def check_recursive_types(module: ModuleOp) -> None:
    """A located error at a struct or enum that contains itself by value (the member of
    the first cycle found that is declared first)."""
    decls: dict[str, Operation] = {}
    contains: dict[str, list[str]] = {}
    for op in module.ops:
        if isinstance(op, StructOp):
            types = [t for _, t in op.fields]
        elif isinstance(op, EnumOp):
            types = [t for _, ts in op.cases for t in ts]
        else:
            continue
        decls[op.sym_name.data] = op
        contains[op.sym_name.data] = held_by_value(types)
    cycle = _find_cycle(list(decls), contains)
    if cycle is None:
        return
    order = list(decls)
    first = min(range(len(cycle)), key=lambda i: order.index(cycle[i]))
    cycle = cycle[first:] + cycle[:first]
    through = "".join(
        f" through ${name}" if i == 0 else f", ${name}" for i, name in enumerate(cycle[1:])
    )
    raise error_at(
        decls[cycle[0]],
        f"recursive type ${cycle[0]} has infinite size: it contains itself by value"
        f"{through} (hold it through a pointer or a box)",
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
