"""Graph -> tensor rule of `extract` / `insert` for every combination of keys.

Keys walk the value tree of dlc/dialects/layout.py: integer and `#field` keys into
tuples, structs and arrays index the compile-time Python list of the lowered value;
a value (dynamic) key into an array selects among its elements leaf by leaf; once the
walk reaches a tensor, the remaining keys (integer or value) index its leading
dimensions inside one `tensor.compute`.

Out-of-range value keys (DLVM: undefined behavior; the reference interpreter raises
UndefinedBehaviorError): generated code never reads or writes out of bounds. Each
value key is checked by a `tensor.index_check` (bounds-check builds raise IndexError
naming the op's location) and then *clamped* into `[0, n - 1]`, so without bounds
checking an out-of-range key reads (extract) or replaces (insert) the first or last
element. Keys into an empty dimension select nothing: extract yields zeros and insert
returns the container unchanged.

`insert` has value semantics: it builds a new value (a fresh compute result); its
container operand is never modified.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.ir import Attribute, Operation, SSAValue

from dlc.dialects import graph_memory as gm
from dlc.dialects import tensor_memory as tm
from dlc.dialects.graph import Symbols
from dlc.dialects.graph_types import ArrayType, NominalType, TensorType, format_type
from dlc.dialects.layout import I64, children
from dlc.lowering.graph_to_tensor.compute_builder import (
    BodyBuilder,
    Lowered,
    Splat,
    build_compute,
    lowered_type,
)
from dlc.lowering.graph_to_tensor.ops import UnsupportedOp

# A resolved key: a compile-time position, or a clamped i64 scalar tensor.
Key: TypeAlias = "int | SSAValue"


def _materialize(b: Builder, value: Lowered) -> SSAValue:
    if isinstance(value, SSAValue):
        return value
    assert isinstance(value, Splat)
    return build_compute(b, value.type, lambda s, i, _: s.read(value, i)).result


def _dynamic_key(b: Builder, value: Lowered, n: int, what: str) -> Key | None:
    """A value key into a dimension of `n` elements: checked (bounds-check builds), then
    clamped into [0, n - 1]; None when `n` is 0 (no element to select)."""
    t = lowered_type(value)
    if isinstance(value, Splat) and 0 <= int(value.value) < n:
        return int(value.value)
    if isinstance(value, Splat):
        b.insert(tm.IndexCheckOp(_materialize(b, Splat(int(value.value), I64)), n, what))
        return None if n == 0 else min(max(int(value.value), 0), n - 1)
    raw = _materialize(b, value)
    if t.dt != "i64":
        raw = build_compute(b, I64, lambda s, i, _: s.cast(s.read(value, []), t.dt, "i64")).result
    b.insert(tm.IndexCheckOp(raw, n, what))
    if n == 0:
        return None

    def clamp(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        low = s.emit(arith.MaxSIOp(s.read(raw, []), s.index(0)))
        return s.emit(arith.MinSIOp(low, s.index(n - 1)))

    return build_compute(b, I64, clamp).result


def _key_index(s: BodyBuilder, key: Key) -> SSAValue:
    return s.index(key) if isinstance(key, int) else s.read(key, [])


def _flatten(value: Lowered) -> list[Lowered]:
    from dlc.lowering.graph_to_tensor.memory import flatten

    return flatten(value)


def _unflatten(t: Attribute, items: list[Lowered], symbols: Symbols) -> Lowered:
    from dlc.lowering.graph_to_tensor.memory import unflatten

    return unflatten(t, iter(items), symbols)


def _same(values: Sequence[Lowered]) -> bool:
    first = values[0]
    return all(v is first or (isinstance(v, Splat) and v == first) for v in values)


def _select_leaf(b: Builder, key: SSAValue, cases: Sequence[Lowered]) -> Lowered:
    """cases[key] for one leaf position (key already clamped into range)."""
    if _same(cases):
        return cases[0]
    t = lowered_type(cases[0])

    def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        k = s.read(key, [])
        value = s.read(cases[-1], i)
        for position in range(len(cases) - 2, -1, -1):
            hit = s.cmpi("eq", k, s.index(position))
            value = s.select(hit, s.read(cases[position], i), value)
        return value

    return build_compute(b, t, body).result


def _select_element(
    b: Builder, key: SSAValue, items: list[Lowered], t: Attribute, symbols: Symbols
) -> Lowered:
    """The element `items[key]` of an array value (elements of type `t`)."""
    columns = list(zip(*(_flatten(item) for item in items), strict=True))
    return _unflatten(t, [_select_leaf(b, key, list(c)) for c in columns], symbols)


def _merge_element(
    b: Builder, key: SSAValue, position: int, new: Lowered, old: Lowered, t: Attribute, s: Symbols
) -> Lowered:
    """`new` where key == position, else `old` (leaf by leaf)."""
    leaves: list[Lowered] = []
    for n, o in zip(_flatten(new), _flatten(old), strict=True):
        if _same([n, o]):
            leaves.append(n)
            continue

        def body(
            sb: BodyBuilder,
            i: Sequence[SSAValue],
            _: Sequence[SSAValue],
            n: Lowered = n,
            o: Lowered = o,
        ) -> SSAValue:
            hit = sb.cmpi("eq", sb.read(key, []), sb.index(position))
            return sb.select(hit, sb.read(n, i), sb.read(o, i))

        leaves.append(build_compute(b, lowered_type(n), body).result)
    return _unflatten(t, leaves, s)


def _tensor_extract(b: Builder, src: Lowered, keys: list[Key], out: TensorType) -> Lowered:
    if isinstance(src, Splat):
        return Splat(src.value, out)
    return build_compute(
        b, out, lambda s, i, _: s.read(src, [*(_key_index(s, k) for k in keys), *i])
    ).result


def _tensor_insert(b: Builder, element: Lowered, container: Lowered, keys: list[Key]) -> Lowered:
    t = lowered_type(container)

    def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        hit = s.all_equal([], [])
        for index, key in zip(i, keys, strict=False):
            hit = s.emit(arith.AndIOp(hit, s.cmpi("eq", index, _key_index(s, key))))
        return s.select(hit, s.read(element, i[len(keys) :]), s.read(container, i))

    return build_compute(b, t, body).result


def _field_index(t: Attribute, key: int | str, symbols: Symbols) -> int:
    if isinstance(key, str):
        assert isinstance(t, NominalType)
        return [name for name, _ in symbols.structs[t.ident]].index(key)
    return key


def lower_key_op(b: Builder, op: Operation, args: list[Lowered], symbols: Symbols) -> Lowered:
    """`extract` (args: container, key values) or `insert` (args: element, container,
    key values) with any mix of integer, `#field` and value keys."""
    assert isinstance(op, gm.InsertOp | gm.ExtractOp)
    is_insert = isinstance(op, gm.InsertOp)
    opcode = "insert" if is_insert else "extract"
    container = args[1] if is_insert else args[0]
    dynamic = iter(args[2:] if is_insert else args[1:])
    t: Attribute = (op.dest if isinstance(op, gm.InsertOp) else op.operand).type
    keys = gm.keys_of(dict(op.properties))
    value = container
    # (aggregate items, static position or clamped key, element type) per list step
    path: list[tuple[list[Lowered], Key, Attribute]] = []
    while keys and isinstance(value, list):
        key = keys.pop(0)
        kids = children(t, symbols) or []
        if key is not None:
            index = _field_index(t, key, symbols)
            path.append((value, index, kids[index]))
            t, value = kids[index], value[index]
            continue
        if not isinstance(t, ArrayType):
            raise UnsupportedOp(f"{opcode} with a value key into {format_type(t)}")
        what = f"{opcode} index into {format_type(t)}"
        resolved = _dynamic_key(b, next(dynamic), len(value), what)
        if resolved is None:  # an empty array: nothing to select
            return container if is_insert else _zero(t.element, symbols)
        path.append((value, resolved, t.element))
        t = t.element
        if isinstance(resolved, int):
            value = value[resolved]
        elif is_insert and not keys:
            value = value[0]  # not read: the element is replaced
        else:
            value = _select_element(b, resolved, value, t, symbols)
    tensor_keys: list[Key] = []
    for key in keys:  # the rest index the leading dimensions of a tensor
        assert isinstance(t, TensorType) and not isinstance(value, list)
        if key is None:
            what = f"{opcode} index into {format_type(t)}"
            resolved = _dynamic_key(b, next(dynamic), t.dims[0], what)
            if resolved is None:  # an empty dimension: nothing to select
                return container if is_insert else _zero(_result_type(op), symbols)
        else:
            assert not isinstance(key, str)
            resolved = key
        tensor_keys.append(resolved)
        t = t.with_shape(t.dims[1:])
    if not is_insert:
        if not tensor_keys:
            return value
        return _tensor_extract(b, value, tensor_keys, _result_type(op))
    new: Lowered = args[0]
    if tensor_keys:
        new = _tensor_insert(b, new, value, tensor_keys)
    for items, at, element_type in reversed(path):
        if isinstance(at, int):
            updated = list(items)
            updated[at] = new
        else:
            updated = [
                _merge_element(b, at, k, new, item, element_type, symbols)
                for k, item in enumerate(items)
            ]
        new = updated
    return new


def _result_type(op: Operation) -> TensorType:
    t = op.results[0].type
    assert isinstance(t, TensorType)
    return t


def _zero(t: Attribute, symbols: Symbols) -> Lowered:
    from dlc.lowering.graph_to_tensor.memory import zero

    return zero(t, symbols)
