"""Tests of the DLVM front end: grammar, newline rules, IR building, scale limits."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import ModuleOp

from dlc.diagnostics import DiagnosticError, get_loc
from dlc.dialects.graph import (
    ConditionalOp,
    EnumOp,
    FuncOp,
    GlobalRefOp,
    LiteralOp,
    ReturnOp,
    StructOp,
    TypeAliasOp,
    VarOp,
)
from dlc.dialects.graph_memory import ApplyIndirectOp, ApplyOp
from dlc.dialects.graph_tensor import DotOp
from dlc.dialects.graph_types import FunctionType, NominalType, PointerType, TensorType, TupleType
from dlc.parser import parse_module

EXAMPLE = """\
module "example"
stage raw

struct $Params {
    #w: <784 x 10 x f32>
    #b: <1 x 10 x f32>
}

type $P = $Params
var @params: $Params

func @inference: (<1 x 784 x f32>, <784 x 10 x f32>, <1 x 10 x f32>) -> <1 x 10 x f32> {
'entry(%x: <1 x 784 x f32>, %w: <784 x 10 x f32>, %b: <1 x 10 x f32>):
    %0.0 = dot %x: <1 x 784 x f32>, %w: <784 x 10 x f32>
    %0.1 = add %0.0: <1 x 10 x f32>, %b: <1 x 10 x f32>
    return %0.1: <1 x 10 x f32>
}

[adjoint @inference wrt 1, 2 keeping 0 seedable]
func @inference_grad: (<1 x 784 x f32>, <784 x 10 x f32>, <1 x 10 x f32>, <1 x 10 x f32>)
                     -> (<784 x 10 x f32>, <1 x 10 x f32>, <1 x 10 x f32>)

!inline
func @loop: (i32) -> i32 {
'entry(%n: i32):
    branch 'header(0: i32)
'header(%i: i32):
    %1.0 = lessThan %i: i32, %n: i32
    conditional %1.0: bool then 'body() else 'exit()
'body():
    %2.0 = add %i: i32, 1: i32
    branch 'header(%2.0: i32)
'exit():
    return %i: i32
}

[extern]
func @ext: (f32) -> f32
"""

ALL_INSTRUCTIONS = """\
module "all"
stage canonical

enum $E {
    ?none()
    ?some(f32, *$E)
}
struct $S {
    #a: f32
    #b: <2 x i32>
}
type $O = opaque
type $T = <2 x 3 x f32>
var @g: $E

func @comb: (f32, f32) -> f32 {
'entry(%a: f32, %b: f32):
    %s = add %a: f32, %b: f32
    return %s: f32
}

