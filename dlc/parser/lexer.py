"""The DLVM lexer (docs/reference/language.md) and its newline rules, as a lark custom lexer.

The whole file is tokenized up front (one compiled regex, no recursion). Bare words become
keyword, opcode or data-type tokens; any other bare word is a `BADWORD` token so the parser
can report it in context ("unknown instruction 'foo'").

Newline rules (DLVM's "wrappable" punctuation, generalised): runs of newlines collapse to
one `_NL`; a newline is dropped after `, = x -> : ( [ < {` and before `, = x -> ) ] > } {`
and before a block label. What remains separates declarations and instructions only.
Leading and trailing newlines are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from lark import Token
from lark.lexer import Lexer

from dlc.diagnostics import DiagnosticError, Location
from dlc.dialects.graph_types import is_dtype

MAX_NESTING = 100  # xDSL compares nested types recursively; stay well inside its limit

UNARY_WORDS = (
    "sinh cosh tanh log exp negate sign square sqrt round rsqrt ceil floor tan cos sin "
    "acos asin atan lgamma digamma erf erfc rint not transpose"
).split()
BINARY_WORDS = (
    "add subtract multiply divide min max truncateDivide floorDivide modulo power and or "
    "xor shiftLeft shiftRight "
    "lessThan lessThanOrEqual greaterThan greaterThanOrEqual equal notEqual dot matrixMultiply"
).split()
OTHER_OPCODES = (
    "literal select dataTypeCast scan reduce reduceWindow concatenate reverse slice convolve "
    "rank shape unitCount padShape squeezeShape shapeCast bitCast extract insert apply "
    "createStack destroyStack push pop allocateStack allocateHeap allocateBox projectBox "
    "retain release deallocate load store elementPointer copy trap random branch conditional "
    "branchEnum return"
).split()
GATHER_OPCODES = "gather gatherElements gatherND scatterElements scatterND".split()
COMPOSITE_OPCODES = "einsum topK topKIndices".split()

# Keywords kept in the parse tree have plain names; the others start with "_".
KEYWORDS: dict[str, str] = {
    "module": "_MODULE",
    "stage": "_STAGE",
    "raw": "STAGE_NAME",
    "canonical": "STAGE_NAME",
    "optimizable": "STAGE_NAME",
    "compute": "RESERVED",
    "scheduled": "RESERVED",
    "struct": "_STRUCT",
    "enum": "_ENUM",
    "case": "_CASE",
    "func": "_FUNC",
    "var": "_VAR",
    "stack": "STACK",
    "type": "_TYPE",
    "opaque": "OPAQUE",
    "at": "_AT",
    "to": "_TO",
    "from": "_FROM",
    "by": "_BY",
    "upto": "_UPTO",
    "of": "_OF",
    "kernel": "_KERNEL",
    "strides": "_STRIDES",
    "leftDilation": "_LEFTDILATION",
    "rightDilation": "_RIGHTDILATION",
    "groups": "_GROUPS",
    "padding": "_PADDING",
    "none": "PADKIND",
    "half": "PADKIND",
    "full": "PADKIND",
    "then": "_THEN",
    "else": "_ELSE",
    "wrt": "_WRT",
    "keeping": "_KEEPING",
    "void": "VOID",
    "zero": "ZERO",
    "undefined": "UNDEFINED",
    "null": "NULL",
    "true": "BOOL",
    "false": "BOOL",
    "scalar": "SCALAR",
    "count": "_COUNT",
    "seedable": "SEEDABLE",
    "extern": "EXTERN",
    "adjoint": "ADJOINT",
    "gradient": "ADJOINT",
    "init": "_INIT",
    "along": "_ALONG",
    "dims": "_DIMS",
    "x": "_X",
    "box": "BOX",
    "batchDims": "_BATCHDIMS",
    "smallest": "SMALLEST",
    "dense": "DENSE",
}
for _word in UNARY_WORDS:
    KEYWORDS[_word] = "UNARY_OP"
for _word in BINARY_WORDS:
    KEYWORDS[_word] = "BINARY_OP"
for _word in OTHER_OPCODES + GATHER_OPCODES + COMPOSITE_OPCODES:
    KEYWORDS[_word] = "OP_" + _word.upper()

PUNCTUATION = {
    "(": "_LPAR",
    ")": "_RPAR",
    "[": "_LSQB",
    "]": "_RSQB",
    "<": "_LT",
    ">": "_GT",
    "{": "_LBRACE",
    "}": "_RBRACE",
    ":": "_COLON",
    "=": "_EQ",
    ",": "_COMMA",
    "*": "_STAR",
    "->": "_ARROW",
}
OPENERS = ("_LPAR", "_LSQB", "_LT", "_LBRACE")
CLOSERS = ("_RPAR", "_RSQB", "_GT", "_RBRACE")
NL_AFTER_DROPPED = frozenset({"_COMMA", "_EQ", "_X", "_ARROW", "_COLON", *OPENERS})
NL_BEFORE_DROPPED = frozenset({"_COMMA", "_EQ", "_X", "_ARROW", *CLOSERS, "_LBRACE", "BBID"})

SIGILS = {
    "%": "LOCAL",
    "@": "GLOBAL",
    "$": "TYPEID",
    "'": "BBID",
    "#": "KEYID",
    "?": "CASEID",
    "!": "ATTR",
}

# Strings are matched as "run (escape run)*": an alternation per character took 4 s on
# the 5.6 MB base64 payload of a 1024 x 1024 dense literal.
_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t]+)
  | (?P<comment>//[^\r\n]*)
  | (?P<nl>\r\n|\r|\n)
  | (?P<string>"[^"\\\r\n]*(?:\\.[^"\\\r\n]*)*")
  | (?P<anon>%[0-9]+\.[0-9]+)
  | (?P<product>%[A-Za-z_][A-Za-z0-9_.]*(?:[*+]%?(?:[0-9]+|[A-Za-z_][A-Za-z0-9_.]*))+)
  | (?P<sigil>[%@$'\#?!][A-Za-z_][A-Za-z0-9_.]*)
  | (?P<special>-?(?:inf|nan)(?![A-Za-z0-9_.]))
  | (?P<number>-?[0-9]+(?P<frac>\.[0-9]+)?(?P<exp>[eE][+-]?[0-9]+)?)
  | (?P<arrow>->)
  | (?P<punct>[()\[\]<>{}:=,*])
  | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
    """,
    re.VERBOSE,
)
_WORD_CHAR = re.compile(r"[A-Za-z0-9_.]")
_NEWLINE_RE = re.compile(r"\r\n|\r|\n")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")

