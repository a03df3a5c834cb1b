"""Tuning records for the `schedule` pass: workload keys and the tuning database.

A workload key hashes what a `tensor.compute` computes (not names, position or schedule);
the database is a JSON lines file of `Record`s, of which `TuningDatabase.load` keeps the
fastest `ok` one per (key, target) of this dlc version; bad lines are warnings, never
errors. Record fields and formats: docs/design/tuner.md.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from xdsl.ir import Attribute, Operation, SSAValue

from dlc.dialects import tensor
from dlc.dialects.graph_types import TensorType, format_type
from dlc.dialects.tensor_groups import uses_of
from dlc.version import __version__

RECORD_FORMAT = 2
"""The format of the records this dlc writes (module docstring)."""

DEFAULT_SCHEDULE = "default"
"""The `schedule` of a record that measured the default policy's schedule: when it is
the fastest record of its key, the nest keeps the policy's schedule."""


class TuningWarning(UserWarning):
    """A tuning record that is not used: a corrupt or stale line, a nest without a
    record, a record that does not fit its nest."""


def workload_key(op: tensor.ComputeOp) -> str:
    """The stable key of what `op` computes (module docstring): 16 hex digits."""
    return hashlib.sha256(_normal_form(op).encode()).hexdigest()[:16]


def _normal_form(op: tensor.ComputeOp) -> str:
    """The nest's structure as text, with every value numbered in definition order."""
    names: dict[SSAValue, str] = {v: f"in{i}" for i, v in enumerate(op.inputs)}
    block = op.body.block
    names.update({a: f"i{n}" for n, a in enumerate(block.args)})
    lines = [
        "in: " + ", ".join(format_type(v.type) for v in op.inputs),
        f"out: {format_type(op.result.type)}",
        f"reduce: {list(op.reduction_extents)} {_text(op.combinator)} {_text(op.init_value)}",
        f"init: {format_type(op.init.type) if op.init is not None else '-'}",
    ]
    for inner in block.ops:
        for n, result in enumerate(inner.results):
            names[result] = f"v{len(names)}.{n}"
        operands = ", ".join(names.get(v, "?") for v in inner.operands)
        props = ", ".join(f"{k}={_text(v)}" for k, v in sorted(inner.properties.items()))
        attrs = ", ".join(f"{k}={_text(v)}" for k, v in sorted(inner.attributes.items()))
        types = ", ".join(str(r.type) for r in inner.results)
        lines.append(f"{inner.name}({operands}) {{{props}}} {{{attrs}}} -> {types}")
    return "\n".join(lines)


def group_key(members: list[tensor.ComputeOp]) -> str:
    """The stable key of a fused group (module docstring): 16 hex digits."""
    position: dict[SSAValue, int] = {m.result: n for n, m in enumerate(members)}
    outside: dict[SSAValue, int] = {}

    def name(value: SSAValue) -> str:
        if value in position:
            return f"m{position[value]}"
        return f"x{outside.setdefault(value, len(outside))}"

    parts = ["group"]
    for m in members:
        uses = uses_of(m.result)
        escapes = uses.blocked or any(c.result not in position for c in uses.reads)
        wiring = ", ".join(name(v) for v in m.inputs)
        init = name(m.init) if m.init is not None else "-"
        parts.append(f"{_normal_form(m)}\nwiring: {wiring}; init {init}; escapes {escapes}")
    return hashlib.sha256("\n--\n".join(parts).encode()).hexdigest()[:16]


def _text(attr: Attribute | None) -> str:
    return "-" if attr is None else str(attr)


def nest_summary(op: tensor.ComputeOp) -> str:
    """A short human description: `dot 64x256 r784 f32`, `map 64x256 f32`."""
    t = op.result.type
    assert isinstance(t, TensorType)
    shape = "x".join(map(str, t.dims)) or "scalar"
    reduction = " r" + "x".join(map(str, op.reduction_extents)) if op.reduction_extents else ""
    kind = "map"
    if op.combinator is not None:
        body = [o.name for o in op.body.block.ops]
        products = "arith.mulf" in body or "arith.muli" in body
        kind = "dot" if products and len(op.reduction_extents) == 1 else "reduce"
        kind = "conv" if products and len(op.reduction_extents) > 1 else kind
    return f"{kind} {shape}{reduction} {t.dt}"


def located(op: Operation, message: str) -> str:
    """`FILE:LINE:COL: warning: message` at `op`'s source location (when it has one),
    with the source line and a caret, like an error diagnostic."""
    from dlc.diagnostics import DiagnosticError, get_loc

    text = DiagnosticError(message, get_loc(op)).format()
    return text.replace(": error: ", ": warning: ", 1).removeprefix("error: ")


