"""lower-loop-to-llvm: the `loop` level (+ arith/math) -> xDSL's `llvm` dialect."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from dlc import progress
from dlc.analysis.levels import require_level
from dlc.analysis.loop_callgraph import recursive_functions
from dlc.diagnostics import error_at
from dlc.dialects import abi, loop
from dlc.dialects.abi import VAR_PREFIX, function_symbol
from dlc.lowering.loop_to_llvm.context import StatusTable
from dlc.lowering.loop_to_llvm.func_emitter import PTR, FuncEmitter
from dlc.lowering.loop_to_llvm.kernels import outline_kernels
from dlc.lowering.loop_to_llvm.parallel import (
    SPLIT_CHUNK,
    SPLIT_OPS,
)
from dlc.lowering.loop_to_llvm.profile import KernelTable
from dlc.lowering.prebuilt import make
from dlc.lowering.tensor_to_loop.kernels import KERNEL


def lower_func(
    func: loop.FuncOp,
    externals: dict[str, llvm.LLVMFunctionType],
    status: StatusTable,
    *,
    recursive: bool = False,
    openmp: bool = False,
    outlined: list[Operation] | None = None,
    split_ops: int = SPLIT_OPS,
    split_chunk: int = SPLIT_CHUNK,
    profile: KernelTable | None = None,
) -> llvm.FuncOp:
    """`loop.func @f(memrefs)` -> `llvm.func @dlc.fn.f(ptr noalias ctx, ptr noalias, ...) ->
    void`; a `recursive` function counts its active calls in the ctx and traps past
    `MAX_CALL_DEPTH`."""
    emitter = FuncEmitter(
        externals,
        status,
        openmp=openmp,
        split_ops=split_ops,
        split_chunk=split_chunk,
        profile=profile,
    )
    body = emitter.lower(func, recursive=recursive)
    if outlined is not None:
        outlined.extend(emitter.outlined)
    n_args = 1 + len(func.args)
    noalias = DictionaryAttr({"llvm.noalias": UnitAttr()})
    return llvm.FuncOp(
        function_symbol(func.sym_name.data),
        llvm.LLVMFunctionType([PTR] * n_args),
        linkage=llvm.LinkageAttr("external"),
        body=body,
        other_props={"arg_attrs": ArrayAttr([noalias] * n_args)},
    )


def _declaration(name: str, ftype: llvm.LLVMFunctionType) -> llvm.FuncOp:
    return llvm.FuncOp(name, ftype, linkage=llvm.LinkageAttr("external"))


@dataclass(frozen=True)
class LowerLoopToLLVMPass(ModulePass):
    """Lower every `loop.func` (with its arith/math scalar ops) to an `llvm.func`.

    Input: a module of `loop.func` ops (verified loop level). Output: only `llvm.func`
    ops: one per loop function (named `dlc.fn.<name>`, `abi.function_symbol`: no program
    name can collide with a runtime or C symbol; `ptr noalias` args, void result) and
    the external declarations it calls (`aligned_alloc`, `free`, libm). Loops become blocks
    with block-argument phis; memref accesses become row-major GEPs with explicit
    alignment. An op the code generator cannot lower raises a located DiagnosticError
    "not supported by the code generator yet: <op name>".

    Every function takes the call context `ctx` first (`dlc.dialects.abi`, `context.py`):
    `loop.trap` stores its message code in its status word and returns, and every
    `loop.call` returns right after a callee that set it; functions that call others
    or have stack slots check the stack limit, recursive ones also their call depth
    (`MAX_CALL_DEPTH`), and trap instead of overflowing the native stack; CFG back
    edges, outermost loops and recursive entries poll the interrupt flag; planned
    arenas are blocks of the ctx's arena. With `bounds_check`
    (`-p 'lower-loop-to-llvm{bounds_check=true}'`), every load and store checks its
    indices against the buffer shape (see `FuncEmitter.checked`). With `openmp`, parallel
    loops are outlined and run by `GOMP_parallel` (`parallel.py`); without it they run
    serially (the pipeline sets it when libgomp is available). A function of more
    than `split_ops` loop-level ops (default `SPLIT_OPS`; -1 means the default) has its
    top-level loop nests outlined, in runs of about `split_chunk` ops (default
    `SPLIT_CHUNK`), into internal `noinline` functions `@f$nest<k>` (`parallel.py`), so
    LLVM works on pieces of bounded size; runs alike share one function
    (`chunks.py`). With `outline`, top-level nests that occur more than once in the
    module become one internal `noinline` kernel function each, called from every
    place (`kernels.py`); so do the kernels of `lower-tensor-to-loop{kernels=true}`
    (`dlc.kernel`). With `profile`, each kernel (a top-level nest or copy) and each
    function's call is bracketed by timing marks, and the module attribute `dlc.profile`
    describes the kernels (`profile.py`); without it the code has no marks.
    """

    name = "lower-loop-to-llvm"

    bounds_check: bool = False
    openmp: bool = False
    outline: bool = False
    split_ops: int = -1  # -1: SPLIT_OPS
    split_chunk: int = -1  # -1: SPLIT_CHUNK
    profile: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_level(op, "loop", self.name)
        externals: dict[str, llvm.LLVMFunctionType] = {}
        lowered: list[Operation] = []
        status = StatusTable(self.bounds_check)
        table = KernelTable(op) if self.profile else None
        kernels = outline_kernels(op, self.bounds_check) if self.outline else set()
        if table is not None:
            table.rebind(op)
        recursive = recursive_functions(op)
        children = list(op.body.block.ops)
        for done, child in enumerate(children):
            progress.items(done, len(children))
            if not isinstance(child, loop.FuncOp):
                raise error_at(child, f"not supported by the code generator yet: {child.name}")
            rec = child.sym_name.data in recursive
            outlined: list[Operation] = []
            func = lower_func(
                child,
                externals,
                status,
                recursive=rec,
                openmp=self.openmp,
                outlined=outlined,
                split_ops=SPLIT_OPS if self.split_ops < 0 else self.split_ops,
                split_chunk=SPLIT_CHUNK if self.split_chunk < 0 else self.split_chunk,
                profile=table,
            )
            if child.sym_name.data in kernels or KERNEL in child.attributes:
                func.linkage = llvm.LinkageAttr("internal")
                func.properties["no_inline"] = UnitAttr()
            lowered.extend([func, *outlined])
        progress.items(len(children), len(children))
        defined = {f.sym_name.data for f in lowered if isinstance(f, llvm.FuncOp)}
        for name, ftype in externals.items():
            if name not in defined:
                lowered.append(_declaration(name, ftype))
        if table is not None:
            table.attach(op, lowered)
        for name in status.variables:
            slot = VAR_PREFIX + name
            lowered.append(make(llvm.GlobalOp, i64, slot, "common", value=IntegerAttr(0, i64)))
        for name, array, data in status.constants:
            lowered.append(make(llvm.GlobalOp, array, name, "internal", constant=True, value=data))
        if status.variables:
            op.attributes[abi.VARS] = DictionaryAttr(
                {name: IntegerAttr(size, i64) for name, size in status.variables.items()}
            )
        if status.depth_used:
            op.attributes[abi.RECURSIVE] = ArrayAttr([StringAttr(n) for n in sorted(recursive)])
        if status.messages:
            op.attributes[abi.MESSAGES] = ArrayAttr([StringAttr(m) for m in status.messages])
        for child in list(op.body.block.ops):
            child.detach()
            child.erase()
        op.body.block.add_ops(lowered)
