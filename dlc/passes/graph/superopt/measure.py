"""Measured per-op costs for the search: `superoptimize{costs=measured}` or `costs=table`.

`dot` and 2-d `convolve` of f32 cost what dlc's own compiled kernel for that op and
shape takes on this machine (one thread, median call), kept in an owner-only JSON table
(`cost-table=PATH`); other ops keep their analytical cost. The runtime provides the
timing (`dlc.superopt_costs.install()`). Details: docs/design/superoptimizer.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from dlc.passes.graph.superopt.cost import node_cost
from dlc.passes.graph.superopt.graphs import Config, Node

Shapes = tuple[tuple[int, ...], ...]
NodeCost = Callable[[Node, Shapes], float]


class Backend(Protocol):
    """What measured costs need from the runtime (`dlc.superopt_costs`)."""

    def default_path(self) -> Path:
        """The table of this host in the compile cache directory."""
        ...

    def read(self, path: Path) -> bytes | None:
        """The file's bytes (None when missing); OSError when it or its directory is
        not the current user's alone."""
        ...

    def write(self, path: Path, data: bytes) -> None:
        """Replace the file atomically (0600, in 0700 directories it creates)."""
        ...

    def measure(self, text: str) -> float:
        """Median nanoseconds of a call of @op of the DLVM module `text` (random inputs)."""
        ...


BACKEND: list[Backend] = []  # the installed backend (dlc.superopt_costs.install)


def provide(runtime: Backend) -> None:
    BACKEND[:] = [runtime]


def backend() -> Backend:
    if not BACKEND:
        raise ValueError(
            "superoptimize: measured costs need dlc's runtime: call "
            "dlc.superopt_costs.install() first (dlc-opt does)"
        )
    return BACKEND[0]


def dims(shape: Sequence[int]) -> str:
    return "x".join(map(str, shape))


def op_key(node: Node, shapes: Shapes, configs: Sequence[Config]) -> str | None:
    """The table key of `node` (`matmul 4x6 6x5`, `conv 1x3x8x8 4x3x3x3 s1x1 p1x1x1x1`:
    strides, then padding top, bottom, left, right), or None when it is not measured."""
    if node.dtype != "f32":
        return None
    if node.kind == "matmul":
        return f"matmul {dims(shapes[0])} {dims(shapes[1])}"
    if node.kind != "conv":
        return None
    _, strides, padding, left, right = configs[node.attr]
    if any(d != 1 for d in (*left, *right)):
        return None
    return f"conv {dims(shapes[0])} {dims(shapes[1])} s{dims(strides)} p{dims(padding)}"


def kernel_text(key: str) -> str:
    """A DLVM module whose function @op computes the one op of `key`."""
    kind, a, b, *config = key.split()
    ta, tb = (f"<{s.replace('x', ' x ')} x f32>" for s in (a, b))
    if kind == "matmul":
        (m, _), (_, n) = a.split("x"), b.split("x")
        out, body = f"<{m} x {n} x f32>", f"dot %a: {ta}, %b: {tb}"
    else:
        strides, pads = config[0][1:].split("x"), config[1][1:].split("x")
        (nb, _, h, w), (o, _, r, s) = (list(map(int, t.split("x"))) for t in (a, b))
        sh, sw = map(int, strides)
        pt, pb, pl, pr = map(int, pads)
        oh, ow = (h + pt + pb - r) // sh + 1, (w + pl + pr - s) // sw + 1
        out = f"<{nb} x {o} x {oh} x {ow} x f32>"
        body = f"convolve %a: {ta} kernel %b: {tb} strides {sh}, {sw}"
        body += f" padding ({pt}, {pb}), ({pl}, {pr})"
    return (
        f'module "cost"\nstage raw\n\nfunc @op: ({ta}, {tb}) -> {out} {{\n'
        f"'entry(%a: {ta}, %b: {tb}):\n    %y = {body}\n    return %y: {out}\n}}\n"
    )


class CostTable:
    """Measured costs by `op_key`, read from and saved to a trusted file."""

    def __init__(self, path: Path, measure: bool, entries: dict[str, float] | None = None):
        self.path, self.measure = path, measure
        self.entries: dict[str, float] = dict(entries or {})
        self.changed = False
        self.measured = 0  # ops measured since loading

    @classmethod
    def load(cls, path: Path | None, measure: bool) -> CostTable:
        """The table at `path` (default: the backend's; empty when missing). Raises
        ValueError when it or its directory is untrusted or it is not a table."""
        path = path or backend().default_path()
        try:
            data = backend().read(path)
            table = {"costs": {}} if data is None else json.loads(data)
        except (OSError, ValueError) as e:
            raise ValueError(f"superoptimize: cost table {path}: {e}") from None
        entries = table.get("costs") if isinstance(table, dict) else None
        if not isinstance(entries, dict) or not all(
            isinstance(k, str) and isinstance(v, int | float) and v > 0 for k, v in entries.items()
        ):
            raise ValueError(f'superoptimize: cost table {path}: expected {{"costs": {{key: ns}}}}')
        return cls(path, measure, {k: float(v) for k, v in entries.items()})

    def node_cost(self, configs: Sequence[Config]) -> NodeCost:
        """The search's cost function for a block with convolution `configs`."""

        def cost(node: Node, shapes: Shapes) -> float:
            key = op_key(node, shapes, configs)
            if key is None:
                return node_cost(node, shapes)
            if key not in self.entries:
                if not self.measure:
                    return node_cost(node, shapes)
                self.entries[key] = backend().measure(kernel_text(key))
                self.changed, self.measured = True, self.measured + 1
            return self.entries[key]

        return cost

    def save(self) -> None:
        """Write the table through the backend if it changed."""
        if self.changed:
            data = json.dumps({"costs": dict(sorted(self.entries.items()))}, indent=1) + "\n"
            backend().write(self.path, data.encode())
            self.changed = False