DISPLAY: dict[str, str] = {
    "_NL": "newline",
    "$END": "end of file",
    "STRING": "string",
    "INT": "integer",
    "FLOAT": "float",
    "LOCAL": "local value",
    "DIM_PRODUCT": "symbolic dimension",
    "ANON": "local value",
    "GLOBAL": "global name",
    "TYPEID": "type name",
    "BBID": "basic block",
    "KEYID": "field key",
    "CASEID": "enum case",
    "ATTR": "attribute",
    "DTYPE": "data type",
    "STAGE_NAME": "'raw' or 'canonical'",
    "PADKIND": "'none', 'half' or 'full'",
    "BOOL": "'true' or 'false'",
    "UNARY_OP": "instruction",
    "BINARY_OP": "instruction",
    "ADJOINT": "'adjoint'",
    "BADWORD": "word",
}
for _word, _kind in KEYWORDS.items():
    if _kind not in DISPLAY and not _kind.startswith("OP_"):
        DISPLAY[_kind] = f"'{_word}'"
for _word in OTHER_OPCODES + GATHER_OPCODES + COMPOSITE_OPCODES:
    DISPLAY["OP_" + _word.upper()] = "instruction"
for _text, _kind in PUNCTUATION.items():
    DISPLAY[_kind] = f"'{_text}'"


def split_lines(text: str) -> list[str]:
    """Source lines as the lexer counts them (`\\r\\n`, `\\r` and `\\n` end a line)."""
    if "\r" not in text:  # the usual case, split in C (a dense literal's text is long)
        return text.split("\n")
    return _NEWLINE_RE.split(text)


class SourceText:
    """The decoded text of one file, with line lookup for locations."""

    def __init__(self, text: str, filename: str):
        self.text = text
        self.filename = filename
        self.lines = split_lines(text)

    def location(self, line: int, column: int) -> Location:
        source = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return Location(self.filename, line, column, source)

    def error(self, message: str, line: int, column: int) -> DiagnosticError:
        return DiagnosticError(message, self.location(line, column))


