"""Recursive structs and enums: which enums are laid out indirectly, and every enum's zero.

A struct or enum *holds* the structs and enums its fields or case values contain by
value (through tuples and non-empty arrays; not behind pointers, boxes or function
types). DLVM enums may be recursive (`enum $Tree { ?leaf(f32) ?node($Tree, $Tree) }`):

- an enum on a cycle of the holds relation is **indirect**: its values live in heap
  boxes and a value is the box's address (dlc/dialects/layout.py), which breaks the
  cycle, so every type has a finite layout;
- a cycle of structs alone has no enum to break it: such a type has infinite size (a
  located error of the verifier);
- the **zero** of an enum (`literal zero`, a fresh variable's contents) is its first
  case without values, else its first case whose values all have finite zeros. An enum
  without one (every case holds the enum again: `enum $E { ?a($E) }`) has no finite
  value at all; the verifier refuses it.

All walks are iterative. The results are memoised on the `Symbols` (keyed by its size,
as the parser adds declarations one by one).
"""

from __future__ import annotations

from xdsl.ir import Attribute

from dlc.dialects.graph import Symbols
from dlc.dialects.graph_types import ArrayType, NominalType, TupleType


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


def holds(symbols: Symbols) -> dict[str, list[str]]:
    """Struct or enum name -> the struct and enum names it holds by value."""
    out = {name: held_by_value([t for _, t in fields]) for name, fields in symbols.structs.items()}
    for name, cases in symbols.enums.items():
        out[name] = held_by_value([t for _, ts in cases for t in ts])
    return out


def _cached(symbols: Symbols, key: str) -> object | None:
    entry = symbols.cache.get(key)
    size = (len(symbols.structs), len(symbols.enums))
    return entry[1] if isinstance(entry, tuple) and entry[0] == size else None


def _store(symbols: Symbols, key: str, value: object) -> None:
    symbols.cache[key] = ((len(symbols.structs), len(symbols.enums)), value)


def indirect_enums(symbols: Symbols) -> frozenset[str]:
    """The enums that reach themselves through the holds relation."""
    cached = _cached(symbols, "indirect")
    if isinstance(cached, frozenset):
        return cached
    graph = holds(symbols)
    found: set[str] = set()
    for name in symbols.enums:
        seen: set[str] = set()
        work = list(graph[name])
        while work and name not in seen:
            current = work.pop()
            if current in seen or current not in graph:
                continue
            seen.add(current)
            work.extend(graph[current])
        if name in seen:
            found.add(name)
    result = frozenset(found)
    _store(symbols, "indirect", result)
    return result


def zero_cases(symbols: Symbols) -> dict[str, int | None]:
    """Enum name -> the index of its zero case (module docstring), None when the enum
    has no finite value."""
    cached = _cached(symbols, "zero")
    if isinstance(cached, dict):
        return cached
    finite: set[str] = set()  # structs and enums with a finite value (a least fixpoint)

    def all_finite(types: tuple[Attribute, ...] | list[Attribute]) -> bool:
        return all(n in finite for n in held_by_value(list(types)))

    changed = True
    while changed:
        changed = False
        for name, fields in symbols.structs.items():
            if name not in finite and all_finite([t for _, t in fields]):
                finite.add(name)
                changed = True
        for name, cases in symbols.enums.items():
            if name not in finite and any(all_finite(ts) for _, ts in cases):
                finite.add(name)
                changed = True
    result: dict[str, int | None] = {}
    for name, cases in symbols.enums.items():
        empty = [i for i, (_, ts) in enumerate(cases) if not ts]
        usable = [i for i, (_, ts) in enumerate(cases) if all_finite(ts)]
        result[name] = empty[0] if empty else (usable[0] if usable else None)
    _store(symbols, "zero", result)
    return result


def zero_case(t: NominalType, symbols: Symbols) -> int:
    """The index of enum `t`'s zero case (0 for an enum without a finite value, which
    the verifier refuses)."""
    index = zero_cases(symbols).get(t.ident)
    return 0 if index is None else index


def enum_tag(t: NominalType, case: str, symbols: Symbols) -> int:
    """The stored tag of a case: its index counted from the zero case (mod the number of
    cases), so that all-zero bytes hold the enum's zero value, as the runtime's zeroed
    variables and `calloc`ed memory do."""
    names = [c for c, _ in symbols.enums[t.ident]]
    return (names.index(case) - zero_case(t, symbols)) % len(names)


def case_of_tag(t: NominalType, tag: int, symbols: Symbols) -> int:
    """The case index that stored tag `tag` means (`enum_tag` inverted)."""
    count = len(symbols.enums[t.ident])
    return (tag + zero_case(t, symbols)) % count
