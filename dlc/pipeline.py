"""The one place that names dlc's pipelines: the pass registry, the levels and their
lowering steps, and the passes each optimization level runs.

`dlc.compile`, `dlc-run` and `dlc-opt -t llvm|asm` all lower through `steps(options)`,
so the LLVM IR that dlc-opt prints is the IR the API compiles (the API only adds its
Python entry wrappers). The pipeline, level by level, for `opt_level >= 1`:

| level  | passes (before lowering the level)                          | lowering               |
|--------|-------------------------------------------------------------|------------------------|
| graph  | differentiate, decompose-composites, then the graph optimizer (`GRAPH_OPTIMIZER`; at opt_level 3 also `SUPEROPTIMIZER`) | lower-graph-to-tensor  |
| tensor | unfold-convolutions (im2col where it pays), fuse (inline producers), schedule (loop nests, groups, tiles) | lower-tensor-to-loop |
| loop   | plan-memory, math-approx                                    | lower-loop-to-llvm     |
| llvm   | LLVM's own O-level pipeline (`dlc.runtime.jit`)             |                        |

`opt_level=0` only differentiates, decomposes composites and lowers (plus `plan-memory` and `math-approx`
when asked), so its results are bit-identical to the reference interpreter's.
`fuse`, `plan_memory` and `fast_math_functions` turn single passes off.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from dlc.analysis.levels import LEVELS, LOWERINGS
from dlc.options import (  # noqa: F401 -- re-exported: the pipeline's options live there
    Options,
    check_fma,
    check_tuning_db,
    tuning_fingerprint,
)

GRAPH_OPTIMIZER = (
    "inline{max-ops=32}",
    "canonicalize",
    "fold-constants",
    "cse",
    "matrix-chain-reorder",
    "canonicalize",
    "cse",
    "dce",
)
"""The graph-level optimizer run at opt_level >= 1, after differentiation: inline
small non-recursive callees, algebraic simplification, constant folding, common
subexpressions, cheapest matrix-chain order, then a second round on what that exposed."""

_PASSES: dict[str, str] = {
    "verify": "dlc.passes.verify:VerifyPass",
    "differentiate": "dlc.passes.graph.differentiate:DifferentiatePass",
    "decompose-composites": "dlc.passes.graph.decompose_composites:DecomposeCompositesPass",
    "canonicalize": "dlc.passes.graph.canonicalize:CanonicalizePass",
    "fold-constants": "dlc.passes.graph.fold_constants:FoldConstantsPass",
    "cse": "dlc.passes.graph.cse:CSEPass",
    "dce": "dlc.passes.graph.dce:DCEPass",
    "inline": "dlc.passes.graph.inline:InlinePass",
    "cfg-simplify": "dlc.passes.graph.cfg_simplify:CFGSimplifyPass",
    "cfg-canonicalize": "dlc.passes.graph.cfg_canonicalize:CFGCanonicalizePass",
    "literal-broadcasting-promotion": (
        "dlc.passes.graph.literal_broadcasting_promotion:LiteralBroadcastingPromotionPass"
    ),
    "matrix-chain-reorder": "dlc.passes.graph.matrix_chain_reorder:MatrixChainReorderPass",
    "superoptimize": "dlc.passes.graph.superoptimize:SuperoptimizePass",
    "unfold-convolutions": "dlc.passes.tensor.unfold_convolutions:UnfoldConvolutionsPass",
    "fuse": "dlc.passes.tensor.fuse:FusePass",
    "schedule": "dlc.passes.tensor.schedule:SchedulePass",
    "plan-memory": "dlc.passes.loop.plan_memory:PlanMemoryPass",
    "math-approx": "dlc.passes.loop.math_approx:MathApproxPass",
    "lower-graph-to-tensor": (
        "dlc.lowering.graph_to_tensor.lower_graph_to_tensor:LowerGraphToTensorPass"
    ),
    "lower-graph-to-loop": "dlc.lowering.graph_to_loop.lower_graph_to_loop:LowerGraphToLoopPass",
    "lower-tensor-to-loop": "dlc.lowering.tensor_to_loop.lower_tensor_to_loop:LowerTensorToLoopPass",
    "lower-loop-to-llvm": "dlc.lowering.loop_to_llvm.lower_loop_to_llvm:LowerLoopToLLVMPass",
}


def _factory(path: str) -> Callable[[], type[ModulePass]]:
    module, _, cls = path.partition(":")
    return lambda: getattr(import_module(module), cls)


def _plugin_factory(cls: type[ModulePass]) -> Callable[[], type[ModulePass]]:
    return lambda: cls


PLUGIN_PASSES: dict[str, tuple[type[ModulePass], str]] = {}
"""Passes of loaded plugins (`dlc.plugins`): name -> (class, the plugin it came from)."""


def builtin_pass_names() -> frozenset[str]:
    return frozenset(_PASSES)


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Pass name -> factory of its class, for every pass `dlc-opt -p` accepts (dlc's
    own, then those of loaded plugins).

    Factories import lazily, so dlc-opt starts fast. Adding a pass is one file (file
    name = pass name in snake_case, under `dlc/passes/<level>/`) plus one line in
    `_PASSES`."""
    passes = {name: _factory(path) for name, path in _PASSES.items()}
    for name, (cls, _) in PLUGIN_PASSES.items():
        passes[name] = _plugin_factory(cls)
    return passes