def decode_source(data: str | bytes, filename: str) -> SourceText:
    """Decode UTF-8 input; an invalid byte, or a lone surrogate in `str` input (text no
    file can hold: a module name with one broke the compile cache's key), is a located
    diagnostic."""
    if isinstance(data, str):
        surrogate = None if data.isascii() else _SURROGATE_RE.search(data)
        if surrogate is None:
            return SourceText(data, filename)
        lines = split_lines(data[: surrogate.start()])
        shown = SourceText(_SURROGATE_RE.sub("\ufffd", data), filename)
        code = ord(surrogate.group())
        raise shown.error(
            f"invalid character U+{code:04X} (a lone surrogate is not Unicode text)",
            len(lines),
            len(lines[-1]) + 1,
        )
    try:
        return SourceText(data.decode("utf-8"), filename)
    except UnicodeDecodeError as err:
        prefix = data[: err.start]
        line = prefix.count(b"\n") + 1
        line_start = prefix.rfind(b"\n") + 1
        column = len(prefix[line_start:].decode("utf-8", errors="replace")) + 1
        source = SourceText(data.decode("utf-8", errors="replace"), filename)
        raise source.error(f"invalid UTF-8 byte 0x{data[err.start]:02x}", line, column) from None


def tokenize(source: SourceText) -> list[Token]:
    """All tokens of `source` after the newline rules; raises located diagnostics."""
    raw = _raw_tokens(source)
    return _apply_newline_rules(raw)


def _raw_tokens(source: SourceText) -> list[Token]:
    text = source.text
    tokens: list[Token] = []
    pos, line, line_start, depth = 0, 1, 0, 0
    match = _TOKEN_RE.match
    new_token = Token._future_new
    while pos < len(text):
        m = match(text, pos)
        column = pos - line_start + 1
        if m is None:
            raise source.error(f"unexpected character {text[pos]!r}", line, column)
        kind = m.lastgroup
        value = m.group()
        pos = m.end()
        if kind == "ws" or kind == "comment":
            continue
        if kind == "nl":
            tokens.append(new_token("_NL", value, m.start(), line, column))
            line += 1
            line_start = pos
            continue
        if kind == "punct" or kind == "arrow":
            tok_type = PUNCTUATION[value]
            if tok_type in OPENERS:
                depth += 1
                if depth > MAX_NESTING:
                    raise source.error(f"nesting deeper than {MAX_NESTING} levels", line, column)
            elif tok_type in CLOSERS:
                depth -= 1
        elif kind == "sigil":
            tok_type = SIGILS[value[0]]
        elif kind == "word":
            tok_type = KEYWORDS.get(value) or ("DTYPE" if is_dtype(value) else "BADWORD")
        else:
            tok_type = _literal_type(source, m, kind, value, line, column)
        tokens.append(new_token(tok_type, value, m.start(), line, column))
    return tokens


def _literal_type(
    source: SourceText, m: re.Match[str], kind: str | None, value: str, line: int, column: int
) -> str:
    """Token type of a string, positional id or number (numbers must end at a delimiter)."""
    if kind == "string":
        return "STRING"
    if kind == "anon":
        return "ANON"
    if kind == "product":  # `%seq*12`, `%past+1`: a dimension expression (`graph_dims`)
        return "DIM_PRODUCT"
    if kind == "special":
        return "FLOAT"
    assert kind == "number"
    after = m.end()
    if after < len(source.text) and _WORD_CHAR.match(source.text, after):
        raise source.error(f"invalid number '{value}{source.text[after]}'", line, column)
    return "FLOAT" if m.group("frac") is not None or m.group("exp") is not None else "INT"


def _apply_newline_rules(raw: list[Token]) -> list[Token]:
    out: list[Token] = []
    pending: Token | None = None
    for tok in raw:
        if tok.type == "_NL":
            if out and out[-1].type not in NL_AFTER_DROPPED and pending is None:
                pending = tok
            continue
        if pending is not None and tok.type not in NL_BEFORE_DROPPED:
            out.append(pending)
        pending = None
        out.append(tok)
    return out


class DLVMLexer(Lexer):
    """A lark lexer that replays a token list made by `tokenize`."""

    def __init__(self, lexer_conf: Any):
        pass

    def lex(self, data: Any) -> Iterator[Token]:  # type: ignore[override]
        # lark's wrapper for custom lexers passes the input (our token list) directly.
        yield from data
