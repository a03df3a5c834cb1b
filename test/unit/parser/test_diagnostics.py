"""Every class of malformed input gives one located DiagnosticError with an exact message."""

from __future__ import annotations

import pytest

from dlc.diagnostics import DiagnosticError
from dlc.parser import parse_module

H = 'module "m"\nstage raw\n'
F = H + "func @f: (f32) -> f32 {\n'entry(%x: f32):\n"
EXTERN_P = H + "[extern]\nfunc @p: (f32, f32) -> f32\n"
EXTERN_T = H + "[extern]\nfunc @p: (f32, f32) -> (f32, f32)\n"

CASES: dict[str, tuple[str | bytes, str]] = {
    # lexical / syntax
    "empty": ("", "1:1: empty file: expected 'module'"),
    "only_comments": ("\n  // c\n", "1:1: empty file: expected 'module'"),
    "bad_utf8": (b'module "m"\nstage raw\n\xff', "3:1: invalid UTF-8 byte 0xff"),
    "no_stage": ('module "m"\n', "1:11: expected newline, found end of file"),
    "reserved_stage": (
        'module "m"\nstage compute\n',
        "2:7: expected 'raw' or 'canonical', found 'compute'",
    ),
    "unknown_instruction": (
        F + "    %y = foo %x: f32\n    return %y: f32\n}\n",
        "5:10: unknown instruction 'foo'",
    ),
    "unknown_dtype": (
        F + "    %y = exp %x: f33\n    return %y: f32\n}\n",
        "5:18: unknown type 'f33'",
    ),
    "glued_dims": (H + "var @a: <2x3 x f32>\n", "3:10: invalid number '2x'"),
    "bad_character": (H + "var @a: f32 ^\n", "3:13: unexpected character '^'"),
    "unexpected_eof": (H + "func @f: (f32", "3:14: expected ')' or ',', found end of file"),
    "adjoint_clause_order": (
        EXTERN_T + "[adjoint @p wrt 1 from 0]\nfunc @g: (f32, f32) -> (f32)\n",
        "5:19: expected ',', ']', 'keeping' or 'seedable', found 'from'",
    ),
    "bad_escape": ('module "a\\q"\nstage raw\n', "1:10: invalid escape '\\q' in string"),
    # types and names
    "use_type_mismatch": (
        F + "    %y = exp %x: f64\n    return %y: f32\n}\n",
        "5:14: type mismatch: %x has type f32 but is used as f64",
    ),
    "undefined_value": (F + "    return %z: f32\n}\n", "5:12: use of undefined value %z"),
    "textual_use_before_def": (
        F + "    %a = exp %b: f32\n    %b = exp %x: f32\n    return %a: f32\n}\n",
        "5:14: %b is used before its definition",
    ),
    "unknown_block": (F + "    branch 'nowhere()\n}\n", "5:12: unknown basic block 'nowhere"),
    "redefined_var": (H + "var @a: f32\nvar @a: f32\n", "4:5: redefinition of @a"),
    "redefined_type": (H + "type $A = f32\nstruct $A {\n}\n", "4:8: redefinition of type $A"),
    "type_not_declared_yet": (H + "var @a: $A\ntype $A = f32\n", "3:9: unknown type $A"),
    "var_declared_later": (
        H
        + "func @f: () -> f32 {\n'entry():\n    %v = load @a: *f32\n    return %v: f32\n}\nvar @a: f32\n",
        "5:15: @a is used before its declaration",
    ),
    "redefined_local": (
        F + "    %x = exp %x: f32\n    return %x: f32\n}\n",
        "5:5: redefinition of %x",
    ),
    "duplicate_block_param": (
        F + "    branch 'b(%x: f32, %x: f32)\n'b(%p: f32, %p: f32):\n    return %p: f32\n}\n",
        "6:13: redefinition of %p",
    ),
    "duplicate_block": (
        F + "    branch 'b()\n'b():\n    branch 'b()\n'b():\n    return %x: f32\n}\n",
        "8:1: redefinition of block 'b",
    ),
    "signature_not_function": (
        H + "func @f: f32\n",
        "3:10: type signature f32 of @f is not a function type",
    ),
    "tensor_too_large": (
        H + "var @a: <100000000 x 100000000 x f32>\n",
        "3:10: tensor type <100000000 x 100000000 x f32> has more than 2^40 elements",
    ),
    "apply_wrong_type": (
        H
        + "func @f: (f32) -> f32 {\n'entry(%x: f32):\n    %y = apply @f(%x: f32): (f32) -> f64\n    return %x: f32\n}\n",
        "5:10: apply: @f has type (f32) -> f32, not (f32) -> f64",
    ),
    "unknown_function": (
        F + "    %y = apply @g(%x: f32): (f32) -> f32\n    return %y: f32\n}\n",
        "5:16: unknown function @g",
    ),
    "inference_error": (
        F + "    %y = dot %x: f32, %x: f32\n    return %x: f32\n}\n",
        "5:10: dot: cannot multiply f32 by f32: ranks must be equal and at least 2",
    ),
    "void_named": (
        F + "    %y = trap\n    return %x: f32\n}\n",
        "5:5: cannot name the void result of 'trap'",
    ),
    "anonymous_position": (
        F + "    %0.1 = exp %x: f32\n    return %x: f32\n}\n",
        "5:5: anonymous value %0.1 must be named %0.0 at this position",
    ),
    "anonymous_undefined": (
        F + "    %0.0 = exp %x: f32\n    return %0.1: f32\n}\n",
        "6:12: use of undefined value %0.1",
    ),
    "unknown_attribute": (
        H + "!noinline\n[extern]\nfunc @f: (f32) -> f32\n",
        "3:1: unknown function attribute '!noinline'",
    ),
    # literals
    "int_out_of_range": (
        F + "    %y = literal 300: i8\n    return %x: f32\n}\n",
        "5:18: integer literal 300 does not fit in i8",
    ),
    "float_for_int": (
        F + "    %y = literal 1.5: i32\n    return %x: f32\n}\n",
        "5:18: float literal is not a valid i32 value",
    ),
    "aggregate_inline_operand": (
        F + "    %y = add %x: f32, <1: f32>: <1 x f32>\n    return %x: f32\n}\n",
        "5:24: only scalar literals can be operands; use a 'literal' instruction for aggregates",
    ),
    "splat_inline_operand": (
        F + "    %y = add %x: f32, 1: <1 x f32>\n    return %x: f32\n}\n",
        "5:23: only scalar literals can be operands; use a 'literal' instruction for <1 x f32>",
    ),
    "zero_operand": (
        F + "    %y = add %x: f32, zero: f32\n    return %x: f32\n}\n",
        "5:23: 'zero' is only allowed as the literal of a 'literal' instruction",
    ),
    "nested_undefined": (
        F + "    %y = literal (undefined: f32): (f32)\n    return %x: f32\n}\n",
        "5:19: 'undefined' is only allowed as the literal of a 'literal' instruction",
    ),
    "tensor_literal_count": (
        F + "    %y = literal <1: f32>: <2 x f32>\n    return %x: f32\n}\n",
        "5:19: literal is not a valid value of type <2 x f32>",
    ),
    "literal_element_type": (
        F + "    %y = literal <1: f64, 2: f64>: <2 x f32>\n    return %x: f32\n}\n",
        "5:22: literal element has type f64 but f32 is expected",
    ),
    "literal_nesting": (
        F + "    %a = literal " + "(" * 300 + "\n",
        "5:117: nesting deeper than 100 levels",
    ),
    "type_nesting": (
        H + "var @a: " + "*" * 300 + "f32\n",
        "3:309: type nesting deeper than 100 levels",
    ),
    # control flow
    "missing_terminator": (
        F + "    %y = exp %x: f32\n}\n",
        "4:1: block 'entry does not end with a terminator",
    ),
    "terminator_not_last": (
        F + "    return %x: f32\n    %y = exp %x: f32\n}\n",
        "5:5: terminator is not the last instruction of block 'entry",
    ),
    "return_type": (
        F + "    %y = equal %x: f32, %x: f32\n    return %y: bool\n}\n",
        "6:5: return: value of type bool does not match the return type f32 of @f",
    ),
    "bare_return": (F + "    return\n}\n", "5:5: return: @f must return a value of type f32"),
    "branch_arg_count": (
        F + "    branch 'b(%x: f32)\n'b():\n    return %x: f32\n}\n",
        "5:5: branch: 'b takes 0 arguments, got 1",
    ),
    "conditional_then_types": (
        F
        + "    %c = literal true: bool\n    conditional %c: bool then 'b(%c: bool) else 'b(%x: f32)\n'b(%p: f32):\n    return %p: f32\n}\n",
        "6:5: conditional: argument 0 to 'b has type bool, expected f32",
    ),
    "conditional_condition": (
        F + "    conditional %x: f32 then 'b() else 'b()\n'b():\n    return %x: f32\n}\n",
        "5:5: conditional: condition must be a bool scalar, got f32",
    ),
    "dominance": (
        F
        + "    %c = literal true: bool\n    conditional %c: bool then 'a() else 'b()\n'a():\n    %y = exp %x: f32\n"
        "    branch 'b()\n'b():\n    return %y: f32\n}\n",
        "11:5: %y does not dominate this use",
    ),
    "entry_not_first": (
        H + "func @f: (f32) -> f32 {\n'start(%x: f32):\n    return %x: f32\n}\n",
        "4:1: the first block of @f must be 'entry",
    ),
    "entry_params": (
        H + "func @f: (f32) -> f32 {\n'entry(%x: f64):\n    return %x: f64\n}\n",
        "4:1: entry block parameters (f64) do not match the arguments (f32) of @f",
    ),
    "no_body": (H + "func @f: (f32) -> f32\n", "3:6: function @f has no body"),
    "declaration_with_body": (
        H + "[extern]\nfunc @f: (f32) -> f32 {\n'entry(%x: f32):\n    return %x: f32\n}\n",
        "4:6: declaration @f cannot have a body",
    ),
    # adjoint
    "adjoint_type": (
        EXTERN_P + "[adjoint @p wrt 0]\nfunc @g: (f32, f32) -> (f32, f32)\n",
        "6:6: adjoint @g has type (f32, f32) -> (f32, f32), expected (f32, f32) -> (f32)",
    ),
    "adjoint_wrt_range": (
        EXTERN_P + "[adjoint @p wrt 2]\nfunc @g: (f32, f32) -> (f32)\n",
        "6:6: adjoint of @p: wrt index 2 is out of range (@p has 2 arguments)",
    ),
    "adjoint_wrt_duplicate": (
        EXTERN_P + "[adjoint @p wrt 1, 1]\nfunc @g: (f32, f32) -> (f32, f32)\n",
        "6:6: adjoint of @p: duplicate wrt index 1",
    ),
    "adjoint_keeping_range": (
        EXTERN_P + "[adjoint @p keeping 1]\nfunc @g: (f32, f32) -> (f32, f32, f32)\n",
        "6:6: adjoint of @p: keeping index 1 is out of range (@p has 1 outputs)",
    ),
    "adjoint_from_required": (
        EXTERN_T + "[adjoint @p]\nfunc @g: (f32, f32) -> (f32, f32)\n",
        "6:6: adjoint of @p: 'from' is required because @p returns the tuple (f32, f32)",
    ),
    "adjoint_from_forbidden": (
        EXTERN_P + "[adjoint @p from 0]\nfunc @g: (f32, f32) -> (f32, f32)\n",
        "6:6: adjoint of @p: 'from' is only allowed when @p returns a tuple",
    ),
    "adjoint_from_range": (
        EXTERN_T + "[adjoint @p from 2]\nfunc @g: (f32, f32) -> (f32, f32)\n",
        "6:6: adjoint of @p: 'from' index 2 is out of range for (f32, f32)",
    ),
    "adjoint_not_differentiable": (
        H
        + "[extern]\nfunc @p: (bool, f32) -> f32\n[adjoint @p wrt 0]\nfunc @g: (bool, f32) -> (bool)\n",
        "6:6: adjoint of @p: argument 0 of type bool is not differentiable",
    ),
    "adjoint_unknown_primal": (
        H + "[adjoint @nope]\nfunc @g: (f32) -> (f32)\n",
        "4:6: adjoint: @nope is not a function in this module",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_diagnostic(name: str) -> None:
    text, expected = CASES[name]
    with pytest.raises(DiagnosticError) as info:
        parse_module(text, "t.dl")
    err = info.value
    assert err.filename == "t.dl"
    assert f"{err.line}:{err.column}: {err.message}" == expected


def test_diagnostic_format_has_source_line_and_caret() -> None:
    with pytest.raises(DiagnosticError) as info:
        parse_module(F + "    %y = foo %x: f32\n    return %y: f32\n}\n", "t.dl")
    assert (
        str(info.value)
        == "t.dl:5:10: error: unknown instruction 'foo'\n    %y = foo %x: f32\n         ^"
    )


def test_valid_adjoint_forms() -> None:
    text = (
        EXTERN_T
        + "[adjoint @p from 1 seedable]\nfunc @g: (f32, f32, f32) -> (f32, f32)\n[adjoint @p from 0]\nfunc @h: (f32, f32) -> (f32, f32)\n"
    )
    parse_module(text)
    text = (
        H
        + "[extern]\nfunc @f: (f32, f32, f32) -> f32\n[adjoint @f wrt 1, 2 keeping 0]\nfunc @g: (f32, f32, f32) -> (f32, f32, f32)\n"
    )
    parse_module(text)


def test_only_diagnostic_errors_escape() -> None:
    """Truncations of a valid module never raise anything but DiagnosticError."""
    from test_parser import ALL_INSTRUCTIONS

    for cut in range(0, len(ALL_INSTRUCTIONS), 37):
        try:
            parse_module(ALL_INSTRUCTIONS[:cut])
        except DiagnosticError as err:
            assert "internal error" not in err.message, (cut, err.message)