func @all: ($T, <2 x 3 x bool>, i64, *(f32, f32) -> f32) -> () {
'entry(%x: <2 x 3 x f32>, %m: <2 x 3 x bool>, %n: i64, %fp: *(f32, f32) -> f32):
    %l0 = literal 1: <2 x 3 x f32>
    %l1 = literal <<1: f32, 2.5: f32, -3: f32>: <3 x f32>, <1e-3: f32, inf: f32, -inf: f32>: <3 x f32>>: <2 x 3 x f32>
    %l2 = literal (1: f32, true: bool): (f32, bool)
    %l3 = literal [1: i32, 2: i32]: [2 x i32]
    %l4 = literal {#a = 1.0: f32, #b = <1: i32, 2: i32>: <2 x i32>}: $S
    %e0 = literal ?none(): $E
    %l5 = literal ?some(1: f32, @g: *$E): $E
    %z = literal zero: <4 x f32>
    %u = literal undefined: $O
    %nl = literal null: *f32
    %t1 = tanh %x: $T
    %t2 = negate %x: <2 x 3 x f32>
    %nm = not %m: <2 x 3 x bool>
    %b1 = multiply %x: <2 x 3 x f32>, 2: f32
    %b2 = and %m: <2 x 3 x bool>, true: bool
    %b3 = lessThan %x: <2 x 3 x f32>, 0: f32
    %sel = select %x: <2 x 3 x f32>, %l0: <2 x 3 x f32> by %m: <2 x 3 x bool>
    %dc = dataTypeCast %x: <2 x 3 x f32> to f64
    %sc = scan %x: <2 x 3 x f32> by add along 1
    %rd = reduce %x: <2 x 3 x f32> by @comb: (f32, f32) -> f32 init 0: f32 along 0, 1
    %rw = reduceWindow %x: <2 x 3 x f32> by max init 0: f32 dims 1, 2 strides 1, 1 padding half
    %cc = concatenate %x: <2 x 3 x f32>, %l0: <2 x 3 x f32> along 0
    %rv = reverse %x: <2 x 3 x f32> along 1
    %sl = slice %x: <2 x 3 x f32> from 0 upto 1
    %img = literal 0: <1 x 2 x 5 x 5 x f32>
    %ker = literal 1: <4 x 2 x 3 x 3 x f32>
    %cv = convolve %img: <1 x 2 x 5 x 5 x f32> kernel %ker: <4 x 2 x 3 x 3 x f32> strides 1, 1 padding (1, 1), (1, 1) leftDilation 1, 1 rightDilation 1, 1 groups 1
    %cv2 = convolve %img: <1 x 2 x 5 x 5 x f32> kernel %ker: <4 x 2 x 3 x 3 x f32>
    %rk = rank of %x: <2 x 3 x f32>
    %sh = shape of %x: <2 x 3 x f32>
    %uc = unitCount of %x: <2 x 3 x f32>
    %ps = padShape %x: <2 x 3 x f32> at 0
    %sq = squeezeShape %ps: <1 x 2 x 3 x f32> at 0
    %cast = shapeCast %x: <2 x 3 x f32> to 3 x 2
    %one = literal 1: <1 x f32>
    %cast2 = shapeCast %one: <1 x f32> to scalar
    %bc = bitCast %x: <2 x 3 x f32> to <6 x i32>
    %tr = transpose %x: <2 x 3 x f32>
    %d = matrixMultiply %x: <2 x 3 x f32>, %tr: <3 x 2 x f32>
    %ex = extract 1, 2 from %x: <2 x 3 x f32>
    %ex2 = extract #b, 0 from %l4: $S
    %in = insert 5: f32 to %l4: $S at #a
    %ap = apply @comb(1: f32, 2: f32): (f32, f32) -> f32
    %ap2 = apply %fp(1: f32, 2: f32): *(f32, f32) -> f32
    %st = createStack
    push %x: <2 x 3 x f32> to %st: stack
    %pp = pop <2 x 3 x f32> from %st: stack
    destroyStack %st: stack
    %as = allocateStack $S count 2
    %ah = allocateHeap f32 count %n: i64
    %ab = allocateBox <2 x f32>
    %pb = projectBox %ab: box{<2 x f32>}
    retain %ab: box{<2 x f32>}
    release %ab: box{<2 x f32>}
    deallocate %ah: *f32
    %ld = load @g: *$E
    store %l5: $E to @g: *$E
    %ep = elementPointer %as: *$S at #b, 0
    copy from %as: *$S to %as: *$S count 1: i64
    %rnd = random 2 x 3 from 0: f32 upto 1: f32
    %rs = random scalar from 0: i32 upto 10: i32
    branchEnum %l5: $E case ?none 'a case ?some 'b
'a():
    trap
    return
'b(%v: f32, %rest: *$E):
    return
}
"""


def funcs(module: ModuleOp) -> dict[str, FuncOp]:
    return {op.sym_name.data: op for op in module.ops if isinstance(op, FuncOp)}


def instructions(func: FuncOp) -> list[str]:
    return [op.name for block in func.body.blocks for op in block.ops]


def test_example_module_header_and_order() -> None:
    module = parse_module(EXAMPLE, "example.dl")
    assert module.attributes["dlc.name"].data == "example"  # type: ignore[attr-defined]
    assert module.attributes["dlc.stage"].data == "raw"  # type: ignore[attr-defined]
    kinds = [type(op) for op in module.ops]
    assert kinds == [StructOp, TypeAliasOp, VarOp, FuncOp, FuncOp, FuncOp, FuncOp]


def test_example_functions() -> None:
    fs = funcs(parse_module(EXAMPLE))
    inference = fs["inference"]
    entry = inference.body.blocks.first
    assert entry is not None and entry._name == "entry"  # type: ignore[attr-defined]
    assert [a._name for a in entry.args] == ["x", "w", "b"]
    dot = entry.first_op
    assert isinstance(dot, DotOp) and dot.results[0]._name is None
    assert dot.results[0].type == TensorType((1, 10), "f32")
    grad = fs["inference_grad"]
    assert grad.decl.data == "adjoint" and grad.primal.data == "inference"  # type: ignore[union-attr]
    assert [x.data for x in grad.wrt.data] == [1, 2]  # type: ignore[union-attr]
    assert [x.data for x in grad.keeping.data] == [0]  # type: ignore[union-attr]
    assert grad.seedable is not None and not grad.body.blocks
    assert fs["loop"].inline is not None
    assert fs["ext"].decl.data == "extern"  # type: ignore[union-attr]
    loop_ops = instructions(fs["loop"])
    assert loop_ops.count("graph.literal") == 2  # inline `0: i32` and `1: i32`


def test_locations_recorded() -> None:
    module = parse_module(EXAMPLE, "example.dl")
    inference = funcs(module)["inference"]
    loc = get_loc(inference)
    assert loc is not None and (loc.filename, loc.line) == ("example.dl", 12)
    dot = inference.body.blocks.first.first_op  # type: ignore[union-attr]
    loc = get_loc(dot)
    assert loc is not None and (loc.line, loc.column) == (14, 12)
    assert "dot %x" in loc.source_line


def test_all_instruction_kinds() -> None:
    module = parse_module(ALL_INSTRUCTIONS, "all.dl")
    f = funcs(module)["all"]
    names = set(instructions(f))
    for expected in (
        "graph.convolve",
        "graph.reduce_window",
        "graph.branch_enum",
        "graph.copy",
        "graph.random",
        "graph.element_pointer",
        "graph.apply",
        "graph.apply_indirect",
        "graph.unit_count",
        "graph.trap",
    ):
        assert expected in names
    ops = [op for block in f.body.blocks for op in block.ops]
    apply = next(op for op in ops if isinstance(op, ApplyOp))
    assert apply.callee.data == "comb"
    assert isinstance(apply.callee_type, FunctionType)
    assert any(isinstance(op, ApplyIndirectOp) for op in ops)
    refs = [op for op in ops if isinstance(op, GlobalRefOp)]
    assert {op.symbol.data for op in refs} == {"comb", "g"}
    assert refs[0].results[0].type in (
        PointerType(NominalType("E", "enum")),
        funcs(module)["comb"].function_type,
    )


def test_alias_resolution_and_opaque() -> None:
    module = parse_module(ALL_INSTRUCTIONS)
    f = funcs(module)["all"]
    assert f.function_type.args[0] == TensorType((2, 3), "f32")
    aliases = [op for op in module.ops if isinstance(op, TypeAliasOp)]
    assert aliases[0].aliased is None and aliases[1].aliased == TensorType((2, 3), "f32")
    enum = next(op for op in module.ops if isinstance(op, EnumOp))
    assert enum.cases[1] == (
        "some",
        (TensorType((), "f32"), PointerType(NominalType("E", "enum"))),
    )


def test_literal_payloads() -> None:
    f = funcs(parse_module(ALL_INSTRUCTIONS))["all"]
    lits = {op.results[0]._name: op for op in f.body.blocks.first.ops if isinstance(op, LiteralOp)}  # type: ignore[union-attr]
    assert lits["l0"].value.data == ("int", 1)
    inner = lits["l1"].value.data
    assert inner[0] == "tensor" and inner[1][1] == (
        "tensor",
        (("float", 0.001), ("float", float("inf")), ("float", float("-inf"))),
    )
    assert lits["l4"].value.data == (
        "struct",
        (("a", ("float", 1.0)), ("b", ("tensor", (("int", 1), ("int", 2))))),
    )
    assert lits["l5"].value.data == ("enum", "some", (("int", 1), ("operand", 0)))
    assert lits["z"].value.data == ("zero",)
    assert lits["nl"].value.data == ("null",)


NEWLINES = """\

// leading comment
module "nl"   // trailing comment
stage raw


struct $S {

    #a:
        f32

}
func @f: (f32,
          f32)
    -> (f32,
        f32)
{
'entry(%x: f32,
       %y: f32):
    %t = literal (%x: f32,
                  %y: f32): (f32, f32)
    %s = add %x: f32,
             %y: f32
    return %t:
        (f32, f32)
}

