"""What the C entry points of a function with symbolic dimensions add: checked sizes.

Such a function's C entries take the sizes first (`int64_t`, `CFunction.sizes` order).
Before anything runs, a negative size returns the status of `negative_message` (its
fault value: the size), and sizes for which a parameter's, the result's or the arena's
byte count does not fit in a signed `size_t` return the status of `too_large_message`.
`need_function` is the LLVM IR of `__dlc_need_K(sizes)`: the arena bytes of a call at
those sizes (`arena_formula`, plus the alignment slack), or -1 when a byte count
overflows; `P_f_arena_bytes` and `P_f` use it.
"""

from __future__ import annotations

from collections.abc import Sequence

from dlc.aot.arena_formula import ArenaFormula, Expr
from dlc.aot.signature import CFunction
from dlc.dialects import graph_dims, loop
from dlc.dtypes import dtype_bytes

ALIGN = loop.ARENA_ALIGN

INTRINSICS = [
    "declare {i64, i1} @llvm.smul.with.overflow.i64(i64, i64)",
    "declare {i64, i1} @llvm.sadd.with.overflow.i64(i64, i64)",
    "declare {i64, i1} @llvm.ssub.with.overflow.i64(i64, i64)",
    "declare i64 @llvm.smax.i64(i64, i64)",
    "declare i64 @llvm.smin.i64(i64, i64)",
    "declare i64 @llvm.umax.i64(i64, i64)",
    "declare i64 @llvm.umin.i64(i64, i64)",
]
"""The intrinsics `need_function` calls (declared once per library)."""


def negative_message(f: CFunction, k: int) -> str:
    """The status message of a negative size `k` (the value goes at the last tab)."""
    size = f.sizes[k]
    return f"bounds-value\t@{f.name}: size {size.name} (%{size.symbol}) is negative: \t"


def too_large_message(f: CFunction) -> str:
    names = ", ".join(s.name for s in f.sizes)
    too_large = f"sizes too large ({names}): " if names else ""
    return f"trap\t@{f.name}: {too_large}a buffer's byte count overflows size_t"


def messages(f: CFunction) -> list[str]:
    """The status messages the entries of `f` may return (none without sizes)."""
    if not f.sized_call:
        return []
    return [*(negative_message(f, k) for k in range(len(f.sizes))), too_large_message(f)]


def size_params(f: CFunction) -> list[str]:
    return [f"i64 %n{k}" for k in range(len(f.sizes))]


def store_sizes(f: CFunction) -> list[str]:
    """`%sizes`: the sizes in a stack array (the native code's `memref<Kxi64>`)."""
    lines = [f"  %sizes = alloca [{max(1, len(f.sizes))} x i64], align 8"]
    for k in range(len(f.sizes)):
        lines += [
            f"  %sp{k} = getelementptr inbounds i64, ptr %sizes, i64 {k}",
            f"  store i64 %n{k}, ptr %sp{k}, align 8",
        ]
    return lines


def negatives(f: CFunction, returns: Sequence[list[str]], last: str) -> list[str]:
    """Branches running `returns[k]` (instructions that return) for a negative size
    `k`, or going on to label `last`."""
    lines: list[str] = []
    for k in range(len(f.sizes)):
        after = last if k == len(f.sizes) - 1 else f"size{k + 1}"
        lines += [
            f"  %neg{k} = icmp slt i64 %n{k}, 0",
            f"  br i1 %neg{k}, label %negative{k}, label %{after}",
            f"negative{k}:",
            *returns[k],
            f"{after}:",
        ]
    return lines


