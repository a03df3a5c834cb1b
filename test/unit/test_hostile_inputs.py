"""Regression tests: hostile inputs that once crashed or hung the compiler. Each must be
a located `DiagnosticError` (or a correct result), never a traceback or a hang."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import StringAttr

import dlc
from dlc.api import cache_key, compile_graph_module
from dlc.dialects.graph import Symbols
from dlc.dialects.graph_types import NominalType, PointerType, TensorType, TupleType
from dlc.dialects.layout import LayoutError, layout
from dlc.pipeline import Options

# DLVM's own FileCheck/enum.dl declares enums like this one.
RECURSIVE_ENUM = """module "enum"
stage raw

enum $Tree {
    ?leaf(f32)
    ?node($Tree, f32)
}

func @f: (f32) -> f32 {
'entry(%x: f32):
    return %x: f32
}
"""


RECURSIVE_STRUCT = """module "struct"
stage raw

struct $List {
    #head: f32
    #tail: ($List, i64)
}
"""


@pytest.mark.parametrize("entry", [dlc.parse, dlc.compile])
def test_recursive_struct_is_a_located_error(entry) -> None:  # noqa: ANN001
    """`layout` once looped forever on a type that holds itself by value; a struct with
    no enum on the cycle still has infinite size."""
    with pytest.raises(dlc.DiagnosticError) as info:
        entry(RECURSIVE_STRUCT, filename="struct.dl")
    assert (info.value.filename, info.value.line, info.value.column) == ("struct.dl", 4, 8)
    assert info.value.message == (
        "recursive type $List has infinite size: it contains itself by value "
        "(hold it through a pointer, a box or an enum case)"
    )


def test_recursive_enum_parses() -> None:
    """DLVM's recursive enums are laid out in boxes, not refused."""
    module = dlc.parse(RECURSIVE_ENUM, filename="enum.dl")
    assert "?node($Tree, f32)" in dlc.print_module(module)


def test_layout_of_unverified_recursive_type_stops() -> None:
    """Unverified IR reaching `layout` gets a LayoutError, not an endless loop."""
    node = NominalType("Node", "struct")
    symbols = Symbols(structs={"Node": [("next", TupleType([node]))]})
    with pytest.raises(LayoutError, match=r"values of the recursive type \$Node"):
        layout(node, symbols)
    tree = NominalType("Tree", "enum")
    symbols = Symbols(enums={"Tree": [("node", (TupleType([tree]),))]})
    assert layout(tree, symbols).size == 8  # indirect: a box address
    symbols = Symbols(enums={"List": [("cons", (PointerType(NominalType("List", "enum")),))]})
    assert layout(NominalType("List", "enum"), symbols).size == 32
    f32 = TensorType((), "f32")
    symbols = Symbols(structs={"P": [("a", f32), ("b", f32)]})
    assert layout(TupleType([NominalType("P", "struct")] * 2), symbols).size == 16


def _one_op(body: str, signature: str = "(f32) -> f32", params: str = "%x: f32") -> str:
    return f"""module "m"
stage raw

func @f: {signature} {{
'entry({params}):
{body}
}}
"""


@pytest.mark.parametrize(
    ("literal", "dtype", "message"),
    [
        ("1e39", "f32", "float literal 1e39 is out of range for f32"),
        ("-3.4028236e38", "f32", "float literal -3.4028236e38 is out of range for f32"),
        ("70000.0", "f16", "float literal 70000.0 is out of range for f16"),
        ("65520", "f16", "integer literal 65520 is out of range for f16"),
        ("1e400", "f64", "float literal 1e400 is out of range for f64"),
        ("1" + "0" * 309, "f64", f"integer literal 1{'0' * 309} is out of range for f64"),
    ],
)
@pytest.mark.parametrize("entry", [dlc.parse, dlc.compile])
def test_float_literal_out_of_range_is_a_located_error(
    entry,  # noqa: ANN001
    literal: str,
    dtype: str,
    message: str,
) -> None:
    """Such literals once raised OverflowError from xDSL's FloatAttr while lowering."""
    text = _one_op(
        f"    %y = add %x: {dtype}, {literal}: {dtype}\n    return %y: {dtype}",
        f"({dtype}) -> {dtype}",
        f"%x: {dtype}",
    )
    with pytest.raises(dlc.DiagnosticError) as info:
        entry(text)
    assert (info.value.line, info.value.column, info.value.message) == (6, 23, message)


