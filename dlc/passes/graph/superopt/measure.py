"""Measured per-op costs for the search: `superoptimize{costs=measured}` (the default of
opt_level 3 when compiling for this host) or `costs=table`.

`dot` and 2-d `convolve` of f32 cost what dlc's own compiled kernel for that op and
shape takes on this machine (one thread, median call), kept in an owner-only JSON table
keyed by the host CPU (`cost-table=PATH`). The analytical model (`cost.py`) prices
what is not measured: element-wise ops and moves always (they fuse into their readers,
a kernel of their own would misprice them), and a product whose measurement would cost
too much (its analytical estimate above `MAX_KERNEL_NS`, or the compile's measuring
budget spent, or `costs=table` and a shape the table lacks) at its analytical cost
times the median measured/analytical ratio of the table's products of its kind, so
that stand-ins and measurements compare. The runtime provides the timing
(`dlc.superopt_costs.install()`). Details: docs/design/superoptimizer.md.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol

from dlc.passes.graph.superopt.cost import node_cost
from dlc.passes.graph.superopt.graphs import BlockGraph, Config, Node

Shapes = tuple[tuple[int, ...], ...]
NodeCost = Callable[[Node, Shapes], float]

MAX_KERNEL_NS = 20e6
"""Products estimated above 20 ms are not measured: five timed rounds and a compile
would cost more than a second of every compile that meets a new shape."""


class Backend(Protocol):
    """What measured costs need from the runtime (`dlc.superopt_costs`)."""

    def default_path(self) -> Path:
        """The table of this host in the compile cache directory."""
        ...

    def host(self) -> dict[str, str]:
        """The CPU whose costs the table holds (its name and features)."""
        ...

    def read(self, path: Path) -> bytes | None:
        """The file's bytes (None when missing); OSError when it or its directory is
        not the current user's alone."""
        ...

    def write(self, path: Path, data: bytes) -> None:
        """Replace the file atomically (0600, in 0700 directories it creates)."""
        ...

    def measure(self, keys: Sequence[str]) -> list[float]:
        """Median nanoseconds of a call of the kernel (`kernel_text`) of each of `keys`
        on random inputs, timed in alternating rounds."""
        ...


BACKEND: list[Backend] = []  # the installed backend (dlc.superopt_costs.install)
INSTALLERS: list[Callable[[], None]] = []  # installs it when first needed (dlc-opt)


def provide(runtime: Backend) -> None:
    BACKEND[:] = [runtime]


def provide_lazily(install: Callable[[], None]) -> None:
    """Call `install` (which calls `provide`) when the backend is first needed, so a
    tool that may never measure (dlc-opt) does not import the runtime side up front."""
    INSTALLERS[:] = [install]


def installed() -> Backend | None:
    """The backend (installing a lazily provided one now), or None without one."""
    if not BACKEND and INSTALLERS:
        INSTALLERS.pop()()
    return BACKEND[0] if BACKEND else None


def backend() -> Backend:
    runtime = installed()
    if runtime is None:
        raise ValueError(
            "superoptimize: measured costs need dlc's runtime: call "
            "dlc.superopt_costs.install() first (dlc.compile and dlc-opt do)"
        )
    return runtime


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


