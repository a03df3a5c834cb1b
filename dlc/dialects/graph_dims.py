"""Dimension expressions: a symbolic dimension is a sum of products of names and
integers (docs/reference/dynamic-shapes.md).

A plain symbolic dimension is a name (`"n"`, `%n` in DLVM). Ops make others from them:
adjacent dimensions merged by a reshape are a product (`"seq*12"`, `%seq*12`), a
concatenation along a symbolic axis is a sum (`"past+1"`, `%past+1`; `"a+b"`,
`%a+%b`). Such a dimension is kept in one canonical spelling, so that equal
expressions are equal strings (type equality stays string equality): its terms sorted
by their names, each term its names in order then its coefficient when not 1, the
constant term last, and an expression with no name is an `int`. The expressions are
polynomials with nonnegative coefficients: `Poly` maps each term's names (a sorted
tuple, repeats kept) to its coefficient.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

Dim = int | str
Poly = dict[tuple[str, ...], int]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def poly(d: Dim) -> Poly:
    """The polynomial of dimension `d` (an extent, a name or a canonical expression;
    `%` before a name is accepted, as in DLVM's spelling)."""
    if isinstance(d, int):
        return {(): d} if d else {}
    terms: Poly = {}
    for term in d.split("+"):
        names: list[str] = []
        coefficient = 1
        for factor in term.split("*"):
            factor = factor.removeprefix("%")
            if factor.isdigit():
                coefficient *= int(factor)
            elif _NAME.fullmatch(factor):
                names.append(factor)
            else:
                raise ValueError(f"invalid dimension expression '{d}'")
        key = tuple(sorted(names))
        terms[key] = terms.get(key, 0) + coefficient
    return {k: v for k, v in terms.items() if v}


def canonical(p: Poly) -> Dim:
    """The dimension of polynomial `p`: an `int` when it has no name, else its
    canonical spelling (module doc)."""
    named = sorted(k for k in p if k and p[k])
    if not named:
        return p.get((), 0)
    terms = ["*".join([*k, *([str(p[k])] if p[k] != 1 else [])]) for k in named]
    if p.get((), 0):
        terms.append(str(p[()]))
    return "+".join(terms)


def normalize(d: Dim) -> Dim:
    """`d` in canonical spelling (`"1+past"` -> `"past+1"`, `"2*3"` -> 6)."""
    return d if isinstance(d, int) else canonical(poly(d))


def add(dims: Iterable[Dim]) -> Dim:
    """The sum of `dims` (a concatenation's extent along its axis)."""
    total: Poly = {}
    for d in dims:
        for k, v in poly(d).items():
            total[k] = total.get(k, 0) + v
    return canonical(total)


def multiply_polys(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ka, va in a.items():
        for kb, vb in b.items():
            key = tuple(sorted(ka + kb))
            out[key] = out.get(key, 0) + va * vb
    return out


def product_poly(dims: Sequence[Dim]) -> Poly:
    """The polynomial of the product of `dims` (a tensor's element count)."""
    out: Poly = {(): 1}
    for d in dims:
        out = multiply_polys(out, poly(d))
    return out


def multiply(dims: Sequence[Dim]) -> Dim:
    """The product of `dims` (adjacent dimensions merged into one)."""
    return canonical(product_poly(dims))


def names(d: Dim) -> list[str]:
    """The names in dimension `d`, each once, in order of first appearance."""
    found: list[str] = []
    for k in poly(d):
        found.extend(n for n in k if n not in found)
    return found


def is_name(d: Dim) -> bool:
    """Whether `d` is one plain symbolic dimension (a name a parameter can bind)."""
    return isinstance(d, str) and _NAME.fullmatch(d) is not None


def kind(d: str) -> str:
    """`"sum"` or `"product"`: what a symbolic dimension that is not a name is."""
    return "sum" if "+" in d else "product"


def evaluate(d: Dim, sizes: Mapping[str, int]) -> int:
    """The extent of `d` when its names have the values `sizes`."""
    if isinstance(d, int):
        return d
    if d in sizes:
        return sizes[d]
    total = 0
    for k, v in poly(d).items():
        term = v
        for n in k:
            term *= sizes[n]
        total += term
    return total


def text(d: Dim) -> str:
    """DLVM's spelling: `4`, `%n`, `%seq*12`, `%past+1`, `%a+%b` (each term that
    starts with a name takes a `%`)."""
    if isinstance(d, int):
        return str(d)
    return "+".join(t if t[0].isdigit() else "%" + t for t in d.split("+"))