def test_float_literals_at_the_edge_of_the_range_compile() -> None:
    text = _one_op(
        "    %y = literal <3.4028235e38: f32, -inf: f32, 1e-50: f32>: <3 x f32>\n"
        "    return %y: <3 x f32>",
        "() -> <3 x f32>",
        "",
    )
    got = dlc.compile(text).f()
    assert got.tolist() == [np.float32(3.4028235e38), -np.inf, 0.0]


HUGE = 18446744073709551616  # 2^64: once an xDSL VerifyException (i64 IntegerAttr)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            f"    %y = random 0 x {HUGE} from 0.0: f32 upto 1.0: f32",
            f"tensor type <0 x {HUGE} x f32> has more than 2^40 elements in its nonzero dimensions",
        ),
        (
            f"    %y = literal undefined: [{HUGE} x ()]",
            f"type [{HUGE} x ()] has more than 2^16 parts (elements and fields at all levels)",
        ),
        (
            f"    %y = allocateStack f32 count {HUGE}",
            f"allocateStack: @f would hold {4 * HUGE} bytes on the stack, more than the limit "
            "of 2^20 (use allocateHeap)",
        ),
        (
            f"    %y = random 1 x {HUGE} from 0.0: f32 upto 1.0: f32",
            f"tensor type <1 x {HUGE} x f32> has more than 2^40 elements",
        ),
    ],
)
def test_huge_integers_are_located_errors(body: str, message: str) -> None:
    text = _one_op(f"{body}\n    return %x: f32")
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile(text)
    assert (info.value.line, info.value.column, info.value.message) == (6, 10, message)


@pytest.mark.parametrize(
    ("clause", "message"),
    [
        (f"strides {HUGE}", "convolve: strides must be ≤ 2^40"),
        (f"padding (0, {HUGE})", "convolve: padding must be ≤ 2^40"),
        (f"leftDilation {HUGE}", "convolve: left dilation must be ≤ 2^40"),
        (f"rightDilation {HUGE}", "convolve: right dilation must be ≤ 2^40"),
    ],
)
def test_huge_convolution_clauses_are_located_errors(clause: str, message: str) -> None:
    t = "<1 x 1 x 5 x f32>"
    text = _one_op(
        f"    %y = convolve %x: {t} kernel %x: {t} {clause}\n    return 0.0: f32",
        f"({t}) -> f32",
        f"%x: {t}",
    )
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile(text)
    assert (info.value.line, info.value.column, info.value.message) == (6, 10, message)


def test_deep_recursion_through_large_stack_frames_traps() -> None:
    """20,000 calls with 8 KiB `allocateStack` frames once overflowed the native stack
    (a segfault): the stack guard on entry traps before the native stack runs out."""
    text = _one_op(
        """    %p = allocateStack i64 count 1024
    store %d: i64 to %p: *i64
    %c = greaterThan %d: i64, 0: i64
    conditional %c: bool then 'rec() else 'done()
'rec():
    %e = subtract %d: i64, 1: i64
    %r = apply @f(%e: i64): (i64) -> i64
    %v = load %p: *i64
    %s = add %r: i64, %v: i64
    return %s: i64
'done():
    return 0: i64""",
        "(i64) -> i64",
        "%d: i64",
    )
    compiled = dlc.compile(text, filename="deep.dl")
    assert compiled.f(100) == 5050
    with pytest.raises(dlc.TrapError, match=r"deep.dl:\d+:\d+: stack overflow in @f"):
        compiled.f(19_000)
    assert compiled.f(10) == 55


SURROGATE_NAME = 'module "\ud800"\nstage raw\n\nfunc @f: (f32) -> f32 {\n\'entry(%x: f32):\n    return %x: f32\n}\n'


@pytest.mark.parametrize("entry", [dlc.parse, dlc.compile])
def test_lone_surrogate_in_the_source_is_a_located_error(entry) -> None:  # noqa: ANN001
    """A module name with a lone surrogate once raised UnicodeEncodeError from the
    compile cache's key; no file can hold such text, so the parser rejects it."""
    with pytest.raises(dlc.DiagnosticError) as info:
        entry(SURROGATE_NAME, filename="s.dl")
    assert (info.value.line, info.value.column) == (1, 9)
    assert info.value.message == "invalid character U+D800 (a lone surrogate is not Unicode text)"
    str(info.value).encode("utf-8")  # the shown source line is printable


