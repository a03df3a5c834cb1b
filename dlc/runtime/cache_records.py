"""The shape of the compile cache's JSON records (`dlc.runtime.cache`): checked field by
field before anything read from disk is used."""

from __future__ import annotations

from typing import Any, TypedDict, TypeGuard


class Metadata(TypedDict):
    """What a compiled module needs besides its machine code (JSON-able)."""

    native: list[str]  # graph functions compiled to native code
    externs: list[str]  # C symbols the code calls
    messages: list[str] | None  # status messages ("trap\t...", "bounds\t...", ...; abi.MESSAGES)
    arena_bytes: int  # the arena one call context needs
    unbounded: list[str]  # functions that may run unboundedly long (release the GIL)
    vars: dict[str, int]  # module variables: name -> byte size
    stats: dict[str, dict[str, int]]  # compile report per function
    passes: dict[str, dict[str, int]]  # statistics per pass


def data_layout(layout: Any, file_bytes: int) -> list[tuple[str, int]] | None:
    """The (symbol, size) of each data segment at the end of a `.o` file of
    `file_bytes`, from an authenticated record; None when malformed."""
    if not isinstance(layout, list):
        return None
    out: list[tuple[str, int]] = []
    for item in layout:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
            return None
        if not isinstance(item[1], int) or isinstance(item[1], bool) or item[1] <= 0:
            return None
        out.append((item[0], item[1]))
    if sum(size for _, size in out) > file_bytes or len({n for n, _ in out}) != len(out):
        return None
    return out


def _str_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _int_map(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and type(v) is int for k, v in value.items()
    )


class UnitMetadata(TypedDict):
    """The metadata of a unit's entry (`dlc.runtime.unit_cache`: object code alone)."""

    unit: int


UNIT_META: UnitMetadata = {"unit": 1}


def valid_meta(meta: object) -> TypeGuard[Metadata]:
    """Whether `meta` has exactly the shape dlc/api.py writes (see `metadata` there)."""
    if not isinstance(meta, dict):
        return False
    lists = ("native", "externs", "unbounded")
    if not all(_str_list(meta.get(name)) for name in lists):
        return False
    messages = meta.get("messages")
    if messages is not None and not _str_list(messages):
        return False
    for name in ("stats", "passes"):
        table = meta.get(name)
        if not isinstance(table, dict) or not all(_int_map(s) for s in table.values()):
            return False
    arena = meta.get("arena_bytes")
    return type(arena) is int and arena >= 0 and _int_map(meta.get("vars"))