@dataclass(frozen=True)
class Record:
    """One measured schedule of one workload (module docstring)."""

    key: str
    target: str
    schedule: str
    seconds: float | None
    status: str = "ok"  # or "failed: <why>" (crash, timeout, wrong result, compile error)
    nest: str = ""
    version: str = __version__
    time: float = 0.0
    search: str = ""
    features: list[float] = field(default_factory=list)
    format: int = RECORD_FORMAT

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def from_json(line: str) -> Record:
        """The record on one database line; ValueError if it is not one."""
        data = json.loads(line)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        for name, kind in (("key", str), ("target", str), ("schedule", str), ("status", str)):
            if not isinstance(data.get(name), kind):
                raise ValueError(f"field {name!r} missing or not a {kind.__name__}")
        seconds = data.get("seconds")
        if seconds is not None and (not isinstance(seconds, int | float) or seconds <= 0):
            raise ValueError("field 'seconds' is not a positive number")
        features = data.get("features", [])
        if not isinstance(features, list) or not all(isinstance(f, int | float) for f in features):
            raise ValueError("field 'features' is not a list of numbers")
        form = data.setdefault("format", 1)  # format 1 wrote no field
        if isinstance(form, bool) or not isinstance(form, int) or form < 1:
            raise ValueError("field 'format' is not a positive int")
        known = set(Record.__dataclass_fields__)
        return Record(**{k: v for k, v in data.items() if k in known})

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.seconds is not None


def read_records(path: str | Path) -> Iterator[tuple[int, Record | str]]:
    """(line number, record or why the line is not one) for every non-blank line of a
    database file; a missing file has no lines."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield number, Record.from_json(line)
        except (ValueError, TypeError) as err:  # json.JSONDecodeError is a ValueError
            yield number, str(err)


def append_record(path: str | Path, record: Record) -> None:
    """Append `record` as one line (one write call: concurrent appenders do not mix)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(record.to_json() + "\n")


@dataclass
class TuningDatabase:
    """The usable records of a database file: the best per (key, target) of this dlc
    version, and the keys that exist only in records of other dlc versions."""

    path: str
    best: dict[tuple[str, str], Record] = field(default_factory=dict)
    other_versions: dict[str, set[str]] = field(default_factory=dict)
    all_records: list[Record] = field(default_factory=list)

    @staticmethod
    def load(path: str | Path, warn: bool = True) -> TuningDatabase:
        """Read `path` (module docstring); corrupt and stale lines are a warning each
        kind (with the first line number), never an error. An unreadable file is one
        warning and an empty database."""
        db = TuningDatabase(str(path))
        corrupt: list[tuple[int, str]] = []
        stale: list[int] = []
        newer: list[int] = []
        try:
            lines = list(read_records(path))
        except OSError as err:
            _warn(
                warn,
                f"{path}: warning: cannot read the tuning database ({err.strerror or err}): ignored",
            )
            return db
        for number, entry in lines:
            if isinstance(entry, str):
                corrupt.append((number, entry))
            elif entry.format > RECORD_FORMAT:
                newer.append(number)
            elif entry.version != __version__:
                stale.append(number)
                db.other_versions.setdefault(entry.key, set()).add(entry.version)
            else:
                db.add(entry)
        _report_skipped(str(path), warn, corrupt, newer, stale)
        return db

    def add(self, record: Record) -> None:
        """Take `record` into account (the fastest ok record per key and target wins)."""
        self.all_records.append(record)
        if not record.ok:
            return
        slot = (record.key, record.target)
        old = self.best.get(slot)
        if old is None or record.seconds < old.seconds:  # type: ignore[operator]
            self.best[slot] = record

    def lookup(self, key: str, target: str) -> tuple[Record | None, str]:
        """The best record of `key` on `target`, or None and why there is none."""
        record = self.best.get((key, target))
        if record is not None:
            return record, ""
        targets = sorted({t for k, t in self.best if k == key})
        if targets:
            return None, f"records only for target(s) {', '.join(targets)}, not {target}"
        if key in self.other_versions:
            versions = ", ".join(sorted(self.other_versions[key]))
            return None, f"records only from dlc {versions}, not {__version__}"
        return None, f"key {key} not in {self.path}"


def _report_skipped(
    path: str, warn: bool, corrupt: list[tuple[int, str]], newer: list[int], stale: list[int]
) -> None:
    """One warning per kind of line `TuningDatabase.load` skipped (the first's number)."""
    if corrupt:
        number, why = corrupt[0]
        _warn(
            warn,
            f"{path}:{number}: warning: corrupt tuning record ignored ({why})"
            + (f", and {len(corrupt) - 1} more corrupt lines" if len(corrupt) > 1 else ""),
        )
    if newer:
        _warn(
            warn,
            f"{path}:{newer[0]}: warning: {len(newer)} tuning record(s) of a newer record "
            f"format ignored (this dlc reads format {RECORD_FORMAT} and older)",
        )
    if stale:
        _warn(
            warn,
            f"{path}:{stale[0]}: warning: {len(stale)} tuning record(s) of another dlc version "
            f"ignored (this is {__version__}); tune again",
        )


def _warn(enabled: bool, message: str) -> None:
    if enabled:
        warnings.warn(message, TuningWarning, stacklevel=3)
