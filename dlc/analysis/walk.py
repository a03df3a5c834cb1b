"""`walk_ops`: every op nested in an op, as a list, without xDSL's nested generators.

`Operation.walk` yields through one generator per level of nesting (op, region,
block), so each op costs a chain of resumptions, and the passes that check a module's
level or its call graph walk it once or more each. A stack visits the same ops in the
same order in a third of the time (measured: docs/performance.md).
"""

from __future__ import annotations

from xdsl.ir import Operation


def walk_ops(op: Operation) -> list[Operation]:
    """`op` and the ops nested in it, in `Operation.walk`'s order (pre-order: an op,
    then its regions' blocks' ops in order)."""
    found: list[Operation] = []
    stack = [op]
    while stack:
        current = stack.pop()
        found.append(current)
        if current.regions:
            inner = [o for region in current.regions for block in region.blocks for o in block.ops]
            inner.reverse()
            stack.extend(inner)
    return found


def kind_of(obj: object, classes: tuple[type, ...], memo: dict[type, int]) -> int:
    """1 + the index of the first of `classes` `obj` is an instance of, 0 for none;
    remembered by `obj`'s class in `memo`. xDSL's op and attribute classes are ABCs:
    an `isinstance` against one that fails runs a Python-level check (about 0.6 µs),
    and the walks over every op of a module ask it tens of thousands of times."""
    kind = memo.get(type(obj))
    if kind is None:
        found = (i for i, c in enumerate(classes, start=1) if isinstance(obj, c))
        kind = memo[type(obj)] = next(found, 0)
    return kind
