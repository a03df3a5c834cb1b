"""The differentiator of the `differentiate` pass (`dlc.passes.graph.differentiate`):
`Differentiator` defines a module's adjoint declarations, synthesizing callee adjoints
(`@g_grad`) that read a tape; `FunctionDifferentiator` defines one, path by path.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntAttr, ModuleOp, StringAttr, UnitAttr
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from dlc.diagnostics import copy_loc, error_at
from dlc.dialects.graph import FuncOp, LiteralOp, ReturnOp, Symbols
from dlc.dialects.graph_literal import LiteralAttr
from dlc.dialects.graph_memory import ApplyOp
from dlc.dialects.graph_tensor import int_array
from dlc.dialects.graph_types import FunctionType, TensorType, TupleType
from dlc.dialects.graph_verify import adjoint_type, is_differentiable
from dlc.passes.graph.autodiff.adjoint_rules import Adj, Emitter
from dlc.passes.graph.autodiff.differentiate_paths import (
    differentiated_later,
    fresh_symbol,
    is_adjoint_decl,
    reject_loops,
)
from dlc.passes.graph.autodiff.differentiate_replay import TapeUnfolder
from dlc.passes.graph.autodiff.differentiate_sweep import PathSweep, erase_dead_code, has_float
from dlc.passes.graph.autodiff.differentiate_tape import TAPE_MARK, Recorded, Tapes, replace_calls

DECL_PROPS = ("decl", "primal", "from_index", "wrt", "keeping", "seedable")


class Differentiator:
    """Works through the module's adjoint declarations, primal before adjoint."""

    def __init__(self, module: ModuleOp):
        self.module = module
        self.symbols = Symbols.of_module(module)
        self.synthesized: dict[tuple[str, int | None, bool, bool], str] = {}
        self.pullbacks: dict[str, str] = {}
        """Synthesized adjoints that take their callee's tape -> the callee."""
        self.tapes = Tapes(self)
        self.tape_free = differentiated_later(module)
        """Adjoints built without tapes: those that will be differentiated themselves
        (a tape's values enter an adjoint as constants, so its derivative would miss
        them), and the callee adjoints they call."""

    def refresh(self) -> None:
        self.symbols = Symbols.of_module(self.module)

    def functions(self) -> dict[str, FuncOp]:
        return {f.sym_name.data: f for f in self.module.body.block.ops if isinstance(f, FuncOp)}

    def run(self) -> None:
        while True:
            self.tapes.build_pending()
            pending = [f for f in self.module.body.block.ops if is_adjoint_decl(f)]
            if not pending:
                return
            self.define(pending[0])

    def define(self, adjoint: FuncOp) -> None:
        """Define `adjoint`, first defining its primal when that is an adjoint too."""
        chain = [adjoint]
        while True:
            top = chain[-1]
            primal = self.functions().get(top.primal.data if top.primal else "")
            if primal is None or not is_adjoint_decl(primal):
                break
            if primal in chain:
                raise error_at(
                    top,
                    f"adjoint @{top.sym_name.data} depends on itself through @{primal.sym_name.data}",
                )
            chain.append(primal)
        for func in reversed(chain):
            FunctionDifferentiator(self, func).run()

    def callee_adjoint(
        self, caller: FuncOp, call: ApplyOp, source: int | None, taped: bool, tape_free: bool
    ) -> FuncOp:
        """The adjoint of the callee (all differentiable args, seedable), made on demand;
        a `taped` one takes the callee's tape before the seed (differentiate_tape.py)."""
        callee = call.callee.data
        key = (callee, source, taped, tape_free)
        funcs = self.functions()
        if key in self.synthesized:
            return funcs[self.synthesized[key]]
        target = funcs.get(callee)
        if target is None or (target.is_declaration and not is_adjoint_decl(target)):
            raise error_at(call, f"cannot differentiate the call to @{callee}: it has no body")
        ftype = target.function_type
        wrt = [i for i, t in enumerate(ftype.args) if has_float(t) and is_differentiable(t)]
        name = fresh_symbol(f"{callee}_grad", funcs)
        decl = FuncOp(
            name,
            FunctionType([], TupleType([])),
            decl=StringAttr("adjoint"),
            primal=StringAttr(callee),
            from_index=None if source is None else IntAttr(source),
            wrt=None if len(wrt) == len(ftype.args) else int_array(wrt),
            seedable=UnitAttr(),
        )
        decl.properties["function_type"] = self.signature(decl, name, callee, taped)
        self.module.body.block.insert_op_after(decl, caller)
        copy_loc(call, decl)
        self.refresh()
        self.synthesized[key] = name
        if tape_free:
            self.tape_free.add(name)
        return decl

    def signature(self, decl: FuncOp, name: str, callee: str, taped: bool) -> FunctionType:
        """The type of the adjoint `decl` of `callee`; a `taped` one takes the callee's
        tape before the seed (and is marked: its tape has no C type)."""
        signature = adjoint_type(decl, self.symbols)
        if not taped:
            return signature
        tape = self.tapes.of(callee)
        assert tape is not None
        args = list(signature.args)
        self.pullbacks[name] = callee
        decl.attributes[TAPE_MARK] = UnitAttr()
        return FunctionType([*args[:-1], tape.tape, args[-1]], signature.output)