"""


def test_newline_rules() -> None:
    f = funcs(parse_module(NEWLINES))["f"]
    assert instructions(f) == ["graph.literal", "graph.add", "graph.return"]


def test_crlf_and_cr_newlines() -> None:
    text = EXAMPLE.replace("\n", "\r\n")
    assert len(funcs(parse_module(text))) == 4
    assert len(funcs(parse_module(EXAMPLE.replace("\n", "\r")))) == 4


def test_return_then_named_instruction_is_two_instructions() -> None:
    text = 'module "m"\nstage raw\nfunc @f: () -> () {\n\'entry():\n    return\n    %x = literal 1: f32\n}\n'
    with pytest.raises(DiagnosticError, match="terminator is not the last instruction"):
        parse_module(text)


def test_forward_function_reference_and_blocks() -> None:
    text = """module "m"
stage raw
func @f: (f32) -> f32 {
'entry(%x: f32):
    branch 'later(%x: f32)
'later(%y: f32):
    %r = apply @g(%y: f32): (f32) -> f32
    return %r: f32
}
func @g: (f32) -> f32 {
'entry(%x: f32):
    return %x: f32
}
"""
    assert set(funcs(parse_module(text))) == {"f", "g"}


def test_gradient_synonym_and_from() -> None:
    text = """module "m"