def parse_key(key: str) -> tuple[str, list[list[int]], tuple[int, ...]]:
    """(kind, [operand shapes..., strides, padding], result shape) of an `op_key`."""
    kind, *parts = key.split()
    nums = [[int(d) for d in p.lstrip("sp").split("x")] for p in parts]
    if kind == "matmul":
        (m, _), (_, n) = nums
        return kind, nums, (m, n)
    (nb, _, h, w), (o, _, r, s), (sh, sw), (pt, pb, pl, pr) = nums
    return kind, nums, (nb, o, (h + pt + pb - r) // sh + 1, (w + pl + pr - s) // sw + 1)


def analytical(key: str) -> float:
    """The analytical model's nanoseconds for the op of `key`."""
    kind, nums, out = parse_key(key)
    node = Node(kind, (), 0, out, "f32")
    return node_cost(node, (tuple(nums[0]), tuple(nums[1])))


def kernel_text(key: str) -> str:
    """A DLVM module whose function @op computes the one op of `key`."""
    kind, nums, out = parse_key(key)
    ta, tb = (f"<{' x '.join(map(str, s))} x f32>" for s in nums[:2])
    tout = f"<{' x '.join(map(str, out))} x f32>"
    if kind == "matmul":
        body = f"dot %a: {ta}, %b: {tb}"
    else:
        (sh, sw), (pt, pb, pl, pr) = nums[2], nums[3]
        body = f"convolve %a: {ta} kernel %b: {tb} strides {sh}, {sw}"
        body += f" padding ({pt}, {pb}), ({pl}, {pr})"
    return (
        f'module "cost"\nstage raw\n\nfunc @op: ({ta}, {tb}) -> {tout} {{\n'
        f"'entry(%a: {ta}, %b: {tb}):\n    %y = {body}\n    return %y: {tout}\n}}\n"
    )


class CostTable:
    """Measured costs by `op_key` for one host, read from and saved to a trusted file."""

    def __init__(
        self, path: Path, measure: bool, entries: dict[str, float], budget_s: float = 5.0
    ) -> None:
        self.path, self.measure, self.budget_s = path, measure, budget_s
        self.entries = dict(entries)
        self.functions: dict[str, tuple[float, float]] = {}  # the guard's timings
        self.changed = False
        self.fresh: set[str] = set()  # keys measured since loading
        self.seconds = 0.0  # spent measuring since loading
        self.stand_ins = 0  # prices the calibrated analytical model gave instead
        self.other_host = False  # the file held another CPU's costs (ignored)

    @property
    def measured(self) -> int:
        return len(self.fresh)

    @classmethod
    def load(cls, path: Path | None, measure: bool, budget_s: float = 5.0) -> CostTable:
        """The table at `path` (default: the backend's; empty when missing or of another
        CPU). Raises ValueError when it or its directory is untrusted or it is not a table."""
        path = path or backend().default_path()
        try:
            data = backend().read(path)
            table = {"host": backend().host(), "costs": {}} if data is None else json.loads(data)
        except (OSError, ValueError) as e:
            raise ValueError(f"superoptimize: cost table {path}: {e}") from None
        entries = table.get("costs") if isinstance(table, dict) else None
        if not isinstance(entries, dict) or not all(
            isinstance(k, str) and isinstance(v, int | float) and v > 0 for k, v in entries.items()
        ):
            raise ValueError(
                f'superoptimize: cost table {path}: expected {{"host": {{...}}, '
                f'"costs": {{key: ns}}}}'
            )
        assert isinstance(table, dict)
        functions = function_timings(table.get("functions", {}), path)
        mine = table.get("host") == backend().host()
        out = cls(
            path, measure, {k: float(v) for k, v in entries.items()} if mine else {}, budget_s
        )
        out.functions = functions if mine else {}
        out.other_host = not mine
        return out

    def record_function(self, key: str, times: tuple[float, float]) -> None:
        """Keep the guard's timing of a function and its rewrite (`timed.py`)."""
        self.functions[key] = times
        self.changed = True

    def scale(self, kind: str) -> float:
        """Median measured / analytical ratio of the table's `kind` products (1 if none)."""
        ratios = [v / analytical(k) for k, v in self.entries.items() if k.startswith(kind)]
        return statistics.median(ratios) if ratios else 1.0

    def measurable(self, key: str) -> bool:
        return self.measure and analytical(key) <= MAX_KERNEL_NS

    def take(self, keys: Iterable[str]) -> None:
        """Measure `keys` together (alternating rounds) and record them."""
        keys = sorted(set(keys))
        if not keys:
            return
        start = time.monotonic()
        times = backend().measure(keys)
        self.seconds += time.monotonic() - start
        self.entries.update(zip(keys, times, strict=True))
        self.fresh.update(keys)
        self.changed = True

    def price(self, key: str) -> float:
        """The measured cost of `key`, measured now if the budget allows, else the
        calibrated analytical stand-in."""
        if key not in self.entries and self.measurable(key) and self.seconds < self.budget_s:
            self.take([key])
        if key in self.entries:
            return self.entries[key]
        self.stand_ins += 1
        return analytical(key) * self.scale(key.split()[0])

    def node_cost(self, configs: Sequence[Config]) -> NodeCost:
        """The search's cost function for a block with convolution `configs`."""

        def cost(node: Node, shapes: Shapes) -> float:
            key = op_key(node, shapes, configs)
            return node_cost(node, shapes) if key is None else self.price(key)

        return cost

    def prefetch(self, keys: Iterable[str]) -> None:
        """Measure the missing ones of `keys` together, within the budget."""
        if self.seconds < self.budget_s:
            self.take(k for k in keys if k not in self.entries and self.measurable(k))

    def settle(self, before: set[str], after: set[str]) -> None:
        """Before the guard compares two graphs: when a key on which they differ was
        measured in this compile, time all the keys on which they differ again,
        together, so the comparison is between kernels timed under the same load (while
        the time spent measuring is under twice the budget)."""
        differ = before ^ after
        if self.measure and differ & self.fresh and self.seconds < 2 * self.budget_s:
            self.take(k for k in differ if self.measurable(k))

    def save(self) -> None:
        """Write the table through the backend if it changed."""
        if self.changed:
            table: dict[str, object] = {
                "host": backend().host(),
                "costs": dict(sorted(self.entries.items())),
            }
            if self.functions:
                table["functions"] = {k: list(v) for k, v in sorted(self.functions.items())}
            backend().write(self.path, (json.dumps(table, indent=1) + "\n").encode())
            self.changed = False


def function_timings(data: object, path: Path) -> dict[str, tuple[float, float]]:
    """The guard's whole-function timings of a table file (`"functions": {key: [ns
    before, ns after]}`); ValueError when malformed."""
    if isinstance(data, dict) and all(
        isinstance(k, str)
        and isinstance(v, list)
        and len(v) == 2
        and all(isinstance(t, int | float) and t > 0 for t in v)
        for k, v in data.items()
    ):
        return {k: (float(v[0]), float(v[1])) for k, v in data.items()}
    raise ValueError(f'superoptimize: cost table {path}: expected "functions": {{key: [ns, ns]}}')


def measured_keys(graphs: list[BlockGraph]) -> set[str]:
    """The measured-cost keys of the ops the graphs compute (not those that fold)."""
    out: set[str] = set()
    for g in graphs:
        for n in g.pool.topo(g.roots):
            node = g.pool.nodes[n]
            shapes = tuple(g.pool.nodes[a].shape for a in node.args)
            key = None if g.pool.constant[n] else op_key(node, shapes, g.pool.configs)
            out |= {key} if key else set()
    return out
