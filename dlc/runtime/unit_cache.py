"""Object code of a module's units, kept across compiles and models.

A large module is compiled in parts (`jit_parts.py`): each unit (an outlined run or
kernel with the internal functions only it reaches) is a part of its own; with the
compile cache on, its object code is stored in the compile cache under a key of its LLVM
IR text, the opt level, the machine it is built for (`jit.machine_settings`) and what
every cache key covers (dlc's sources, the LLVM and llvmlite versions, the host). A
later compile whose unit prints the same text (the same model with other weights,
which kernels read through their buffers, or another model sharing the layer) loads
that object instead of running LLVM on the unit again.

The key is the whole text LLVM would compile, so an object found is the object LLVM
would build: results are bit-identical with and without the cache. Entries are the
compile cache's (owner-only directory, HMAC-authenticated records, the same eviction),
with the metadata `{"unit": 1}`; they bypass the in-memory cache, which holds whole
modules. `DLC_CACHE=0` turns this off with the rest of the cache (the units are built all the
same: the object code does not depend on the cache).
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

from dlc.runtime import cache
from dlc.runtime.cache_records import UNIT_META

if TYPE_CHECKING:
    from collections.abc import Sequence

COUNTS = {"reused": 0, "built": 0}
"""Units served from the cache and units built, over this process (a report for the
compile-time benchmark and the tests; compiles in threads may interleave)."""


_SYMBOL = r'@(?:"[^"\n]*"|[-\w$.]+)'
_FUNCTIONS = re.compile(rf"^define [^@\n]*({_SYMBOL})\(", re.M)
_GLOBALS = re.compile(rf"^({_SYMBOL}) = (?:internal|private) ", re.M)
_USED = re.compile(_SYMBOL)
PREFIX = "dlc.unit."


def _renamed(text: str, names: dict[str, str]) -> str:
    """`text` with each symbol token in `names` (`@x` or `@"x"`) replaced, in one pass."""
    if not names:
        return text
    pattern = "|".join(map(re.escape, sorted(names, key=len, reverse=True)))
    return re.sub(f"(?:{pattern})(?![-\\w$.])", lambda m: names[m.group(0)], text)


def named_by_content(texts: list[str]) -> list[str]:
    """The parts `jit_parts` made (part 0, then one unit each: its outlined function
    defined first) with each unit's own symbols named after its content: the function
    `@dlc.unit.<hash>`, its other definitions `@dlc.unit.<hash>.<i>`, where the hash is
    that of the unit's text with those names numbered; references in part 0 and in
    other units follow. So a unit prints the same in every module that has it. A unit
    that uses another unit's function is named after it; the texts are returned as they
    are if units use each other in a circle."""
    out, names = named_units(texts)
    return [named_caller(texts[0], names), *out[1:]]


def named_units(texts: list[str]) -> tuple[list[str], dict[str, str]]:
    """`named_by_content` on the units (`texts[1:]`; `texts[0]` is returned as it is)
    and the names given: part 0 follows with `named_caller`, printed later."""
    defined = [_FUNCTIONS.findall(text) for text in texts[1:]]
    if not all(defined):
        return texts, {}
    namer = Namer([names[0] for names in defined])
    out = list(texts)
    for k, text in enumerate(texts[1:]):
        for i, named in namer.add(k, text):
            out[1 + i] = named
    for i, named in namer.finish():
        out[1 + i] = named
    return out, namer.done


class Namer:
    """`named_units` one unit at a time, as the units print (`jit_parts`): unit `k`
    (`add`) is named as soon as the units it calls are; `finish` gives those left
    (units calling each other in a circle), which keep their own names and call the
    others by theirs. `roots`: each unit's function as LLVM IR spells it (`@name`), the
    one it defines first. Each unit's text is the one `named_units` would give it."""

    def __init__(self, roots: list[str]) -> None:
        self.roots = set(roots)  # each unit's function (`@name`), in unit order
        self.order = roots
        self.done: dict[str, str] = {}  # root -> its name by content
        self.waiting: dict[int, tuple[str, set[str]]] = {}  # unit -> text, roots it calls

    def add(self, k: int, text: str) -> list[tuple[int, str]]:
        """Unit `k`'s `text`: the units named now (`k` and those that waited for it)."""
        root = self.order[k]
        uses = {t for t in _USED.findall(text) if t in self.roots} - {root}
        if _FUNCTIONS.findall(text)[:1] != [root]:  # not a unit as `jit_parts` makes them:
            uses.add(root)  # never named (nor those that call it)
        self.waiting[k] = (text, uses)
        named: list[tuple[int, str]] = []
        while ready := [i for i, (_, u) in self.waiting.items() if u <= self.done.keys()]:
            for i in ready:
                text, uses = self.waiting.pop(i)
                named.append((i, self._named(i, text, uses)))
        return named

    def _named(self, k: int, text: str, uses: set[str]) -> str:
        own = _FUNCTIONS.findall(text) + _GLOBALS.findall(text)
        local = {name: f"@{PREFIX}P{i}" for i, name in enumerate(own)}
        text = _renamed(text, {**{u: self.done[u] for u in uses}, **local})
        digest = hashlib.sha256(text.encode()).hexdigest()[:24]
        final = {
            f"@{PREFIX}P{i}": f"@{PREFIX}{digest}" + (f".{i}" if i else "")
            for i in range(len(local))
        }
        self.done[self.order[k]] = f"@{PREFIX}{digest}"
        return _declared_once(_renamed(text, final))

    def finish(self) -> list[tuple[int, str]]:
        """The units still waiting: their own names kept, the named units called by
        theirs."""
        left = sorted(self.waiting.items())
        self.waiting = {}
        return [
            (k, _declared_once(_renamed(text, {u: self.done[u] for u in uses if u in self.done})))
            for k, (text, uses) in left
        ]


def named_caller(text: str, names: dict[str, str]) -> str:
    """Part 0's `text` calling the units by the `names` `named_units` gave them."""
    text = _renamed(text, names)
    return _declared_once(text) if len(set(names.values())) < len(names) else text


def _declared_once(text: str) -> str:
    seen: set[str] = set()
    lines = []
    for line in text.split("\n"):
        if line.startswith("declare "):
            if line in seen:
                continue
            seen.add(line)
        lines.append(line)
    return "\n".join(lines)


def enabled() -> bool:
    return cache.enabled()


def key(text: str, machine: Sequence[object]) -> str:
    """The cache key of unit `text` built for `machine` (`jit.machine_settings`: the
    target and the opt level)."""
    return cache.key({"kind": "unit object", "machine": list(machine)}, text)


def lookup(unit_key: str) -> bytes | None:
    """The object code stored for `unit_key`, or None."""
    entry = cache.lookup(unit_key, memory=False)
    if entry is None or entry.meta != UNIT_META or entry.data or entry.handler:
        return None
    COUNTS["reused"] += 1
    return bytes(entry.obj)


def store(unit_key: str, obj: bytes) -> None:
    """Keep `obj`, the object code of the unit of `unit_key`."""
    COUNTS["built"] += 1
    cache.store(unit_key, cache.Entry(obj, UNIT_META), memory=False)
