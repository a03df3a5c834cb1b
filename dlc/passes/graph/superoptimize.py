"""`superoptimize`: TASO-style search over generated, proven graph substitutions."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from dlc.analysis.levels import require_level
from dlc.diagnostics import clone_located
from dlc.dialects.graph import FuncOp
from dlc.dialects.graph_symbolic import require_static
from dlc.passes.graph.pass_support import functions
from dlc.passes.graph.superopt.cost import node_cost
from dlc.passes.graph.superopt.emit import to_block
from dlc.passes.graph.superopt.graphs import BlockGraph, from_block, windows
from dlc.passes.graph.superopt.library import Rule, applicable, read, shipped
from dlc.passes.graph.superopt.measure import CostTable, NodeCost, measured_keys
from dlc.passes.graph.superopt.search import Costs, Pattern, patterns, search
from dlc.passes.graph.superopt.timed import timed
from dlc.passes.graph.superopt.user_rules import user_library
from dlc.passes.statistics import PassStatistics

COSTS = ("analytical", "measured", "table")


@dataclass(frozen=True)
class SuperoptimizePass(PassStatistics, ModulePass):
    """Rewrite each block into the cheapest equivalent graph the substitution search finds.

    Input: a graph-level module. In every block, the instructions the substitution
    terms cover (`add`/`multiply` of equal-shaped matrices or rank-4 tensors, `multiply`
    by a scalar, `max %x, 0`, rank-2 `dot`, `transpose`, two-operand `concatenate`, row
    slices that split in two, column splits written transpose·slice·transpose, 2-d
    `convolve` of one group and unpadded max pooling `reduceWindow`) become a
    hash-consed graph; everything else is left where it is and only reads it. The
    search (TASO's backtracking search with relaxation `alpha`, within `budget`
    seconds and `max-graphs` graphs per block) applies only the `proven` rules of the
    library (`dlc/passes/graph/superopt/rules.json`, or the JSON file `rules`; a `.dl`
    file of user rules adds those of its rules that `user_rules.check` proves, named
    `user.NAME`) under
    the analytical cost model of `superopt/cost.py`. A block with more than `window`
    (default 24) such instructions is searched in windows of that many consecutive ones,
    each a graph of its own whose inputs from outside are leaves (TASO splits large
    graphs likewise): in one graph of a long chain every rewrite rebuilds everything
    downstream of it, and a 500-instruction block yields ~20,000 successors per graph
    expanded (40 s each), so the search would see one graph within its budget; each
    window gets its share of what is left of `budget`. When it finds a cheaper graph the
    block is rewritten: surviving instructions are kept (moved right before their first
    reader), new ones are inserted there, unread ones erased; otherwise the block is
    left unchanged. Results are equal up to floating-point reassociation.
    `costs=measured` (what opt_level 3 runs when it compiles for this host) prices
    products (`dot`, `convolve`) by dlc's own kernels measured on this machine and
    cached on disk per shape and CPU (`cost-table`, default in the compile cache
    directory, owner-only), within `measure-budget` seconds of measuring per run;
    `costs=table` only reads that table; both keep the analytical cost for everything
    else and stand in a calibrated analytical cost for products they do not measure
    (`superopt/measure.py`). The guard: a function whose rewritten form does not cost
    at least `margin` (a fraction, default 0.03) less than its input, under the same
    model, is put back as it was; with `costs=measured`, a function small enough is
    instead compiled both ways and timed whole (`superopt/timed.py`).
    Statistics: substitutions applied, each rule that fired, functions rewritten or kept
    by the guard (and why), cost before and after (ns, whole functions), costs
    measured, calibrated stand-ins, the milliseconds spent measuring, and the
    user rules of a `.dl` rules file proven and not proven.
    """

    name = "superoptimize"

    alpha: float = 1.05
    budget: float = 5.0
    max_graphs: int = 2000
    window: int = 24
    rules: str = ""
    costs: str = "analytical"
    cost_table: str = ""
    margin: float = 0.03
    measure_budget: float = 5.0

    def __post_init__(self) -> None:
        if not self.alpha >= 1.0:
            raise ValueError(f"superoptimize: alpha must be at least 1.0, got {self.alpha}")
        if not self.budget >= 0.0:
            raise ValueError(f"superoptimize: budget must be at least 0 s, got {self.budget}")
        if self.max_graphs < 1:
            raise ValueError(f"superoptimize: max-graphs must be at least 1, got {self.max_graphs}")
        if self.window < 1:
            raise ValueError(f"superoptimize: window must be at least 1, got {self.window}")
        if not 0.0 <= self.margin < 1.0:
            raise ValueError(f"superoptimize: margin must be in [0, 1), got {self.margin}")
        if not self.measure_budget >= 0.0:
            raise ValueError(
                f"superoptimize: measure-budget must be at least 0 s, got {self.measure_budget}"
            )
        if self.costs not in COSTS:
            raise ValueError(
                f"superoptimize: costs must be one of {', '.join(COSTS)}, got '{self.costs}'"
            )
        self.library()  # an unreadable rules file is an option error, before any pass runs
        self.table()  # so is an untrusted or malformed cost table

    def table(self) -> CostTable | None:
        """The measured cost table, or None for the analytical model."""
        if self.costs == "analytical":
            return None
        path = Path(self.cost_table) if self.cost_table else None
        return CostTable.load(path, self.costs == "measured", self.measure_budget)

    def library(self) -> list[Rule]:
        """The rules of the `rules` file, or the shipped ones (and a `.dl` file's proven
        user rules)."""
        if not self.rules:
            return list(shipped())
        if self.rules.endswith(".dl"):
            proven, _ = user_library(self.rules)
            return [*shipped(), *proven]
        try:
            return read(Path(self.rules))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"superoptimize: cannot read rules file {self.rules}: {e}") from None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "graph", self.name)
        require_static(op, self.name)
        pats = patterns(applicable(self.library()))
        if self.rules.endswith(".dl"):
            proven, unproven = user_library(self.rules)
            self.count("user rules proven", len(proven))
            self.count("user rules not proven", unproven)
        table = self.table()
        start = time.monotonic()
        funcs = functions(op)
        work = [(b, w) for f in funcs for b in f.body.blocks for w in windows(b, self.window)]
        totals = [0.0, 0.0]
        done = 0
        for func in funcs:
            own = [(b, w) for b, w in work if b.parent_op() is func]
            before, after = self.optimize(func, own, pats, table, (start, done, len(work)))
            totals[0], totals[1], done = totals[0] + before, totals[1] + after, done + len(own)
        self.count("cost before (ns)", int(totals[0]))
        self.count("cost after (ns)", int(totals[1]))
        if table is not None:
            self.count("costs measured", table.measured)
            self.count("cost stand-ins (calibrated analytical)", table.stand_ins)
            self.count("measuring (ms)", round(table.seconds * 1000))
            if table.other_host:
                self.count("cost table of another CPU ignored")
            table.save()

    def optimize(
        self,
        func: FuncOp,
        work: list[tuple[Block, frozenset[Operation] | None]],
        pats: list[Pattern],
        table: CostTable | None,
        progress: tuple[float, int, int],
    ) -> tuple[float, float]:
        """Search `func`'s windows, then guard: (cost before, cost after) of the function."""
        start, done, total = progress
        original: FuncOp | None = None  # cloned before the first change
        before = [from_block(b) for b in func.body.blocks]
        if table is not None:
            table.prefetch(measured_keys(before))
        fired: list[str] = []
        for index, (block, window) in enumerate(work):
            graph = from_block(block, window)
            if all(n.kind == "leaf" for n in graph.pool.nodes):
                continue
            # each window its share of what is left of the budget (measuring excluded)
            spent = time.monotonic() - start - (table.seconds if table else 0.0)
            left = max(0.0, self.budget - spent) / (total - done - index)
            result = search(graph, pats, cost_of(graph, table), self.alpha, left, self.max_graphs)
            if result.cost_after < result.cost_before:
                original = original or clone_located(func)
                to_block(block, graph, result.roots)
                fired += result.fired
        if original is None:
            cost = price(before, table)
            return cost, cost
        return self.guard(func, original, before, table, fired)

    def guard(
        self,
        func: FuncOp,
        original: FuncOp,
        before: list[BlockGraph],
        table: CostTable | None,
        fired: list[str],
    ) -> tuple[float, float]:
        """Keep the rewritten `func` only if it costs `margin` less than `original` (the
        graphs `before`); (cost before, cost after) of the function."""
        after = [from_block(b) for b in func.body.blocks]
        measured = table is not None and table.measure
        timing = self.timed(func, original, price(before, table), table) if measured else None
        if timing is None:
            if table is not None:
                table.settle(measured_keys(before), measured_keys(after))
            cost_before, cost_after = price(before, table), price(after, table)
        else:
            cost_before, cost_after = timing
        if cost_after > (1.0 - self.margin) * cost_before:
            self.count(f"guard: functions kept, rewrite not {self.margin:.0%} cheaper")
            Rewriter.insert_op(original, InsertPoint.before(func))
            func.detach()
            func.erase()
            return cost_before, cost_before
        self.count(f"guard: functions rewritten, at least {self.margin:.0%} cheaper")
        self.count("substitutions applied", len(fired))
        for name in fired:
            self.count(f"fired {name}")
        return cost_before, cost_after

    def timed(
        self, func: FuncOp, original: FuncOp, estimate: float, table: CostTable | None
    ) -> tuple[float, float] | None:
        """The guard's whole-function timing of `original` against the rewritten `func`
        (`superopt/timed.py`, kept in `table`), or None when the per-op prices decide."""
        module = func.parent_op()
        if not isinstance(module, ModuleOp):
            return None
        known = len(table.functions) if table is not None else 0
        try:
            timing = timed(module, original, func, estimate, table)
        except Exception as e:  # our bug: never refuse the program over it
            self.count(f"guard: whole-function timing failed ({type(e).__name__})")
            return None
        if timing is not None and table is not None and len(table.functions) == known:
            self.count("guard: functions' whole timings reused from the cost table")
        elif timing is not None:
            self.count("guard: functions timed whole (opt 2, alternating rounds)")
        return timing


def cost_of(graph: BlockGraph, table: CostTable | None) -> NodeCost:
    return node_cost if table is None else table.node_cost(graph.pool.configs)


def price(graphs: list[BlockGraph], table: CostTable | None) -> float:
    """A function's cost: the cost of each of its blocks' graphs (all term ops)."""
    return sum(Costs(g.pool, cost_of(g, table))(g.roots) for g in graphs)
