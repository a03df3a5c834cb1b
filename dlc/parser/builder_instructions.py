"""The per-instruction table of the DLVM parser: one builder per instruction kind,
each creating its op through `emit` (type inference via the op class's `infer`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lark import Token, Tree
from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr, UnitAttr
from xdsl.ir import Attribute, Operation, SSAValue

from dlc.dialects import graph_dims
from dlc.dialects import graph_symbolic as symbolic
from dlc.dialects.graph import BranchEnumOp, BranchOp, ConditionalOp, InferenceError, ReturnOp
from dlc.dialects.graph_composite import EinsumOp, TopKIndicesOp, TopKOp
from dlc.dialects.graph_elementwise import BINARY_OPS, UNARY_OPS, DataTypeCastOp, NotOp, SelectOp
from dlc.dialects.graph_gather import (
    GatherElementsOp,
    GatherNDOp,
    GatherOp,
    ScatterElementsOp,
    ScatterNDOp,
)
from dlc.dialects.graph_memory import (
    AllocateBoxOp,
    AllocateHeapOp,
    AllocateStackOp,
    ApplyIndirectOp,
    ApplyOp,
    CopyOp,
    CreateStackOp,
    DeallocateOp,
    DestroyStackOp,
    ElementPointerOp,
    ExtractOp,
    InsertOp,
    LoadOp,
    PopOp,
    ProjectBoxOp,
    PushOp,
    RandomOp,
    ReleaseOp,
    RetainOp,
    StoreOp,
    TrapOp,
)
from dlc.dialects.graph_module import GraphInstruction
from dlc.dialects.graph_tensor import (
    BitCastOp,
    ConcatenateOp,
    ConvolveOp,
    DotOp,
    PadShapeOp,
    RankOp,
    ReduceOp,
    ReduceWindowOp,
    ReverseOp,
    ScanOp,
    ShapeCastOp,
    ShapeOp,
    SliceOp,
    SqueezeShapeOp,
    TransposeOp,
    UnitCountOp,
)
from dlc.dialects.graph_types import FunctionType, TensorType, format_type, size_error
from dlc.parser.builder_literals import LiteralBuilder
from dlc.parser.builder_types import as_token, ints_of
from dlc.parser.lexer import SourceText

OpClass = type[GraphInstruction]  # what `emit` creates: an op class with `infer`
UNARY_CLASSES: dict[str, OpClass] = {**UNARY_OPS, "not": NotOp, "transpose": TransposeOp}
BINARY_CLASSES: dict[str, OpClass] = {**BINARY_OPS, "dot": DotOp, "matrixMultiply": DotOp}


class InstructionBuilder(LiteralBuilder):
    """Builds one op per instruction tree; `inst_builders` maps grammar rule -> builder."""

    def __init__(self, source: SourceText):
        super().__init__(source)
        # Inference is a pure function of (op class, operand types, properties) within a module.
        self.infer_cache: dict[tuple[object, ...], list[Attribute]] = {}
        self.inst_builders: dict[str, Callable[[Tree], Operation]] = self._instruction_table()

    # ---- instructions ---------------------------------------------------------------

    def _instruction_table(self) -> dict[str, Callable[[Tree], Operation]]:
        return {
            "literal": self._literal,
            "unary": self._unary,
            "binary": self._binary,
            "select": lambda n: self.emit(SelectOp, n, self._uses(n)),
            "data_type_cast": lambda n: self.emit(
                DataTypeCastOp, n, self._uses(n), dtype=StringAttr(str(n.children[2]))
            ),
            "scan": self._scan,
            "reduce": self._reduce,
            "reduce_window": self._reduce_window,
            "concatenate": lambda n: self.emit(
                ConcatenateOp,
                n,
                [self.use(u) for u in n.children[1].children],
                axis=IntAttr(int(n.children[2])),
            ),
            "reverse": lambda n: self.emit(
                ReverseOp, n, self._uses(n), dims=self._int_array(n.children[2])
            ),
            "slice": lambda n: self.emit(
                SliceOp,
                n,
                self._uses(n),
                lower=IntAttr(int(n.children[2])),
                upper=IntAttr(int(n.children[3])),
            ),
            "convolve": self._convolve,
            "rank": lambda n: self.emit(RankOp, n, self._uses(n)),
            "shape": lambda n: self.emit(ShapeOp, n, self._uses(n)),
            "unit_count": lambda n: self.emit(UnitCountOp, n, self._uses(n)),
            "pad_shape": lambda n: self.emit(
                PadShapeOp, n, self._uses(n), index=IntAttr(int(n.children[2]))
            ),
            "squeeze_shape": lambda n: self.emit(
                SqueezeShapeOp, n, self._uses(n), index=IntAttr(int(n.children[2]))
            ),
            "shape_cast": lambda n: self.emit(
                ShapeCastOp, n, self._uses(n), shape=self._shape_spec(n.children[2])
            ),
            "bit_cast": lambda n: self.emit(
                BitCastOp, n, self._uses(n), target=self.build_type(n.children[2])
            ),
            "extract": self._extract,
            "insert": self._insert,
            "apply": self._apply,
            "create_stack": lambda n: self.emit(CreateStackOp, n, []),
            "destroy_stack": lambda n: self.emit(DestroyStackOp, n, self._uses(n)),
            "push": lambda n: self.emit(PushOp, n, self._uses(n)),
            "pop": lambda n: self.emit(
                PopOp, n, self._uses(n), elem_type=self.build_type(n.children[1])
            ),
            "allocate_stack": lambda n: self.emit(
                AllocateStackOp,
                n,
                [],
                elem_type=self.build_type(n.children[1]),
                count=IntAttr(int(n.children[2])),
            ),
            "allocate_heap": lambda n: self.emit(
                AllocateHeapOp, n, self._uses(n), elem_type=self.build_type(n.children[1])
            ),
            "allocate_box": lambda n: self.emit(
                AllocateBoxOp, n, [], elem_type=self.build_type(n.children[1])
            ),
            "project_box": lambda n: self.emit(ProjectBoxOp, n, self._uses(n)),
            "retain": lambda n: self.emit(RetainOp, n, self._uses(n)),
            "release": lambda n: self.emit(ReleaseOp, n, self._uses(n)),
            "deallocate": lambda n: self.emit(DeallocateOp, n, self._uses(n)),
            "load": lambda n: self.emit(LoadOp, n, self._uses(n)),
            "store": lambda n: self.emit(StoreOp, n, self._uses(n)),
            "element_pointer": self._element_pointer,
            "copy": lambda n: self.emit(CopyOp, n, self._uses(n)),
            "trap": lambda n: self.emit(TrapOp, n, []),
            "random": lambda n: self.emit(
                RandomOp, n, self._uses(n), shape=self._shape_spec(n.children[1])
            ),
            "branch": self._branch,
            "conditional": self._conditional,
            "branch_enum": self._branch_enum,
            "return": self._return,
            "gather": lambda n: self._gather(GatherOp, n),
            "gather_elements": lambda n: self._gather(GatherElementsOp, n),
            "gather_nd": self._gather_nd,
            "scatter_elements": lambda n: self._scatter(ScatterElementsOp, n),
            "scatter_nd": lambda n: self._scatter(ScatterNDOp, n),
            "einsum": lambda n: self.emit(
                EinsumOp,
                n,
                [self.use(u) for u in n.children[2].children],
                equation=StringAttr(str(n.children[1])[1:-1]),
            ),
            "top_k": lambda n: self._top_k(TopKOp, n),
            "top_k_indices": lambda n: self._top_k(TopKIndicesOp, n),
        }

    def _uses(self, node: Tree) -> list[SSAValue]:
        """The `use` children of an instruction, in order."""
        return [self.use(c) for c in node.children if isinstance(c, Tree) and c.data == "use"]

    def _int_array(self, node: Tree) -> ArrayAttr[IntAttr]:
        return ArrayAttr([IntAttr(i) for i in ints_of(node)])

    def _shape_spec(self, node: Tree) -> ArrayAttr[IntAttr | StringAttr]:
        """Static extents, and symbolic dimensions `%n` (a `shapeCast`'s target)."""
        kinds = ("INT", "LOCAL", "DIM_PRODUCT")
        tokens = [t for t in map(as_token, node.children) if t.type in kinds]
        dims = [int(t) if t.type == "INT" else graph_dims.normalize(str(t)[1:]) for t in tokens]
        for d, tok in zip(dims, tokens, strict=True):
            if isinstance(d, int) and d < 0:
                raise self.error(f"dimension must be non-negative, got {d}", tok)
        return ArrayAttr([IntAttr(d) if isinstance(d, int) else StringAttr(d) for d in dims])

    def emit(
        self, cls: OpClass, node: Tree, operands: Sequence[SSAValue], **props: Attribute
    ) -> Operation:
        """Infer the result types of `cls` and create the op (a located error on failure)."""
        types = [o.type for o in operands]
        opcode = getattr(cls, "OPCODE", cls.name.removeprefix("graph."))
        if (message := symbolic.unsupported(opcode, types, props)) is not None:
            raise self.error(message, node)
        key = (cls, tuple(types), tuple(props.items()))
        results = self.infer_cache.get(key)
        if results is None:
            try:
                results = cls.infer(types, props, self.symbols)
            except InferenceError as err:
                raise self.error(str(err), node) from None
            for t in results:
                if isinstance(t, TensorType) and (message := size_error(t)) is not None:
                    raise self.error(message, node)
            self.infer_cache[key] = results
        return cls.create(
            operands=list(operands), result_types=list(results), properties=dict(props)
        )

    def _unary(self, node: Tree) -> Operation:
        return self.emit(UNARY_CLASSES[str(node.children[0])], node, self._uses(node))

    def _binary(self, node: Tree) -> Operation:
        return self.emit(BINARY_CLASSES[str(node.children[0])], node, self._uses(node))

    def _combinator(
        self, comb: Tree, operands: list[SSAValue], props: dict[str, Attribute]
    ) -> None:
        child = comb.children[0]
        if isinstance(child, Token):
            word = "dot" if child == "matrixMultiply" else str(child)
            props["combinator"] = StringAttr(word)
        else:
            operands.append(self.use(child))

    def _scan(self, node: Tree) -> Operation:
        _, x, comb, dims = node.children
        operands = [self.use(x)]
        props: dict[str, Attribute] = {"dims": self._int_array(dims)}
        self._combinator(comb, operands, props)
        return self.emit(ScanOp, node, operands, **props)

    def _reduce(self, node: Tree) -> Operation:
        _, x, comb, init, dims = node.children
        operands = [self.use(x)]
        props: dict[str, Attribute] = {"dims": self._int_array(dims)}
        fn: list[SSAValue] = []
        self._combinator(comb, fn, props)
        operands.append(self.use(init))
        return self.emit(ReduceOp, node, operands + fn, **props)

    def _reduce_window(self, node: Tree) -> Operation:
        _, x, comb, init, window, strides, padding = node.children
        operands = [self.use(x)]
        props: dict[str, Attribute] = {
            "window": self._int_array(window),
            "strides": self._int_array(strides),
            "padding": StringAttr(str(padding)),
        }
        fn: list[SSAValue] = []
        self._combinator(comb, fn, props)
        operands.append(self.use(init))
        return self.emit(ReduceWindowOp, node, operands + fn, **props)

    def _convolve(self, node: Tree) -> Operation:
        _, x, kernel, *clauses = node.children
        operands = [self.use(x), self.use(kernel)]
        props: dict[str, Attribute] = {}
        names = {
            "conv_strides": "strides",
            "conv_left": "left_dilation",
            "conv_right": "right_dilation",
        }
        for clause in clauses:
            if clause.data in names:
                props[names[clause.data]] = self._int_array(clause.children[0])
            elif clause.data == "conv_padding":
                flat = [int(as_token(tok)) for pair in clause.children for tok in pair.children]
                props["padding"] = ArrayAttr([IntAttr(i) for i in flat])
            else:
                props["groups"] = IntAttr(int(as_token(clause.children[0])))
        return self.emit(ConvolveOp, node, operands, **props)

    def _gather(self, cls: OpClass, node: Tree) -> Operation:
        """`gather %d at %i along A` / `gatherElements ...`."""
        axis = IntAttr(int(as_token(node.children[-1])))
        return self.emit(cls, node, self._uses(node), axis=axis)

    def _gather_nd(self, node: Tree) -> Operation:
        """`gatherND %d at %i [batchDims B]`."""
        batch = int(as_token(node.children[3])) if len(node.children) > 3 else 0
        return self.emit(GatherNDOp, node, self._uses(node), batch_dims=IntAttr(batch))

    def _scatter(self, cls: OpClass, node: Tree) -> Operation:
        """`scatterElements %u to %d at %i along A [by R]` / `scatterND %u to %d at %i [by R]`."""
        props: dict[str, Attribute] = {}
        rest = [c for c in node.children[4:] if isinstance(c, Token)]
        if rest:
            props["axis"] = IntAttr(int(rest[0]))
        by = [c for c in node.children if isinstance(c, Tree) and c.data == "scatter_by"]
        if by:
            props["reduction"] = StringAttr(str(by[0].children[0]))
        return self.emit(cls, node, self._uses(node), **props)

    def _top_k(self, cls: OpClass, node: Tree) -> Operation:
        """`topK %x count K along A [smallest]` / `topKIndices ...`."""
        count, axis = (int(c) for c in node.children if isinstance(c, Token) and c.type == "INT")
        props: dict[str, Attribute] = {"count": IntAttr(count), "axis": IntAttr(axis)}
        if any(isinstance(c, Token) and c.type == "SMALLEST" for c in node.children):
            props["smallest"] = UnitAttr()
        return self.emit(cls, node, self._uses(node), **props)

    def _keys(self, node: Tree, values: list[SSAValue]) -> ArrayAttr[Attribute]:
        keys: list[Attribute] = []
        for key in node.children:
            child = key.children[0]
            if isinstance(child, Tree):
                values.append(self.use(child))
                keys.append(ArrayAttr([]))
            elif child.type == "INT":
                keys.append(IntAttr(int(child)))
            else:
                keys.append(StringAttr(str(child)[1:]))
        return ArrayAttr(keys)

    def _extract(self, node: Tree) -> Operation:
        _, keys_node, x = node.children
        key_values: list[SSAValue] = []
        keys = self._keys(keys_node, key_values)
        return self.emit(ExtractOp, node, [self.use(x), *key_values], keys=keys)

    def _insert(self, node: Tree) -> Operation:
        _, value, dest, keys_node = node.children
        operands = [self.use(value), self.use(dest)]
        key_values: list[SSAValue] = []
        keys = self._keys(keys_node, key_values)
        return self.emit(InsertOp, node, operands + key_values, keys=keys)

    def _element_pointer(self, node: Tree) -> Operation:
        _, ptr, keys_node = node.children
        operands = [self.use(ptr)]
        key_values: list[SSAValue] = []
        keys = self._keys(keys_node, key_values)
        return self.emit(ElementPointerOp, node, operands + key_values, keys=keys)

    def _apply(self, node: Tree) -> Operation:
        _, callee_node, args_node, type_node = node.children
        callee = as_token(callee_node)
        t = self.build_type(type_node)
        if callee.type == "GLOBAL":
            name = str(callee)[1:]
            entry = self.values.get(name)
            if entry is None or entry[2] != "func":
                raise self.error(f"unknown function {callee}", callee)
            if not isinstance(t, FunctionType):
                raise self.error(
                    f"apply: callee type {format_type(t)} is not a function type", type_node
                )
            args = self._args(args_node)
            return self.emit(ApplyOp, node, args, callee=StringAttr(name), callee_type=t)
        fn = self._local_value(callee)
        self._check_use_type(callee, fn.type, t)
        return self.emit(ApplyIndirectOp, node, [fn, *self._args(args_node)])

    def _args(self, args_node: Tree) -> list[SSAValue]:
        if not args_node.children:
            return []
        return [self.use(u) for u in args_node.children[0].children]

    def _branch(self, node: Tree) -> Operation:
        _, label, args = node.children
        return BranchOp(self._block(label), self._args(args))

    def _conditional(self, node: Tree) -> Operation:
        _, cond, then_label, then_args, else_label, else_args = node.children
        c = self.use(cond)
        then_values = self._args(then_args)
        else_values = self._args(else_args)
        return ConditionalOp(
            c, self._block(then_label), then_values, self._block(else_label), else_values
        )

    def _branch_enum(self, node: Tree) -> Operation:
        _, value, *rest = node.children
        v = self.use(value)
        cases = [(str(rest[i])[1:], self._block(rest[i + 1])) for i in range(0, len(rest), 2)]
        return BranchEnumOp(v, cases)

    def _return(self, node: Tree) -> Operation:
        if len(node.children) == 1:
            return ReturnOp()
        return ReturnOp(self.use(node.children[1]))