def _pass_class(name: str) -> type[ModulePass]:
    if name in _PASSES:
        return _factory(_PASSES[name])()
    if name in PLUGIN_PASSES:
        return PLUGIN_PASSES[name][0]
    raise KeyError(name)


def make_pass(spec: str, **options: Any) -> ModulePass:
    """An instance of a registered pass from `spec` (`name` or `name{opt=value ...}`,
    dlc-opt's syntax) and `options` (its dataclass fields)."""
    if "{" not in spec:
        return _pass_class(spec)(**options)
    from xdsl.utils.arg_spec import parse_pipeline

    (arg,) = parse_pipeline(spec)
    pass_class = _pass_class(arg.name)
    return pass_class.from_pass_spec(arg) if not options else pass_class(**options)


SUPEROPTIMIZER = (
    "superoptimize",
    "fold-constants{max-elements=4194304}",
    "canonicalize",
    "cse",
    "dce",
)
"""Run after `GRAPH_OPTIMIZER` at opt_level 3: the substitution search, then folding
what it built over constants (concatenated literal weights, products of weights; up to
`fold_constants.WEIGHT_LIMIT` elements, the limit the search's costs assume) and a
cleanup of what it leaves (double transposes of nested splits, unread inline
literals)."""


def verify_levels() -> bool:
    """Whether `dlc.compile` verifies the tensor and loop levels its lowerings build
    (`DLC_VERIFY=1`; the test suite sets it). The graph level is verified when parsed
    or imported and LLVM verifies the module it is given; in between, xDSL's verifier
    would take a fifth of a large program's compile time (softmax x 200: 0.5 s) to
    check dlc's own lowerings, which `dlc-opt` and the tests check at every pass."""
    return os.environ.get("DLC_VERIFY", "") == "1"


def superopt_costs(options: Options) -> str:
    """The cost model of opt_level 3's search: `options.superopt_costs` (measured unless
    DLC_SUPEROPT_COSTS=analytical) when compiling for this host, else analytical: the
    kernels timed here say nothing about another CPU."""
    if options.opt_level < 3 or options.triple or options.target_cpu != "host":
        return "analytical"
    return options.superopt_costs


def level_passes(level: str, options: Options) -> list[ModulePass]:
    """The passes run on a module at `level` before it is lowered (module docstring)."""
    optimize = options.opt_level >= 1
    if level == "graph":
        names = ["differentiate", "decompose-composites", *(GRAPH_OPTIMIZER if optimize else ())]
        passes = [make_pass(n) for n in names]
        if options.opt_level >= 3:
            costs = superopt_costs(options)
            rules = {"rules": options.rules} if options.rules else {}
            passes += [make_pass(SUPEROPTIMIZER[0], costs=costs, **rules)]
            passes += [make_pass(n) for n in SUPEROPTIMIZER[1:]]
        return passes + _extra(level, options)
    if level == "tensor" and optimize:
        unfold = make_pass("unfold-convolutions", target=options.target_cpu, triple=options.triple)
        fuse = [make_pass("fuse")] if options.fuse else []
        schedule = make_pass(
            "schedule",
            target=options.target_cpu,
            triple=options.triple,
            group=options.fuse,
            fma=options.contract,
            tuning_db=options.tuning_db or "",
        )
        return [unfold, *fuse, schedule, *_extra(level, options)]
    if level == "loop":
        names = ["plan-memory"] if options.plan_memory else []
        names += ["math-approx"] if options.fast_math_functions else []
        return [make_pass(n) for n in names] + _extra(level, options)
    return _extra(level, options)