stage optimizable
[extern]
func @t: (f32, f32) -> (f32, f32)
[adjoint @t from 1 seedable]
func @g: (f32, f32, f32) -> (f32, f32)
[gradient @t from 0 wrt 1 keeping 0, 1]
func @h: (f32, f32) -> (f32, f32, f32)
"""
    fs = funcs(parse_module(text))
    assert fs["h"].decl.data == "gradient" and fs["g"].from_index.data == 1  # type: ignore[union-attr]


def test_bytes_input_and_floats() -> None:
    text = 'module "m"\nstage raw\nfunc @f: () -> f64 {\n\'entry():\n    %a = literal -2E+10: f64\n    %b = add %a: f64, nan: f64\n    return %b: f64\n}\n'
    f = funcs(parse_module(text.encode()))["f"]
    assert f.body.blocks.first.first_op.value.data == ("float", -2e10)  # type: ignore[union-attr]


def test_void_function_and_tuple_types() -> None:
    text = 'module "m"\nstage raw\nfunc @f: (void, (f32)) -> void {\n\'entry(%a: (), %b: (f32)):\n    return\n}\n'
    f = funcs(parse_module(text))["f"]
    assert f.function_type == FunctionType(
        [TupleType([]), TupleType([TensorType((), "f32")])], TupleType([])
    )
    assert isinstance(f.body.blocks.first.last_op, ReturnOp)  # type: ignore[union-attr]


def test_conditional_operands() -> None:
    f = funcs(parse_module(EXAMPLE))["loop"]
    cond = next(op for b in f.body.blocks for op in b.ops if isinstance(op, ConditionalOp))
    assert cond.then_block._name == "body" and cond.else_block._name == "exit"  # type: ignore[attr-defined]


def test_large_function_parses() -> None:
    """A 20,000-line function parses (iteratively: no recursion limit). Its speed is a
    benchmark's business (tools/bench_compile.py), not a timed assertion here."""
    lines = [
        'module "big"',
        "stage raw",
        "func @f: (<2 x 3 x f32>) -> <2 x 3 x f32> {",
        "'entry(%x0: <2 x 3 x f32>):",
    ]
    lines += [f"    %x{i} = add %x{i - 1}: <2 x 3 x f32>, 1.5: f32" for i in range(1, 20000)]
    lines += ["    return %x19999: <2 x 3 x f32>", "}"]
    module = parse_module("\n".join(lines) + "\n")
    assert len(instructions(funcs(module)["f"])) == 20000 + 19999  # plus the inline literals


def test_deep_literal_nesting_is_a_diagnostic() -> None:
    depth = 2000
    text = (
        'module "m"\nstage raw\nfunc @f: () -> () {\n\'entry():\n    %a = literal '
        + "(" * depth
        + ")" * depth
        + ": ()\n    return\n}\n"
    )
    with pytest.raises(DiagnosticError, match="nesting deeper than 100 levels"):
        parse_module(text)


def test_deep_pointer_type_is_a_diagnostic() -> None:
    text = 'module "m"\nstage raw\nvar @a: ' + "*" * 2000 + "f32\n"
    with pytest.raises(DiagnosticError, match="type nesting deeper than 100 levels"):
        parse_module(text)


def test_nesting_within_limit_parses() -> None:
    depth = 90
    t = "*" * depth + "f32"
    text = f'module "m"\nstage raw\nvar @a: {t}\nvar @b: ' + "(" * depth + ")" * depth + "\n"
    assert len(list(parse_module(text).ops)) == 2