def test_surrogates_in_names_do_not_break_the_compile_cache() -> None:
    """A file name decoded by os.fsdecode may hold surrogates, and so may a module
    built in Python: the cache key encodes them (surrogatepass)."""
    module = dlc.parse(SURROGATE_NAME.replace("\ud800", "m"), filename="\udcff.dl")
    module.attributes["dlc.name"] = StringAttr("\udcff")
    compiled = compile_graph_module(module)
    assert compiled.f(np.float32(2)) == 2
    other = dlc.parse(SURROGATE_NAME.replace("\ud800", "m"))
    assert cache_key(module, Options()) != cache_key(other, Options())


HERE = Path(__file__).parent


def test_heap_byte_counts_that_overflow_trap() -> None:
    """`allocateHeap <8 x f32> count 2^59` once computed 32 · 2^59 bytes in i64, which
    wrapped around to 0: an empty block instead of an out-of-memory trap."""
    text = (HERE / "regress_heap_failure.dl").read_text()
    compiled = dlc.compile(text, filename="regress_heap_failure.dl")
    for count in (1 << 59, (1 << 62) + 1, -(1 << 59), (1 << 63) - 1):
        with pytest.raises(
            dlc.TrapError, match="regress_heap_failure.dl:6:10: heap allocation failed"
        ):
            compiled.f(count)
    assert compiled.f(6) == 1.0


def test_constant_heap_byte_count_that_overflows_traps() -> None:
    text = _one_op(
        "    %p = allocateHeap f32 count 4611686018427387904: i64\n"
        "    store %x: f32 to %p: *f32\n"
        "    return %x: f32"
    )
    compiled = dlc.compile(text, filename="heap.dl")
    with pytest.raises(dlc.TrapError, match="heap.dl:6:10: heap allocation failed"):
        compiled.f(np.float32(1))


COPY = """module "copy"
stage raw

func @f: (*<4 x f32>, *<4 x f32>, i64) -> () {
'entry(%from: *<4 x f32>, %to: *<4 x f32>, %n: i64):
    copy from %from: *<4 x f32> to %to: *<4 x f32> count %n: i64
    return
}
"""


def test_copy_counts_that_overflow_or_are_negative_are_out_of_bounds() -> None:
    """`copy … count -1` once passed the bounds check (addr + n < hi) and memcpy'd 2^64
    bytes (a segfault); `count 2^60` wrapped to 0 bytes and copied nothing."""
    compiled = dlc.compile(COPY, filename="copy.dl")
    source = np.arange(8, dtype=np.float32).reshape(2, 4)
    dest = np.zeros((2, 4), np.float32)
    for count in (-1, -(1 << 62), 1 << 60, 3):
        with pytest.raises(IndexError, match="copy.dl:6:5: out-of-bounds load through a pointer"):
            compiled.f(source, dest, count)
    assert not dest.any()
    compiled.f(source, dest, 2)
    np.testing.assert_array_equal(dest, source)


def test_pointer_arithmetic_that_wraps_around_is_out_of_bounds() -> None:
    """An address that wraps past 2^64 (here 2^64 - 4) once passed the bounds check,
    because addr + n wrapped to 0 <= hi: a segfault."""
    text = (HERE / "regress_pointer_oob.dl").read_text()
    compiled = dlc.compile(text, filename="regress_pointer_oob.dl", bounds_check=False)
    buffer = np.arange(4, dtype=np.float32)
    index = -(buffer.ctypes.data + 4) // 4  # the address 2^64 - 4
    with pytest.raises(IndexError, match="regress_pointer_oob.dl:7:10: out-of-bounds load"):
        compiled.f(buffer, index)
    assert compiled.f(buffer, 3) == 3.0


LOOP_ADJOINT = """module "m"
stage raw

func @f: (f32, i32) -> f32 {
'entry(%x: f32, %n: i32):
    %y = multiply %x: f32, %x: f32
    branch 'loop(0: i32)
'loop(%i: i32):
    %c = lessThan %i: i32, %n: i32
    %j = add %i: i32, 1: i32
    conditional %c: bool then 'loop(%j: i32) else 'exit()
'exit():
    return %y: f32
}

[adjoint @f wrt 0]
func @df: (f32, i32) -> (f32)
"""


def test_autodiff_of_a_loop_names_the_block_from_the_api() -> None:
    """`dlc.compile` differentiates a clone of the module, and xDSL's clone drops block
    names: the diagnostic once said "the branch to 'None closes a loop"."""
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.compile(LOOP_ADJOINT, filename="loop.dl")
    assert (info.value.line, info.value.column) == (11, 5)
    assert info.value.message == (
        "cannot differentiate @f: the branch to 'loop closes a loop; "
        "loops are not supported by autodiff yet"
    )