def _extra(level: str, options: Options) -> list[ModulePass]:
    """The `extra_passes` of `level` (plugin passes), in order."""
    return [make_pass(spec) for lv, specs in options.extra_passes if lv == level for spec in specs]


def lowering(level: str, options: Options) -> ModulePass:
    """The pass that lowers `level` one level down."""
    if level == "loop":
        return make_pass(
            LOWERINGS[level],
            bounds_check=options.bounds_check,
            openmp=options.openmp,
            outline=True,  # each distinct loop nest compiled once (kernels.py)
            profile=options.profile,
        )
    if level == "tensor":  # each repeated reduction lowered once (tensor_to_loop/kernels.py);
        # not when messages name each access's place or the profiler times each place
        return make_pass(LOWERINGS[level], kernels=not (options.bounds_check or options.profile))
    return make_pass(LOWERINGS[level])


@dataclass(frozen=True)
class Step:
    """One pass of a pipeline and the level of the module it runs on."""

    level: str
    pass_: ModulePass
    lowers: bool  # the last step of its level: afterwards the module is one level down


def loop_lowering_step(options: Options) -> Step:
    """The last step of every pipeline: `lower-loop-to-llvm` with `options` (`steps`,
    `symbolic_steps`, and the loop level lowered again on its own,
    `program_levels.lower_loop_level`)."""
    return Step("loop", lowering("loop", options), True)


def steps(options: Options, start: str = "graph", stop: str = "llvm") -> list[Step]:
    """The pipeline from a module at level `start` down to level `stop`."""
    out: list[Step] = []
    for level in LEVELS[LEVELS.index(start) : LEVELS.index(stop)]:
        out.extend(Step(level, p, False) for p in level_passes(level, options))
        if level == "loop":
            out.append(loop_lowering_step(options))
        else:
            out.append(Step(level, lowering(level, options), True))
    return out


def symbolic_steps(options: Options) -> list[Step]:
    """The pipeline of a graph module with symbolic dimensions: `lower-graph-to-loop`
    (the first slice of dynamic shapes: no graph optimizer, no tensor level yet), then
    the loop level's passes and lowering as for any module."""
    loop_passes = [Step("loop", p, False) for p in level_passes("loop", options)]
    optimize = options.opt_level >= 1
    lowering_ = make_pass(
        "lower-graph-to-loop",
        optimize=optimize,
        fma=options.contract,
        target=options.target_cpu,
        triple=options.triple,
    )
    first = Step("graph", lowering_, True)
    return [first, *loop_passes, loop_lowering_step(options)]


def run(
    module: ModuleOp,
    pipeline: Iterable[Step],
    *,
    after: Callable[[Step, ModuleOp], None] | None = None,
    on_level: Callable[[str, ModuleOp], None] | None = None,
    ctx: Context | None = None,
) -> ModuleOp:
    """Apply `pipeline` to `module` in place and return it. `after(step, module)` sees
    the module after each step (dlc-opt times, verifies and prints there);
    `on_level(level, module)` sees it once per level, after the level's passes, right
    before it is lowered."""
    from dlc import progress

    ctx = ctx or context()
    with gc_paused():
        for step in pipeline:
            progress.enter(step.level)
            if step.lowers and on_level is not None:
                on_level(step.level, module)
            step.pass_.apply(ctx, module)
            if after is not None:
                after(step, module)
    return module


_GC_LOCK = threading.Lock()
_GC_PAUSES = [0]  # compiles in progress that paused the collector


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a compile builds and rewrites IR.

    A lowering allocates millions of small objects (ops, values, attributes) that stay
    alive; every collection the allocations trigger walks all of them again, which made
    lowering time grow superlinearly with program size (softmax x 200: 22% of a cold
    compile). The IR's garbage cycles wait for the next collection after the compile
    (peak memory +6% there). Nested and concurrent compiles share the pause; a collector
    the program had turned off stays off."""
    with _GC_LOCK:
        _GC_PAUSES[0] += 1
        if _GC_PAUSES[0] == 1:
            _GC_PAUSES.append(gc.isenabled())
            gc.disable()
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_PAUSES[0] -= 1
            if _GC_PAUSES[0] == 0 and _GC_PAUSES.pop():
                gc.enable()


def context() -> Context:
    """A context with every dialect dlc's IR uses (and none of xDSL's same-named ones)."""
    from dlc.dialects import get_all_dialects

    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    return ctx
