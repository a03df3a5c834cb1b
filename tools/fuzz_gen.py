"""Random well-typed straight-line DLVM programs for the differential tester (tools/fuzz.py).

A program is a small structured model (`Program` of `Func`s of `Block`s of `Inst`s whose
operands are `Value`s) so the shrinker can edit it and print it again. `generate(seed, size)`
builds one; `Program.text()` prints it in DLVM syntax.

Values carry a magnitude bound (`bound`) so the generator keeps every intermediate finite
(it inserts `tanh` before exp/sinh/cosh/multiply when a bound grows) and inputs of partial
functions in their domains (log/sqrt/rsqrt/lgamma/digamma/pow base of x*x+1 or exp(x);
asin/acos/tan of 0.9*tanh(x); divisors x*x+1). `exact` marks values computed without
rounding (arguments, literals, shape ops, negate, min/max, select of exact values): only
those feed discontinuous ops (floor, round, sign, compares), so an ulp of difference
between the compiled code and the reference never flips a branch or a step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

FLOATS = ("f32", "f64")
MAX_DIM = 8
MAX_RANK = 3


@dataclass(eq=False)
class Value:
    """An SSA value (argument, block parameter, instruction result) or an inline literal."""

    name: str
    shape: tuple[int, ...]
    dt: str
    bound: float = 1.0
    exact: bool = False
    lit: str | None = None  # inline scalar literal text (`0.5` in `0.5: f32`)

    @property
    def ty(self) -> str:
        return tensor_type(self.shape, self.dt)

    def use(self) -> str:
        return f"{self.lit if self.lit is not None else '%' + self.name}: {self.ty}"


@dataclass(eq=False)
class Inst:
    """`%result = fmt.format(*operand uses)`; a terminator when `result` is None."""

    result: Value | None
    fmt: str
    operands: list[Value]

    def text(self) -> str:
        body = self.fmt.format(*(o.use() for o in self.operands))
        return f"%{self.result.name} = {body}" if self.result is not None else body


@dataclass(eq=False)
class Block:
    name: str
    params: list[Value]
    insts: list[Inst] = field(default_factory=list)
    term: Inst | None = None  # None: the function's return

    def header(self) -> str:
        return f"'{self.name}({', '.join(f'%{p.name}: {p.ty}' for p in self.params)}):"


@dataclass(eq=False)
class Adjoint:
    """`[adjoint @f from S wrt … keeping … seedable]` named `name`."""

    name: str
    wrt: list[Value]
    source: Value | None  # the output differentiated (tuple results only)
    keeping: list[int]
    seedable: bool


@dataclass(eq=False)
class Func:
    name: str
    blocks: list[Block]
    outputs: list[Value]
    adjoint: Adjoint | None = None
    called: bool = False

    @property
    def args(self) -> list[Value]:
        return self.blocks[0].params

    def result_type(self) -> str:
        if len(self.outputs) == 1:
            return self.outputs[0].ty
        return "(" + ", ".join(o.ty for o in self.outputs) + ")"

    def signature(self) -> str:
        return f"({', '.join(a.ty for a in self.args)}) -> {self.result_type()}"

    def text(self) -> str:
        lines = [f"func @{self.name}: {self.signature()} {{"]
        for block in self.blocks:
            lines.append(block.header())
            lines.extend("    " + inst.text() for inst in block.insts)
            lines.append("    " + (block.term.text() if block.term else self.return_text()))
        lines.append("}")
        return "\n".join(lines)

    def return_text(self) -> str:
        if len(self.outputs) == 1:
            return f"return {self.outputs[0].use()}"
        uses = ", ".join(o.use() for o in self.outputs)
        rt = self.result_type()
        return f"%result = literal ({uses}): {rt}\n    return %result: {rt}"

    def adjoint_text(self) -> str | None:
        adj = self.adjoint
        if adj is None:
            return None
        wrt = [self.args.index(a) for a in adj.wrt if a in self.args]
        if not wrt or (adj.source is not None and adj.source not in self.outputs):
            return None
        tuple_result = len(self.outputs) > 1
        source = adj.source if tuple_result and adj.source is not None else self.outputs[0]
        if not source.dt.startswith("f"):
            return None
        keeping = [k for k in adj.keeping if k < len(self.outputs)]
        if not tuple_result:
            keeping = keeping[:1] and [0]
        clauses = []
        if tuple_result:
            clauses.append(f"from {self.outputs.index(source)}")
        clauses.append("wrt " + ", ".join(map(str, wrt)))
        if keeping:
            clauses.append("keeping " + ", ".join(map(str, keeping)))
        if adj.seedable:
            clauses.append("seedable")
        ins = [a.ty for a in self.args] + ([source.ty] if adj.seedable else [])
        outs = [self.args[i].ty for i in wrt] + [self.outputs[k].ty for k in keeping]
        sig = f"({', '.join(ins)}) -> ({', '.join(outs)})"
        return f"[adjoint @{self.name} {' '.join(clauses)}]\nfunc @{adj.name}: {sig}"


@dataclass(eq=False)
class Program:
    funcs: list[Func]
    name: str = "fuzz"

    def text(self) -> str:
        parts = [f'module "{self.name}"\nstage raw']
        parts.extend(f.text() for f in self.funcs)
        parts.extend(t for f in self.funcs if (t := f.adjoint_text()) is not None)
        return "\n\n".join(parts) + "\n"


def tensor_type(shape: tuple[int, ...], dt: str) -> str:
    return f"<{' x '.join(map(str, shape))} x {dt}>" if shape else dt


def float_text(x: float) -> str:
    return repr(float(x))


# ---------------------------------------------------------------------------------------
# The generator
# ---------------------------------------------------------------------------------------

UNARY_ANY = {"tanh": 1.0, "sin": 1.0, "cos": 1.0, "atan": 1.6, "erf": 1.0, "erfc": 2.0}
UNARY_SMALL = ("exp", "sinh", "cosh")
UNARY_STEP = ("sign", "floor", "ceil", "round", "rint")
UNARY_POSITIVE = ("log", "sqrt", "rsqrt", "lgamma", "digamma")
UNARY_UNIT = {"asin": 1.6, "acos": 3.2, "tan": 1.3}
COMPARES = ("lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual", "equal", "notEqual")


class FuncGen:
    """Generates one function body into `self.func`."""

    def __init__(self, rng: np.random.Generator, name: str, helpers: list[Func], size: int):
        self.rng = rng
        self.helpers = helpers
        self.size = size
        self.counter = 0
        self.max_args = int(rng.integers(2, 6))
        self.block = Block("entry", [])
        self.func = Func(name, [self.block], [])
        self.pool: list[Value] = []
        self.dims = [int(d) for d in rng.choice(np.arange(1, MAX_DIM + 1), size=3)]

    # -- basics ----------------------------------------------------------------------
    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def choice(self, seq):  # noqa: ANN001, ANN201 - any sequence
        return seq[int(self.rng.integers(len(seq)))]

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, fmt: str, ops: list[Value], shape, dt: str, bound: float, exact=False) -> Value:  # noqa: ANN001
        v = Value(self.fresh("v"), tuple(shape), dt, min(bound, 1e30), exact)
        self.block.insts.append(Inst(v, fmt, ops))
        self.pool.append(v)
        return v

    def random_shape(self) -> tuple[int, ...]:
        rank = int(self.rng.integers(0, MAX_RANK + 1))
        return tuple(self.choice(self.dims) if self.chance(0.85) else 1 for _ in range(rank))

    def new_arg(self, shape, dt: str) -> Value:  # noqa: ANN001
        v = Value(self.fresh("a"), tuple(shape), dt, 4.0 if dt in FLOATS else 6.0, True)
        self.func.args.append(v)
        self.pool.append(v)
        return v

    def inline(self, x: float, dt: str) -> Value:
        text = float_text(x) if dt in FLOATS else str(int(x))
        return Value("", (), dt, abs(x), True, lit=text)

    def literal(self, shape, dt: str) -> Value:  # noqa: ANN001
        shape = tuple(shape)
        size = math.prod(shape)
        if shape and size <= 8 and self.chance(0.5):
            data = self.rng.integers(-3, 4, size=size) * (0.5 if dt in FLOATS else 1)
            return self.emit(f"literal {dense(data.reshape(shape), dt)}", [], shape, dt, 3.0, True)
        c = float(self.choice([0.5, -1.5, 2.0, 0.25, 1.0]))
        c = c if dt in FLOATS else int(c * 2)
        text = float_text(c) if dt in FLOATS else str(c)
        return self.emit(f"literal {text}: {tensor_type(shape, dt)}", [], shape, dt, abs(c), True)

    def need(self, shape, dt: str, exact: bool = False) -> Value:  # noqa: ANN001
        """A value of exactly this type: an existing one, a new argument or a literal."""
        shape = tuple(shape)
        if dt == "bool":
            return self.compare(shape)
        cands = [v for v in self.pool if v.shape == shape and v.dt == dt and (v.exact or not exact)]
        if cands and self.chance(0.7):
            return self.choice(cands[-6:])
        if len(self.func.args) < self.max_args:
            return self.new_arg(shape, dt)
        if cands:
            return self.choice(cands)
        if self.chance(0.3) and not shape:
            return self.inline(float(self.choice([0.5, 2.0, -1.0])), dt)
        return self.literal(shape, dt)

    def partner_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        r = self.rng.random()
        if r < 0.55 or not shape:
            return shape
        if r < 0.75:
            return ()
        return tuple(1 if self.chance(0.5) else d for d in shape)

    def pick(self, dt_pred=lambda dt: dt in FLOATS, exact: bool = False) -> Value:  # noqa: ANN001
        cands = [v for v in self.pool if dt_pred(v.dt) and (v.exact or not exact)]
        if cands and self.chance(0.9):
            return self.choice(cands[-8:] if self.chance(0.7) else cands)
        dt = "f32" if self.chance(0.8) else "f64"
        if not dt_pred(dt):
            dt = "i32"
        return self.need(self.random_shape(), dt, exact)

    # -- domain helpers ---------------------------------------------------------------
    def squash(self, v: Value, limit: float) -> Value:
        if v.bound <= limit:
            return v
        return self.emit("tanh {0}", [v], v.shape, v.dt, 1.0)

    def positive(self, v: Value) -> Value:
        """x*x + 1 or exp(x) (x squashed): a value ≥ 1 or > 0 with a moderate bound."""
        v = self.squash(v, 8.0)
        if self.chance(0.5):
            sq = self.emit("multiply {0}, {1}", [v, v], v.shape, v.dt, v.bound**2)
            return self.emit(
                "add {0}, {1}", [sq, self.inline(1.0, v.dt)], v.shape, v.dt, v.bound**2 + 1
            )
        v = self.squash(v, 3.0)
        return self.emit("exp {0}", [v], v.shape, v.dt, math.exp(v.bound))

    def unit(self, v: Value) -> Value:
        t = self.emit("tanh {0}", [v], v.shape, v.dt, 1.0)
        return self.emit("multiply {0}, {1}", [t, self.inline(0.9, v.dt)], v.shape, v.dt, 0.9)

    # -- op families -----------------------------------------------------------------
    def unary(self) -> Value:
        x = self.pick()
        kind = self.rng.random()
        if kind < 0.3:
            op = self.choice(list(UNARY_ANY))
            return self.emit(f"{op} {{0}}", [x], x.shape, x.dt, UNARY_ANY[op])
        if kind < 0.4:
            return self.emit("negate {0}", [x], x.shape, x.dt, x.bound, x.exact)
        if kind < 0.48:
            x = self.squash(x, 100.0)
            return self.emit("square {0}", [x], x.shape, x.dt, x.bound**2)
        if kind < 0.6:
            x = self.squash(x, 3.0)
            op = self.choice(UNARY_SMALL)
            return self.emit(f"{op} {{0}}", [x], x.shape, x.dt, math.exp(x.bound))
        if kind < 0.7:
            x = self.pick(exact=True)
            op = self.choice(UNARY_STEP)
            return self.emit(f"{op} {{0}}", [x], x.shape, x.dt, x.bound + 1, True)
        if kind < 0.88:
            p = self.positive(x)
            op = self.choice(UNARY_POSITIVE if self.chance(0.9) else UNARY_POSITIVE[:3])
            bound = (
                {"log": math.log(p.bound) + 1, "sqrt": math.sqrt(p.bound), "rsqrt": 1e3}[op]
                if op in ("log", "sqrt", "rsqrt")
                else p.bound * math.log(p.bound + 2) + 2
            )
            return self.emit(f"{op} {{0}}", [p], p.shape, p.dt, bound)
        u = self.unit(x)
        op = self.choice(list(UNARY_UNIT))
        return self.emit(f"{op} {{0}}", [u], u.shape, u.dt, UNARY_UNIT[op])

    def binary(self) -> Value:
        x = self.pick()
        y = self.need(self.partner_shape(x.shape), x.dt)
        if self.chance(0.3):
            x, y = y, x
        shape = broadcast(x.shape, y.shape)
        op = self.choice(["add", "subtract", "multiply", "divide", "min", "max", "power"])
        if op in ("add", "subtract"):
            return self.emit(f"{op} {{0}}, {{1}}", [x, y], shape, x.dt, x.bound + y.bound)
        if op in ("min", "max"):
            bound = max(x.bound, y.bound)
            return self.emit(f"{op} {{0}}, {{1}}", [x, y], shape, x.dt, bound, x.exact and y.exact)
        if op == "multiply":
            x, y = self.squash(x, 100.0), self.squash(y, 100.0)
            return self.emit("multiply {0}, {1}", [x, y], shape, x.dt, x.bound * y.bound)
        if op == "divide":
            d = self.positive(y)
            return self.emit("divide {0}, {1}", [x, d], shape, x.dt, x.bound)
        base = self.positive(self.squash(x, 2.0))
        e = (
            self.emit("tanh {0}", [y], y.shape, y.dt, 1.0)
            if self.chance(0.6)
            else self.inline(float(self.choice([2.0, 0.5, 3.0, -1.0])), x.dt)
        )
        return self.emit(
            "power {0}, {1}",
            [base, e],
            broadcast(base.shape, e.shape),
            x.dt,
            base.bound ** max(1.0, e.bound),
        )

    def integer(self) -> Value:
        x = self.pick(lambda dt: dt == "i32")
        if self.chance(0.2):
            op = self.choice(["negate", "square", "sign"])
            return self.emit(f"{op} {{0}}", [x], x.shape, "i32", x.bound**2, True)
        y = self.need(self.partner_shape(x.shape), "i32")
        op = self.choice(["add", "subtract", "multiply", "min", "max"])
        return self.emit(
            f"{op} {{0}}, {{1}}", [x, y], broadcast(x.shape, y.shape), "i32", 1e9, True
        )

    def compare(self, shape: tuple[int, ...] | None = None) -> Value:
        dt = "i32" if self.chance(0.2) else self.choice(FLOATS)
        x = self.need(shape, dt, True) if shape is not None else self.pick(lambda d: d == dt, True)
        dt = x.dt
        y = (
            self.need(self.partner_shape(x.shape), dt, True)
            if self.chance(0.6)
            else self.inline(0, dt)
        )
        op = self.choice(COMPARES[:4] if dt in FLOATS else COMPARES)
        c = self.emit(f"{op} {{0}}, {{1}}", [x, y], broadcast(x.shape, y.shape), "bool", 1, True)
        if self.chance(0.3):
            other = self.compare_simple(c.shape)
            logic = self.choice(["and", "or"])
            c = self.emit(f"{logic} {{0}}, {{1}}", [c, other], c.shape, "bool", 1, True)
        if self.chance(0.2):
            c = self.emit("not {0}", [c], c.shape, "bool", 1, True)
        return c

    def compare_simple(self, shape: tuple[int, ...]) -> Value:
        x = self.need(shape, "f32", True)
        return self.emit(
            "greaterThan {0}, {1}", [x, self.inline(0.5, "f32")], shape, "bool", 1, True
        )

    def select(self) -> Value:
        x = self.pick()
        y = self.need(self.partner_shape(x.shape), x.dt)
        shape = broadcast(x.shape, y.shape)
        m = self.compare(self.partner_shape(shape))
        shape = broadcast(shape, m.shape)
        bound = max(x.bound, y.bound)
        return self.emit(
            "select {0}, {1} by {2}", [x, y, m], shape, x.dt, bound, x.exact and y.exact
        )

    def cast(self) -> Value:
        x = self.pick()
        to = "f64" if x.dt == "f32" else "f32"
        return self.emit(f"dataTypeCast {{0}} to {to}", [x], x.shape, to, x.bound, x.exact)

    def dot(self) -> Value:
        x = self.pick(lambda dt: dt in FLOATS or dt == "i32")
        if not x.shape:
            x = self.need((self.choice(self.dims),), x.dt)
        x = self.squash(x, 10.0) if x.dt in FLOATS else x
        k, n = x.shape[-1], self.choice(self.dims)
        if len(x.shape) == 1:
            y = self.need(x.shape, x.dt)
            shape: tuple[int, ...] = ()
        else:
            y = self.need((*x.shape[:-2], k, n), x.dt)
            shape = (*x.shape[:-1], n)
        y = self.squash(y, 10.0) if y.dt in FLOATS else y
        return self.emit("dot {0}, {1}", [x, y], shape, x.dt, x.bound * y.bound * k)

    def reduce(self) -> Value:
        x = self.pick(lambda dt: dt != "bool")
        if not x.shape:
            x = self.need((self.choice(self.dims), self.choice(self.dims)), x.dt)
        dims = [i for i in range(len(x.shape)) if self.chance(0.5)] or [0]
        dims = list(self.rng.permutation(dims))
        shape = tuple(d for i, d in enumerate(x.shape) if i not in dims)
        count = math.prod(x.shape[i] for i in dims)
        comb = self.choice(["add", "add", "multiply", "min", "max"])
        is_float = x.dt in FLOATS
        init = {"add": 0.0, "multiply": 1.0, "min": math.inf, "max": -math.inf}[comb]
        if comb == "add" and self.chance(0.3):
            init = 0.5
        if comb == "multiply" and is_float:
            x = self.squash(x, 1.0)
        if not is_float:
            init = (
                {"add": 0, "multiply": 1, "min": 1 << 30, "max": -(1 << 30)}[comb]
                if comb != "add"
                else 0
            )
        init_text = (float_text(init) if is_float else str(init)) + f": {x.dt}"
        along = ", ".join(map(str, dims))
        bound = {"add": x.bound * count + 1, "multiply": 1.0}.get(comb, x.bound)
        exact = x.exact and comb in ("min", "max")
        return self.emit(
            f"reduce {{0}} by {comb} init {init_text} along {along}", [x], shape, x.dt, bound, exact
        )

    def shape_op(self) -> Value:
        x = self.pick(lambda dt: dt != "bool")
        r = self.rng.random()
        ex = x.exact
        if r < 0.15 and len(x.shape) >= 1:
            return self.emit("transpose {0}", [x], x.shape[::-1], x.dt, x.bound, ex)
        if r < 0.3:
            shape = random_factorization(self.rng, math.prod(x.shape))
            text = " x ".join(map(str, shape)) if shape else "scalar"
            return self.emit(f"shapeCast {{0}} to {text}", [x], shape, x.dt, x.bound, ex)
        if r < 0.42 and len(x.shape) < MAX_RANK:
            i = int(self.rng.integers(0, len(x.shape) + 1))
            shape = (*x.shape[:i], 1, *x.shape[i:])
            return self.emit(f"padShape {{0}} at {i}", [x], shape, x.dt, x.bound, ex)
        ones = [i for i, d in enumerate(x.shape) if d == 1]
        if r < 0.52 and ones:
            i = self.choice(ones)
            shape = x.shape[:i] + x.shape[i + 1 :]
            return self.emit(f"squeezeShape {{0}} at {i}", [x], shape, x.dt, x.bound, ex)
        if not x.shape:
            x = self.need((self.choice(self.dims),), x.dt)
            ex = x.exact
        if r < 0.7:
            axis = int(self.rng.integers(0, len(x.shape)))
            parts = [x]
            for _ in range(int(self.rng.integers(1, 3))):
                shape = list(x.shape)
                shape[axis] = int(self.rng.integers(1, 5))
                parts.append(self.need(shape, x.dt))
            total = list(x.shape)
            total[axis] = sum(p.shape[axis] for p in parts)
            fmt = (
                "concatenate " + ", ".join(f"{{{i}}}" for i in range(len(parts))) + f" along {axis}"
            )
            bound = max(p.bound for p in parts)
            return self.emit(fmt, parts, total, x.dt, bound, all(p.exact for p in parts))
        if r < 0.85:
            lo = int(self.rng.integers(0, x.shape[0]))
            hi = int(self.rng.integers(lo, x.shape[0]))
            shape = (hi - lo + 1, *x.shape[1:])
            return self.emit(f"slice {{0}} from {lo} upto {hi}", [x], shape, x.dt, x.bound, ex)
        dims = [i for i in range(len(x.shape)) if self.chance(0.5)] or [0]
        along = ", ".join(map(str, dims))
        return self.emit(f"reverse {{0}} along {along}", [x], x.shape, x.dt, x.bound, ex)

    def apply(self) -> Value:
        if not self.helpers:
            return self.unary()
        h = self.choice(self.helpers)
        args = [self.need(a.shape, a.dt) for a in h.args]
        out = h.outputs[0]
        fmt = (
            f"apply @{h.name}("
            + ", ".join(f"{{{i}}}" for i in range(len(args)))
            + f"): {h.signature()}"
        )
        return self.emit(fmt, args, out.shape, out.dt, out.bound)

    def conditional(self) -> None:
        """`conditional (reduce or/and of a comparison) then 'join(a) else 'join(b)`."""
        m = self.compare()
        c = m
        if m.shape:
            comb = self.choice(["or", "and"])
            along = ", ".join(map(str, range(len(m.shape))))
            c = self.emit(
                f"reduce {{0}} by {comb} init {'false' if comb == 'or' else 'true'}: bool along {along}",
                [m],
                (),
                "bool",
                1,
                True,
            )
        a = self.pick()
        b = self.need(a.shape, a.dt)
        join = Block(
            self.fresh("join"),
            [Value(self.fresh("p"), a.shape, a.dt, max(a.bound, b.bound), a.exact and b.exact)],
        )
        if self.chance(0.5):
            self.block.term = Inst(
                None,
                f"conditional {{0}} then '{join.name}({{1}}) else '{join.name}({{2}})",
                [c, a, b],
            )
        else:
            arms = []
            for v in (a, b):
                arm = Block(self.fresh("arm"), [])
                op = self.choice(["tanh", "negate", "sin"])
                r = Value(self.fresh("v"), v.shape, v.dt, v.bound)
                arm.insts.append(Inst(r, f"{op} {{0}}", [v]))
                arm.term = Inst(None, f"branch '{join.name}({{0}})", [r])
                arms.append(arm)
            self.block.term = Inst(
                None, f"conditional {{0}} then '{arms[0].name}() else '{arms[1].name}()", [c]
            )
            self.func.blocks.extend(arms)
            join.params[0].exact = False
        self.func.blocks.append(join)
        self.block = join
        self.pool.append(join.params[0])

    # -- driver ------------------------------------------------------------------------
    def run(self, allow_conditional: bool) -> Func:
        families = [
            (self.unary, 4),
            (self.binary, 4),
            (self.select, 1),
            (self.cast, 0.6),
            (self.dot, 1.2),
            (self.reduce, 1.5),
            (self.shape_op, 2.5),
            (self.integer, 0.6),
            (self.apply, 1.0),
        ]
        weights = np.array([w for _, w in families])
        steps = int(self.rng.integers(max(2, self.size // 2), self.size + 1))
        cond_at = int(self.rng.integers(1, steps)) if allow_conditional and self.chance(0.3) else -1
        for step in range(steps):
            if step == cond_at:
                self.conditional()
            families[int(self.rng.choice(len(families), p=weights / weights.sum()))][0]()
            last = self.pool[-1]
            if last.dt in FLOATS and last.bound > 1e6:
                self.squash(last, 1.0)
        self.choose_outputs()
        return self.func

    def choose_outputs(self) -> None:
        used = {
            id(o)
            for b in self.func.blocks
            for i in b.insts + ([b.term] if b.term else [])
            for o in i.operands
        }
        sinks = [v for v in self.pool if id(v) not in used and v.dt != "bool"]
        floats = [v for v in sinks if v.dt in FLOATS] or [self.pick()]
        last = floats[-1]
        outs = [last]
        unused = [v for v in sinks if v is not last]
        for _ in range(int(self.rng.integers(0, 3))):
            if unused:
                v = self.choice(unused)
                if v not in outs:
                    outs.append(v)
        self.func.outputs = outs

    def add_adjoint(self, name: str) -> None:
        floats = [a for a in self.func.args if a.dt in FLOATS]
        float_outs = [o for o in self.func.outputs if o.dt in FLOATS]
        if not floats or not float_outs:
            return
        wrt = [a for a in floats if self.chance(0.7)] or floats[:1]
        n_out = len(self.func.outputs)
        keeping = [k for k in range(n_out) if self.chance(0.3)]
        self.func.adjoint = Adjoint(name, wrt, self.choice(float_outs), keeping, self.chance(0.6))


def broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    if not a:
        return b
    if not b:
        return a
    return tuple(y if x == 1 else x for x, y in zip(a, b, strict=True))


def random_factorization(rng: np.random.Generator, n: int) -> tuple[int, ...]:
    """A random shape of rank ≤ 3 with `n` elements."""
    factors = [p for p in range(2, n + 1) if n % p == 0 and all(p % q for q in range(2, p))]
    prime_factors: list[int] = []
    m = n
    for p in factors:
        while m % p == 0:
            prime_factors.append(p)
            m //= p
    rank = int(rng.integers(0 if n == 1 else 1, MAX_RANK + 1))
    dims = [1] * rank
    for p in prime_factors:
        dims[int(rng.integers(rank))] *= p
    return tuple(dims)


def dense(data: np.ndarray, dt: str) -> str:
    """A dense tensor literal `<…>: <n x …>` (nested for rank > 1)."""
    if data.ndim == 0:
        return (float_text(float(data)) if dt in FLOATS else str(int(data))) + f": {dt}"
    inner = ", ".join(dense(row, dt) for row in data)
    return f"<{inner}>: {tensor_type(data.shape, dt)}"


def generate(seed: int, size: int = 12) -> Program:
    """A random program: 0-2 helpers (called with `apply`), then @main, with adjoints."""
    rng = np.random.default_rng(seed)
    helpers: list[Func] = []
    for i in range(int(rng.integers(0, 3))):
        gen = FuncGen(rng, f"h{i}", list(helpers), max(2, size // 3))
        func = gen.run(allow_conditional=False)
        func.outputs = func.outputs[:1]
        if rng.random() < 0.3:
            gen.add_adjoint(f"h{i}_grad")
        helpers.append(func)
    gen = FuncGen(rng, "main", helpers, size)
    main = gen.run(allow_conditional=True)
    if rng.random() < 0.7:
        gen.add_adjoint("main_grad")
    used = {
        h.name
        for h in helpers
        if f"@{h.name}(" in main.text() or any(f"@{h.name}(" in g.text() for g in helpers)
    }
    for h in helpers:
        h.called = h.name in used
    return Program([*helpers, main], name=f"fuzz{seed}")