BRANCHY_ADJOINT = """module "m"
stage raw

func @f: (f32) -> f32 {
'entry(%x: f32):
    %c = lessThan %x: f32, 0: f32
    conditional %c: bool then 'neg() else 'pos()
'neg():
    %y_1 = negate %x: f32
    %y = multiply %y_1: f32, %x: f32
    return %y: f32
'pos():
    %z = multiply %x: f32, %x: f32
    return %z: f32
}

[adjoint @f]
func @df: (f32) -> (f32)
"""


def test_compiled_graph_ir_keeps_the_source_names_and_reparses() -> None:
    """`mod.ir("graph")` printed a clone whose blocks had lost their names ('bb1) and
    whose values had lost a `_1` suffix (xDSL's name hints strip it)."""
    compiled = dlc.compile(BRANCHY_ADJOINT)
    text = compiled.ir("graph")
    assert "conditional %c: bool then 'neg() else 'pos()" in text
    assert "%y_1 = negate %x: f32" in text
    assert dlc.print_module(dlc.parse(text)) == text
    assert compiled.df(np.float32(-3))[0] == 6


def test_function_with_more_buffers_than_ctypes_takes_still_compiles() -> None:
    """A `[2000 x f32]` argument is 2000 buffers: ctypes' 1024-parameter limit once
    failed the whole compile with ctypes.ArgumentError."""
    text = _one_op(
        "    %y = extract 5 from %a: [2000 x f32]\n    %z = add %y: f32, %x: f32\n"
        "    return %z: f32",
        "([2000 x f32], f32) -> f32",
        "%a: [2000 x f32], %x: f32",
    )
    text += "\nfunc @g: (f32) -> f32 {\n'entry(%x: f32):\n    return %x: f32\n}\n"
    compiled = dlc.compile(text)
    assert compiled.g(np.float32(3)) == 3
    message = (
        "@f is not callable from Python: it takes 2002 buffers (arguments and results, "
        "flattened), more than ctypes' 1024"
    )
    with pytest.raises(TypeError, match=re.escape(message)):
        compiled.f(tuple(np.float32(i) for i in range(2000)), np.float32(1))


@pytest.mark.parametrize(
    ("body", "line"),
    [
        # a box deallocated twice (the mutation fuzzer's find: glibc aborted the process)
        (
            """    %b = allocateBox f32
    deallocate %b: box{f32}
    deallocate %b: box{f32}
    return %x: f32""",
            8,
        ),
        # heap memory deallocated twice
        (
            """    %p = allocateHeap f32 count 4: i64
    deallocate %p: *f32
    deallocate %p: *f32
    return %x: f32""",
            8,
        ),
        # a pointer into the middle of a heap object is not an object to deallocate
        (
            """    %p = allocateHeap [4 x f32] count 1: i64
    %q = elementPointer %p: *[4 x f32] at 2
    deallocate %q: *f32
    return %x: f32""",
            8,
        ),
    ],
)
def test_invalid_deallocation_traps(body: str, line: int) -> None:
    compiled = dlc.compile(_one_op(body), filename="free.dl")
    message = rf"free.dl:{line}:5: deallocate of memory that is not a live heap object"
    with pytest.raises(dlc.TrapError, match=message):
        compiled.f(1.0)


def test_valid_deallocations_still_work() -> None:
    """A box released to zero, heap memory freed once and a stack destroyed after pushes
    go through the checked and the raw free paths without a trap."""
    body = """    %b = allocateBox f32
    %bp = projectBox %b: box{f32}
    store %x: f32 to %bp: *f32
    retain %b: box{f32}
    release %b: box{f32}
    %y = load %bp: *f32
    release %b: box{f32}
    %p = allocateHeap f32 count 4: i64
    store %y: f32 to %p: *f32
    %z = load %p: *f32
    deallocate %p: *f32
    %s = createStack
    push %z: f32 to %s: stack
    %w = pop f32 from %s: stack
    destroyStack %s: stack
    return %w: f32"""
    assert dlc.compile(_one_op(body)).f(2.5) == 2.5


def test_huge_integer_in_mlir_is_a_located_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 100,000-digit integer in `.mlir` input was "internal error: ValueError" (Python's
    limit on int() of long digit strings)."""
    from dlc.cli import dlc_opt

    path = tmp_path / "big.mlir"
    digits = "1" * 100_000
    path.write_text(
        f'builtin.module {{\n  %0 = "arith.constant"() {{value = {digits} : i64}} : () -> i64\n}}\n'
    )
    assert dlc_opt.main([str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:2:36: error: integer literal with more than 4300 digits\n")