class FunctionDifferentiator:
    """Defines one adjoint function from its primal."""

    def __init__(self, owner: Differentiator, adjoint: FuncOp):
        self.owner = owner
        self.adjoint = adjoint
        assert adjoint.primal is not None
        self.primal = owner.functions()[adjoint.primal.data]
        self.source = adjoint.from_index.data if adjoint.from_index is not None else None
        n = len(self.primal.function_type.args)
        self.wrt = [a.data for a in adjoint.wrt.data] if adjoint.wrt is not None else list(range(n))
        self.keeping = [a.data for a in adjoint.keeping.data] if adjoint.keeping is not None else []
        self.seedable = adjoint.seedable is not None
        self.unfolder = TapeUnfolder(self.primal, adjoint, self.seedable)
        self.origin = self.unfolder.origin
        self.tape_free = adjoint.sym_name.data in owner.tape_free
        self.recorded: Recorded = {}
        """Taped calls -> their results and tapes (read from a tape or recorded anew)."""

    def run(self) -> None:
        if not self.primal.body.blocks:
            raise error_at(
                self.adjoint, f"cannot differentiate @{self.primal.sym_name.data}: it has no body"
            )
        reject_loops(self.primal)
        tapes = self.owner.tapes
        callee = self.owner.pullbacks.get(self.adjoint.sym_name.data)
        if callee is not None:
            leaves, self.recorded = self.unfolder.from_tape(tapes.layout(callee), tapes)
        else:
            leaves = self.unfolder.unfold()
            self.recorded = {} if self.tape_free else tapes.record_calls(leaves)
        for key in DECL_PROPS:
            self.adjoint.properties.pop(key, None)
        for leaf, path in leaves:
            self.differentiate_path(leaf, path)
        replace_calls(self.recorded)
        erase_dead_code(self.adjoint)

    # -- one path ---------------------------------------------------------------------------

    def differentiate_path(self, leaf: Block, path: list[Operation]) -> None:
        ret = leaf.last_op
        assert isinstance(ret, ReturnOp) and ret.value is not None
        entry = self.adjoint.body.blocks.first
        assert entry is not None
        args = list(entry.args)
        e = Emitter(leaf, ret, ret, self.owner.symbols)
        seed: SSAValue = args[-1] if self.seedable else self.ones(e)
        wrt_args: list[SSAValue] = [args[i] for i in self.wrt if has_float(args[i].type)]
        sweep = PathSweep(self, path, wrt_args, ret.value)
        adjoints = sweep.run(e, seed if self.source is None else {self.source: seed})
        results = [self.derivative(e, adjoints, args[i]) for i in self.wrt]
        results += [self.kept(e, ret.value, k) for k in self.keeping]
        out_type = self.adjoint.function_type.output
        tree = ("tuple", tuple(("operand", i) for i in range(len(results))))
        tuple_op = e.insert(LiteralOp(LiteralAttr(tree), out_type, results))
        ret.operands = [tuple_op.results[0]]

    def ones(self, e: Emitter) -> SSAValue:
        out = self.primal.function_type.output
        source = (
            out.types[self.source]
            if isinstance(out, TupleType) and self.source is not None
            else out
        )
        assert isinstance(source, TensorType)
        return e.splat(1, source)

    def derivative(self, e: Emitter, adjoints: dict[SSAValue, Adj], arg: BlockArgument) -> SSAValue:
        adj = adjoints.get(arg)
        if isinstance(adj, SSAValue):
            return adj
        assert isinstance(arg.type, TensorType)
        return e.splat(0, arg.type)

    def kept(self, e: Emitter, value: SSAValue, k: int) -> SSAValue:
        if not isinstance(value.type, TupleType):
            return value
        owner = value.owner
        if isinstance(owner, LiteralOp) and owner.value.data[0] == "tuple":
            element = owner.value.data[1][k]
            if element[0] == "operand":
                return owner.elements[element[1]]
        return e.extract(value, [k])
