"""`superoptimize`: TASO-style search over generated, proven graph substitutions."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from dlc.analysis.levels import require_level
from dlc.passes.graph.pass_support import functions
from dlc.passes.graph.superopt.cost import node_cost
from dlc.passes.graph.superopt.emit import to_block
from dlc.passes.graph.superopt.graphs import from_block, windows
from dlc.passes.graph.superopt.library import Rule, applicable, read, shipped
from dlc.passes.graph.superopt.measure import CostTable
from dlc.passes.graph.superopt.search import patterns, search
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
    `costs=measured` prices products (`dot`, `convolve`) by dlc's own kernels measured on
    this machine and cached on disk per shape (`cost-table`, default in the compile
    cache directory, owner-only), `costs=table` only reads that table; both keep the
    analytical cost for everything else (`superopt/measure.py`).
    Statistics: substitutions applied, each rule that fired, cost before and after (ns),
    costs measured, user rules proven and not proven.
    """

    name = "superoptimize"

    alpha: float = 1.05
    budget: float = 5.0
    max_graphs: int = 2000
    window: int = 24
    rules: str = ""
    costs: str = "analytical"
    cost_table: str = ""

    def __post_init__(self) -> None:
        if not self.alpha >= 1.0:
            raise ValueError(f"superoptimize: alpha must be at least 1.0, got {self.alpha}")
        if not self.budget >= 0.0:
            raise ValueError(f"superoptimize: budget must be at least 0 s, got {self.budget}")
        if self.max_graphs < 1:
            raise ValueError(f"superoptimize: max-graphs must be at least 1, got {self.max_graphs}")
        if self.window < 1:
            raise ValueError(f"superoptimize: window must be at least 1, got {self.window}")
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
        return CostTable.load(path, measure=self.costs == "measured")

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
        pats = patterns(applicable(self.library()))
        if self.rules.endswith(".dl"):
            proven, unproven = user_library(self.rules)
            self.count("user rules proven", len(proven))
            self.count("user rules not proven", unproven)
        table = self.table()
        deadline = time.monotonic() + self.budget
        before = after = 0.0
        blocks = [b for func in functions(op) for b in func.body.blocks]
        work = [(b, w) for b in blocks for w in windows(b, self.window)]
        for index, (block, window) in enumerate(work):
            graph = from_block(block, window)
            if all(n.kind == "leaf" for n in graph.pool.nodes):
                continue
            # each window its share of what is left of the budget
            left = max(0.0, deadline - time.monotonic()) / (len(work) - index)
            cost = node_cost if table is None else table.node_cost(graph.pool.configs)
            result = search(graph, pats, cost, self.alpha, left, self.max_graphs)
            before += result.cost_before
            if result.cost_after >= result.cost_before:
                after += result.cost_before
                continue
            after += result.cost_after
            to_block(block, graph, result.roots)
            self.count("substitutions applied", len(result.fired))
            for name in result.fired:
                self.count(f"fired {name}")
        self.count("cost before (ns)", int(before))
        self.count("cost after (ns)", int(after))
        if table is not None:
            self.count("costs measured", table.measured)
            table.save()
