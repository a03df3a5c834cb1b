"""The DLVM printer on hand-built graph IR: every instruction kind, literals, names, decls."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from graph_builders import inferred_op
from xdsl.dialects.builtin import ArrayAttr, IntAttr, ModuleOp, StringAttr, UnitAttr
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from dlc.dialects import graph_elementwise as ew
from dlc.dialects import graph_memory as mem
from dlc.dialects import graph_tensor as ts
from dlc.dialects.graph import (
    BranchEnumOp,
    BranchOp,
    ConditionalOp,
    EnumOp,
    FuncOp,
    GlobalRefOp,
    LiteralOp,
    ReturnOp,
    StructOp,
    Symbols,
    TypeAliasOp,
    VarOp,
)
from dlc.dialects.graph_literal import LiteralAttr
from dlc.dialects.graph_types import (
    ArrayType,
    BoxType,
    FunctionType,
    NominalType,
    PointerType,
    StackType,
    TensorType,
    TupleType,
    scalar,
)
from dlc.parser.printer import format_literal, print_function, print_module

F32 = scalar("f32")
I64 = scalar("i64")
BOOL = scalar("bool")
M23 = TensorType((2, 3), "f32")
PAIR = NominalType("Pair", "struct")
SHAPE = NominalType("Shape", "enum")
SYMBOLS = Symbols(
    structs={"Pair": [("a", F32), ("b", TensorType((2,), "i32"))]},
    enums={"Shape": [("circle", (F32,)), ("none", ())]},
)


def ints(*values: int) -> ArrayAttr[IntAttr]:
    return ArrayAttr([IntAttr(v) for v in values])


def inline(value: int | float | bool, t: Attribute = F32) -> LiteralOp:
    kind = "bool" if isinstance(value, bool) else "float" if isinstance(value, float) else "int"
    return LiteralOp(LiteralAttr((kind, value)), t, inline=True)


def make(
    cls: type[Operation],
    operands: Sequence[SSAValue],
    symbols: Symbols | None = SYMBOLS,
    **props: Attribute,
) -> Operation:
    """An instruction with its result types inferred as the parser does."""
    return inferred_op(cls, operands, props, symbols)


def line_of(
    op: Operation, args: Sequence[Attribute], names: Sequence[str], extra: Sequence[Operation] = ()
) -> str:
    """Print `op` as the first instruction of a one-block function; return its line."""
    block = Block(arg_types=list(args))
    for arg, name in zip(block.args, names, strict=True):
        arg._name = name
    block.add_ops([*extra, op, ReturnOp()])
    func = FuncOp("f", FunctionType(list(args), TupleType([])), Region([block]))
    return print_function(func, SYMBOLS).splitlines()[2].strip()


def line(
    cls: type[Operation],
    args: Sequence[Attribute],
    extra: Sequence[Operation] = (),
    **props: Attribute,
) -> str:
    """Build `cls` on block arguments %a, %b, %c, ... (then the `extra` results) and print it."""
    names = "abcdefg"[: len(args)]
    block = Block(arg_types=list(args))
    for arg, name in zip(block.args, names, strict=False):
        arg._name = name
    operands = [*block.args, *(op.results[0] for op in extra)]
    op = make(cls, operands, **props)
    if op.results:
        op.results[0]._name = "r"
    block.add_ops([*extra, op, ReturnOp()])
    func = FuncOp("f", FunctionType(list(args), TupleType([])), Region([block]))
    return print_function(func, SYMBOLS).splitlines()[2].strip()


@pytest.mark.parametrize("opcode", list(ew.UNARY_OPS))
def test_every_unary_op(opcode: str) -> None:
    assert line(ew.UNARY_OPS[opcode], [M23]) == f"%r = {opcode} %a: <2 x 3 x f32>"


@pytest.mark.parametrize(
    "opcode", [op for op, c in ew.BINARY_OPS.items() if c.FAMILY in ("numeric", "compare")]
)
def test_every_numeric_and_compare_op(opcode: str) -> None:
    text = line(ew.BINARY_OPS[opcode], [M23], extra=[inline(2.5)])
    assert text == f"%r = {opcode} %a: <2 x 3 x f32>, 2.5: f32"


@pytest.mark.parametrize("opcode", ["and", "or", "xor"])
def test_boolean_ops(opcode: str) -> None:
    b4 = TensorType((4,), "bool")
    assert line(ew.BINARY_OPS[opcode], [b4, BOOL]) == f"%r = {opcode} %a: <4 x bool>, %b: bool"


@pytest.mark.parametrize("opcode", ["and", "xor", "shiftLeft", "shiftRight"])
def test_integer_bit_ops(opcode: str) -> None:
    u4 = TensorType((4,), "u16")
    line_text = line(ew.BINARY_OPS[opcode], [u4, u4])
    assert line_text == f"%r = {opcode} %a: <4 x u16>, %b: <4 x u16>"


ELEMENTWISE_CASES = [
    (ew.NotOp, [BOOL], {}, "not %a: bool"),
    (ew.SelectOp, [M23, F32, BOOL], {}, "select %a: <2 x 3 x f32>, %b: f32 by %c: bool"),
    (
        ew.DataTypeCastOp,
        [M23],
        {"dtype": StringAttr("f64")},
        "dataTypeCast %a: <2 x 3 x f32> to f64",
    ),
]

TENSOR_CASES = [
    (
        ts.ScanOp,
        [M23],
        {"combinator": StringAttr("add"), "dims": ints(1)},
        "scan %a: <2 x 3 x f32> by add along 1",
    ),
    (ts.DotOp, [M23, TensorType((3, 4), "f32")], {}, "dot %a: <2 x 3 x f32>, %b: <3 x 4 x f32>"),
    (
        ts.ConcatenateOp,
        [M23, M23],
        {"axis": IntAttr(0)},
        "concatenate %a: <2 x 3 x f32>, %b: <2 x 3 x f32> along 0",
    ),
    (ts.TransposeOp, [M23], {}, "transpose %a: <2 x 3 x f32>"),
    (ts.ReverseOp, [M23], {"dims": ints(0, 1)}, "reverse %a: <2 x 3 x f32> along 0, 1"),
    (
        ts.SliceOp,
        [M23],
        {"lower": IntAttr(0), "upper": IntAttr(1)},
        "slice %a: <2 x 3 x f32> from 0 upto 1",
    ),
    (ts.RankOp, [M23], {}, "rank of %a: <2 x 3 x f32>"),
    (ts.ShapeOp, [M23], {}, "shape of %a: <2 x 3 x f32>"),
    (ts.UnitCountOp, [M23], {}, "unitCount of %a: <2 x 3 x f32>"),
    (ts.PadShapeOp, [M23], {"index": IntAttr(2)}, "padShape %a: <2 x 3 x f32> at 2"),
    (
        ts.SqueezeShapeOp,
        [TensorType((1, 3), "f32")],
        {"index": IntAttr(0)},
        "squeezeShape %a: <1 x 3 x f32> at 0",
    ),
    (ts.ShapeCastOp, [M23], {"shape": ints(3, 2)}, "shapeCast %a: <2 x 3 x f32> to 3 x 2"),
    (
        ts.ShapeCastOp,
        [TensorType((1, 1), "f32")],
        {"shape": ints()},
        "shapeCast %a: <1 x 1 x f32> to scalar",
    ),
    (
        ts.BitCastOp,
        [M23],
        {"target": TensorType((6,), "i32")},
        "bitCast %a: <2 x 3 x f32> to <6 x i32>",
    ),
]

MEMORY_CASES = [
    (
        mem.ExtractOp,
        [PAIR],
        {"keys": ArrayAttr([StringAttr("b"), IntAttr(1)])},
        "extract #b, 1 from %a: $Pair",
    ),
    (
        mem.ExtractOp,
        [TensorType((4, 2), "f32"), I64],
        {"keys": ArrayAttr([ArrayAttr([]), IntAttr(1)])},
        "extract %b: i64, 1 from %a: <4 x 2 x f32>",
    ),
    (
        mem.InsertOp,
        [F32, PAIR],
        {"keys": ArrayAttr([StringAttr("a")])},
        "insert %a: f32 to %b: $Pair at #a",
    ),
    (mem.CreateStackOp, [], {}, "createStack"),
    (mem.DestroyStackOp, [StackType()], {}, "destroyStack %a: stack"),
    (mem.PushOp, [F32, StackType()], {}, "push %a: f32 to %b: stack"),
    (mem.PopOp, [StackType()], {"elem_type": M23}, "pop <2 x 3 x f32> from %a: stack"),
    (mem.AllocateStackOp, [], {"elem_type": F32, "count": IntAttr(4)}, "allocateStack f32 count 4"),
    (mem.AllocateHeapOp, [I64], {"elem_type": PAIR}, "allocateHeap $Pair count %a: i64"),
    (mem.AllocateBoxOp, [], {"elem_type": F32}, "allocateBox f32"),
    (mem.ProjectBoxOp, [BoxType(F32)], {}, "projectBox %a: box{f32}"),
    (mem.RetainOp, [BoxType(F32)], {}, "retain %a: box{f32}"),
    (mem.ReleaseOp, [BoxType(F32)], {}, "release %a: box{f32}"),
    (mem.DeallocateOp, [PointerType(F32)], {}, "deallocate %a: *f32"),
    (mem.LoadOp, [PointerType(F32)], {}, "load %a: *f32"),
    (mem.StoreOp, [F32, PointerType(F32)], {}, "store %a: f32 to %b: *f32"),
    (
        mem.ElementPointerOp,
        [PointerType(PAIR)],
        {"keys": ArrayAttr([StringAttr("b"), IntAttr(0)])},
        "elementPointer %a: *$Pair at #b, 0",
    ),
    (
        mem.CopyOp,
        [PointerType(F32), PointerType(F32), I64],
        {},
        "copy from %a: *f32 to %b: *f32 count %c: i64",
    ),
    (mem.TrapOp, [], {}, "trap"),
    (mem.RandomOp, [F32, F32], {"shape": ints(2, 3)}, "random 2 x 3 from %a: f32 upto %b: f32"),
    (mem.RandomOp, [I64, I64], {"shape": ints()}, "random scalar from %a: i64 upto %b: i64"),
    (
        mem.ApplyIndirectOp,
        [PointerType(FunctionType([F32], F32)), F32],
        {},
        "apply %a(%b: f32): *(f32) -> f32",
    ),
]


@pytest.mark.parametrize(
    ("cls", "args", "props", "text"), ELEMENTWISE_CASES + TENSOR_CASES + MEMORY_CASES
)
def test_instruction_syntax(
    cls: type[Operation], args: list[Attribute], props: dict[str, Attribute], text: str
) -> None:
    printed = line(cls, args, **props)
    void = not cls.infer(args, props, SYMBOLS)  # type: ignore[attr-defined]
    assert printed == (text if void else f"%r = {text}")


def test_reduce_with_inline_init_and_function_combinator() -> None:
    fn = GlobalRefOp("plus", FunctionType([F32, F32], F32))
    props = {"dims": ints(0, 1)}
    assert line(ts.ReduceOp, [M23], extra=[inline(0), fn], **props) == (
        "%r = reduce %a: <2 x 3 x f32> by @plus: (f32, f32) -> f32 init 0: f32 along 0, 1"
    )


def test_reduce_window_and_scan_with_function() -> None:
    x = TensorType((1, 1, 4, 4), "f32")
    props = {
        "combinator": StringAttr("max"),
        "window": ints(1, 1, 2, 2),
        "strides": ints(1, 1, 2, 2),
        "padding": StringAttr("none"),
    }
    assert line(ts.ReduceWindowOp, [x], extra=[inline(float("-inf"))], **props) == (
        "%r = reduceWindow %a: <1 x 1 x 4 x 4 x f32> by max init -inf: f32 dims 1, 1, 2, 2 "
        "strides 1, 1, 2, 2 padding none"
    )
    fn = GlobalRefOp("plus", FunctionType([F32, F32], F32))
    assert line(ts.ScanOp, [M23], extra=[fn], dims=ints(0)) == (
        "%r = scan %a: <2 x 3 x f32> by @plus: (f32, f32) -> f32 along 0"
    )


def test_convolve_prints_only_present_clauses() -> None:
    x, k = TensorType((1, 6, 32, 48), "f32"), TensorType((6, 1, 3, 3), "f32")
    full = {
        "strides": ints(2, 4),
        "padding": ints(1, 1, 2, 2),
        "left_dilation": ints(1, 1),
        "right_dilation": ints(2, 6),
        "groups": IntAttr(6),
    }
    assert line(ts.ConvolveOp, [x, k], **full) == (
        "%r = convolve %a: <1 x 6 x 32 x 48 x f32> kernel %b: <6 x 1 x 3 x 3 x f32> strides 2, 4 "
        "padding (1, 1), (2, 2) leftDilation 1, 1 rightDilation 2, 6 groups 6"
    )
    k6 = TensorType((2, 6, 3, 3), "f32")
    assert line(ts.ConvolveOp, [x, k6], padding=ints(0, 0, 1, 1)) == (
        "%r = convolve %a: <1 x 6 x 32 x 48 x f32> kernel %b: <2 x 6 x 3 x 3 x f32> padding (0, 0), (1, 1)"
    )


def test_direct_apply_and_void_call() -> None:
    fn = FunctionType([F32], F32)
    op = make(
        mem.ApplyOp, [], None, callee=StringAttr("g"), callee_type=FunctionType([], TupleType([]))
    )
    assert line_of(op, [], []) == "apply @g(): () -> ()"
    block = Block(arg_types=[F32])
    block.args[0]._name = "x"
    call = make(mem.ApplyOp, [block.args[0]], None, callee=StringAttr("g"), callee_type=fn)
    block.add_ops([call, ReturnOp(call.results[0])])
    text = print_function(FuncOp("h", fn, Region([block])), SYMBOLS)
    assert "    %0.0 = apply @g(%x: f32): (f32) -> f32\n    return %0.0: f32" in text


def test_global_refs_print_at_their_uses() -> None:
    ref = GlobalRefOp("counter", PointerType(I64))
    assert line(mem.LoadOp, [], extra=[ref]) == "%r = load @counter: *i64"


def test_literal_forms() -> None:
    tree = (
        "tensor",
        (
            ("tensor", (("int", 1), ("float", 2.0))),
            ("tensor", (("float", 1e-05), ("float", float("nan")))),
        ),
    )
    assert format_literal(tree, TensorType((2, 2), "f32")) == (
        "<<1: f32, 2.0: f32>: <2 x f32>, <1e-05: f32, nan: f32>: <2 x f32>>: <2 x 2 x f32>"
    )
    assert format_literal(("int", 1), M23) == "1: <2 x 3 x f32>"
    assert format_literal(("bool", False), BOOL) == "false: bool"
    assert format_literal(("float", float("-inf")), F32) == "-inf: f32"
    assert (
        format_literal(("tuple", (("int", 1), ("float", 2.5))), TupleType([I64, F32]))
        == "(1: i64, 2.5: f32): (i64, f32)"
    )
    assert (
        format_literal(("array", (("int", 1), ("int", 2))), ArrayType(2, I64))
        == "[1: i64, 2: i64]: [2 x i64]"
    )
    assert format_literal(("zero",), M23) == "zero: <2 x 3 x f32>"
    assert format_literal(("undefined",), PAIR) == "undefined: $Pair"
    assert format_literal(("null",), PointerType(F32)) == "null: *f32"
    struct = ("struct", (("a", ("float", 0.5)), ("b", ("operand", 0))))
    assert format_literal(struct, PAIR, SYMBOLS, lambda k: f"%v{k}: <2 x i32>") == (
        "{#a = 0.5: f32, #b = %v0: <2 x i32>}: $Pair"
    )
    assert (
        format_literal(("enum", "circle", (("int", 2),)), SHAPE, SYMBOLS)
        == "?circle(2: f32): $Shape"
    )
    assert format_literal(("enum", "none", ()), SHAPE, SYMBOLS) == "?none(): $Shape"


def test_literal_nesting_is_iterative() -> None:
    depth = 1500
    tree: tuple = ("int", 7)
    t: Attribute = I64
    for _ in range(depth):
        tree, t = ("tuple", (tree,)), TupleType([t])
    text = format_literal(tree, t)
    assert text.startswith("(" * depth + "7: i64): (i64)")
    assert text.count("7") == 1


def test_literal_instruction_with_operand_elements() -> None:
    block = Block(arg_types=[F32])
    block.args[0]._name = "s"
    lit = LiteralOp(
        LiteralAttr(("tensor", (("operand", 0), ("int", 3)))),
        TensorType((2,), "f32"),
        [block.args[0]],
    )
    block.add_ops([lit, ReturnOp()])
    text = print_function(FuncOp("f", FunctionType([F32], TupleType([])), Region([block])))
    assert "    %0.0 = literal <%s: f32, 3: f32>: <2 x f32>" in text


def test_anonymous_numbering_counts_void_but_not_inline_ops() -> None:
    block = Block(arg_types=[PointerType(F32), F32])
    block.args[0]._name, block.args[1]._name = "p", "x"
    one = inline(1.0)
    store = make(mem.StoreOp, [block.args[1], block.args[0]])
    add = make(ew.AddOp, [block.args[1], one.results[0]])
    block.add_ops([store, one, add, ReturnOp(add.results[0])])
    text = print_function(FuncOp("f", FunctionType([PointerType(F32), F32], F32), Region([block])))
    assert text.splitlines()[2:5] == [
        "    store %x: f32 to %p: *f32",
        "    %0.1 = add %x: f32, 1.0: f32",
        "    return %0.1: f32",
    ]


def test_clashing_and_missing_names_stay_unique() -> None:
    entry, second = Block(arg_types=[F32]), Block(arg_types=[F32])
    entry.args[0]._name = "x"
    second.args[0]._name = "x"  # clashes with the entry parameter
    a = make(ew.NegateOp, [entry.args[0]])
    a.results[0]._name = "x"  # clashes too
    entry.add_ops([a, BranchOp(second, [a.results[0]])])
    b = make(ew.ExpOp, [second.args[0]])
    b.results[0]._name = "not a name"
    second.add_ops([b, ReturnOp(b.results[0])])
    second._name = "entry"  # only block 0 may be 'entry
    text = print_function(FuncOp("f", FunctionType([F32], F32), Region([entry, second])))
    assert text.splitlines()[1:] == [
        "'entry(%x: f32):",
        "    %0.0 = negate %x: f32",
        "    branch 'bb1(%0.0: f32)",
        "'bb1(%arg1_0: f32):",
        "    %1.0 = exp %arg1_0: f32",
        "    return %1.0: f32",
        "}",
    ]


def test_control_flow_terminators() -> None:
    entry, then, other = Block(arg_types=[BOOL, SHAPE]), Block(arg_types=[F32]), Block()
    entry.args[0]._name, entry.args[1]._name = "c", "e"
    then._name, then.args[0]._name = "then", "r"
    entry.add_ops(
        [one := inline(1.5), ConditionalOp(entry.args[0], then, [one.results[0]], other, [])]
    )
    then.add_ops([BranchEnumOp(entry.args[1], [("circle", then), ("none", other)])])
    other.add_ops([ReturnOp()])
    func = FuncOp("cf", FunctionType([BOOL, SHAPE], TupleType([])), Region([entry, then, other]))
    assert print_function(func, SYMBOLS).splitlines() == [
        "func @cf: (bool, $Shape) -> () {",
        "'entry(%c: bool, %e: $Shape):",
        "    conditional %c: bool then 'then(1.5: f32) else 'bb2()",
        "'then(%r: f32):",
        "    branchEnum %e: $Shape case ?circle 'then case ?none 'bb2",
        "'bb2():",
        "    return",
        "}",
    ]


def test_module_declarations_keep_their_order() -> None:
    fn = FunctionType([F32], F32)
    module = ModuleOp(
        [
            EnumOp("Shape", [("circle", [F32]), ("pair", [PAIR, I64]), ("none", [])]),
            StructOp("Pair", [("a", F32), ("b", TensorType((2,), "i32"))]),
            TypeAliasOp("Handle", None),
            TypeAliasOp("P", PointerType(PAIR)),
            VarOp("g", ArrayType(3, F32)),
            FuncOp("ext", fn, decl=StringAttr("extern"), inline=UnitAttr()),
            FuncOp(
                "d",
                FunctionType([F32, F32], TupleType([F32, F32])),
                decl=StringAttr("adjoint"),
                primal=StringAttr("ext"),
                from_index=IntAttr(0),
                wrt=ints(0),
                keeping=ints(0, 1),
                seedable=UnitAttr(),
            ),
            FuncOp("grad", fn, decl=StringAttr("gradient"), primal=StringAttr("ext")),
        ]
    )
    module.attributes["dlc.name"] = StringAttr('a "q"\\\n\t\r')
    module.attributes["dlc.stage"] = StringAttr("canonical")
    assert print_module(module) == (
        'module "a \\"q\\"\\\\\\n\\t\\r"\nstage canonical\n'
        "\nenum $Shape {\n    ?circle(f32)\n    ?pair($Pair, i64)\n    ?none()\n}\n"
        "\nstruct $Pair {\n    #a: f32\n    #b: <2 x i32>\n}\n"
        "\ntype $Handle = opaque\n"
        "\ntype $P = *$Pair\n"
        "\nvar @g: [3 x f32]\n"
        "\n!inline\n[extern]\nfunc @ext: (f32) -> f32\n"
        "\n[adjoint @ext from 0 wrt 0 keeping 0, 1 seedable]\nfunc @d: (f32, f32) -> (f32, f32)\n"
        "\n[gradient @ext]\nfunc @grad: (f32) -> f32\n"
    )


def test_unknown_operation_is_a_diagnostic() -> None:
    from xdsl.dialects.test import TestOp

    from dlc.diagnostics import DiagnosticError

    block = Block()
    block.add_ops([TestOp.create(), ReturnOp()])
    with pytest.raises(DiagnosticError, match="does not know the operation 'test.op'"):
        print_function(FuncOp("f", FunctionType([], TupleType([])), Region([block])))


def test_every_instruction_op_has_a_formatter() -> None:
    from dlc.dialects.graph import all_graph_ops
    from dlc.parser.printer import FORMATTERS

    not_instructions = {StructOp, EnumOp, TypeAliasOp, VarOp, FuncOp, GlobalRefOp}
    missing = [
        cls.__name__
        for cls in all_graph_ops()
        if cls not in not_instructions and not any(c in FORMATTERS for c in cls.__mro__)
    ]
    assert missing == []