class _Emitter:
    """LLVM IR text of `i64` arithmetic whose overflows are collected in `flags`."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.flags: list[str] = []
        self.count = 0

    def tmp(self) -> str:
        self.count += 1
        return f"%t{self.count}"

    def emit(self, text: str) -> str:
        name = self.tmp()
        self.lines.append(f"  {name} = {text}")
        return name

    def checked(self, op: str, a: str, b: str) -> str:
        """`a op b` (smul, sadd, ssub), its overflow flagged."""
        pair = self.emit(f"call {{i64, i1}} @llvm.{op}.with.overflow.i64(i64 {a}, i64 {b})")
        self.flags.append(self.emit(f"extractvalue {{i64, i1}} {pair}, 1"))
        return self.emit(f"extractvalue {{i64, i1}} {pair}, 0")

    def negative(self, value: str) -> None:
        self.flags.append(self.emit(f"icmp slt i64 {value}, 0"))

    def binary(self, op: str, a: str, b: str) -> str:
        if op in ("mul", "add", "sub"):
            return self.checked(f"s{op}", a, b)
        if op in ("smax", "smin", "umax", "umin"):
            return self.emit(f"call i64 @llvm.{op}.i64(i64 {a}, i64 {b})")
        zero = self.emit(f"icmp eq i64 {b}, 0")  # a division by zero: flagged, by 1 instead
        self.flags.append(zero)
        divisor = self.emit(f"select i1 {zero}, i64 1, i64 {b}")
        return self.emit(f"{op} i64 {a}, {divisor}")

    def expression(self, root: Expr, sizes: list[str]) -> str:
        """The value of `root` (iterative post-order; equal subtrees computed once)."""
        values: dict[Expr, str] = {}
        stack = [root]
        while stack:
            e = stack[-1]
            if e in values:
                stack.pop()
                continue
            if e[0] == "const":
                values[e] = str(e[1])
            elif e[0] == "size":
                values[e] = sizes[e[1]]
            else:
                lhs, rhs = e[1], e[2]
                missing = [x for x in (lhs, rhs) if x not in values]
                if missing:
                    stack.extend(missing)
                    continue
                values[e] = self.binary(str(e[0]), values[lhs], values[rhs])
            stack.pop()
        return values[root]


def _buffer_bytes(em: _Emitter, f: CFunction, sizes: list[str]) -> None:
    """Flag the parameters and results whose byte counts overflow."""
    for arg in f.args:
        total = str(dtype_bytes(arg.ttype.dt))
        for d in arg.ttype.dims:
            total = em.checked("smul", total, _extent(em, f, d, sizes))


def _extent(em: _Emitter, f: CFunction, d: int | str, sizes: list[str]) -> str:
    """The IR value of an extent: a constant, a size, or a dimension expression
    (`%past+1`) computed from the sizes (overflows flagged)."""
    if isinstance(d, int):
        return str(d)
    symbols = [s.symbol for s in f.sizes]
    total = "0"
    for names, k in graph_dims.poly(d).items():
        term = str(k)
        for name in names:
            term = em.checked("smul", term, sizes[symbols.index(name)])
        total = em.checked("sadd", total, term)
    return total


def need_function(f: CFunction, formula: ArenaFormula, index: int, pointer_bits: int) -> list[str]:
    """`i64 @__dlc_need_<index>(ptr %sizes)` (module docstring)."""
    em = _Emitter()
    sizes = []
    for k in range(len(f.sizes)):
        em.lines.append(f"  %q{k} = getelementptr inbounds i64, ptr %sizes, i64 {k}")
        sizes.append(em.emit(f"load i64, ptr %q{k}, align 8"))
    _buffer_bytes(em, f, sizes)
    total = str(formula.static_bytes)
    for buffer in formula.buffers:
        count = em.expression(buffer.count, sizes)
        em.negative(count)
        nbytes = em.checked("smul", count, str(buffer.element_bytes))
        padded = em.checked("sadd", nbytes, str(ALIGN))
        total = em.checked("sadd", total, em.emit(f"and i64 {padded}, {-ALIGN}"))
    nonzero = em.emit(f"icmp ne i64 {total}, 0")
    slack = em.emit(f"select i1 {nonzero}, i64 {ALIGN}, i64 0")
    total = em.checked("sadd", total, slack)
    if pointer_bits < 64:
        em.flags.append(em.emit(f"icmp sgt i64 {total}, {(1 << (pointer_bits - 1)) - 1}"))
    bad = "false"
    for flag in em.flags:
        bad = em.emit(f"or i1 {bad}, {flag}")
    result = em.emit(f"select i1 {bad}, i64 -1, i64 {total}")
    return [
        f"define internal i64 @__dlc_need_{index}(ptr %sizes) {{",
        "entry:",
        *em.lines,
        f"  ret i64 {result}",
        "}",
    ]


def element_count(f: CFunction, dims: Sequence[int | str]) -> str:
    """The C expression of the element count of a buffer of `dims`: `seq * 768`."""
    factors = [f.c_extent(d) for d in dims if d != 1]
    return " * ".join(factors) or "1"
