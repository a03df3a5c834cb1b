"""Graph -> tensor rules of the runtime services: `random` and growable stacks.

`random` is a counter-based generator (SplitMix64) in generated code. The generator
state is the runtime-owned module variable `RNG_VAR` of 16 bytes: the seed (i64) and a
counter (i64). Each `random` op reads both, advances the counter by the number of
elements it draws, and element `k` (C order) of the result is
`splitmix64(seed + (counter + k + 1) * golden)`. Floats are `lo + (hi - lo) * u` with
`u = bits >> 11 / 2**53` uniform in [0, 1) (computed in f64, rounded to the data type;
a value that rounds up to `hi` becomes `lo`, so results lie in [lo, hi)); integers are
`lo + bits mod (hi - lo)` (64-bit unsigned arithmetic). `hi <= lo` (or a NaN bound)
gives `lo` everywhere, like the reference interpreter.

A stack is the address of a zeroed 24-byte header `[data, size, capacity]` (three i64)
on the heap; `push` reserves bytes at the top (growing `data` with realloc) and writes
the value's C layout there, `pop T` reads the last `sizeof(T)` bytes and shrinks the
stack (`tensor.stack_push` / `tensor.stack_pop`). Stacks are typed: each item carries a
tag of its type and `pop T` of an item pushed with another type traps, so no value is
read back as a different type (three i64 never become a pointer). `destroyStack` frees
the data and marks the header destroyed (capacity -1, the 24 bytes stay allocated), so
a later push or pop traps instead of writing through freed memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import f64
from xdsl.ir import Attribute, Operation, SSAValue

from dlc.dialects import graph_memory as gm
from dlc.dialects import tensor_memory as tm
from dlc.dialects.abi import HEAP_TAGS_VAR, RNG_VAR, TAG_SHIFT
from dlc.dialects.graph_types import TensorType, dtype_bits, dtype_is_float, format_type
from dlc.dialects.layout import I64
from dlc.dialects.tensor_types import int_scalar_type
from dlc.lowering.graph_to_tensor.compute_builder import BodyBuilder, Lowered, Splat, build_compute

RNG_BYTES = 16
STACK_HEADER = 24
DESTROYED = -1  # the capacity of a destroyed stack
_GOLDEN = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def splitmix64(seed: int, position: int) -> int:
    """The generator's 64-bit output at `position` (Python model, for tests/docs)."""
    mask = (1 << 64) - 1
    z = (seed + (position + 1) * _GOLDEN) & mask
    z = ((z ^ (z >> 30)) * _MIX1) & mask
    z = ((z ^ (z >> 27)) * _MIX2) & mask
    return z ^ (z >> 31)


Materialize = Callable[[Builder, Lowered], SSAValue]
"""A lowered i64 scalar as one SSA value (the memory lowering's `_materialize`)."""


class StackRules(Protocol):
    """What the stack ops use of the memory lowering's rules (`memory.MemoryRules`)."""

    def size(self, t: Attribute) -> int: ...
    def read(self, b: Builder, t: Attribute, pointer: list[Lowered]) -> Lowered: ...
    def write(self, b: Builder, t: Attribute, value: Lowered, pointer: list[Lowered]) -> None: ...


def _header(stack: Lowered) -> Lowered:
    """The heap header of a lowered stack value (`[header]`)."""
    assert isinstance(stack, list), stack
    return stack[0]


def mix64(s: BodyBuilder, seed: SSAValue, position: SSAValue) -> SSAValue:
    """splitmix64(seed, position) as i64 scalar ops."""
    step = s.emit(arith.AddiOp(position, s.index(1)))
    z = s.emit(arith.AddiOp(seed, s.emit(arith.MuliOp(step, s.index(_signed(_GOLDEN))))))
    for shift, mult in ((30, _MIX1), (27, _MIX2)):
        shifted = s.emit(arith.ShRUIOp(z, s.index(shift)))
        z = s.emit(arith.MuliOp(s.emit(arith.XOrIOp(z, shifted)), s.index(_signed(mult))))
    return s.emit(arith.XOrIOp(z, s.emit(arith.ShRUIOp(z, s.index(31)))))


def _linear(s: BodyBuilder, indices: Sequence[SSAValue], dims: Sequence[int]) -> SSAValue:
    flat = s.index(0)
    for index, n in zip(indices, dims, strict=True):
        flat = s.emit(arith.AddiOp(s.emit(arith.MuliOp(flat, s.index(n))), index))
    return flat


def _draw(s: BodyBuilder, bits: SSAValue, lo: SSAValue, hi: SSAValue, dt: str) -> SSAValue:
    """One element in [lo, hi) from 64 random bits."""
    if dtype_is_float(dt):
        unit = s.emit(arith.UIToFPOp(s.emit(arith.ShRUIOp(bits, s.index(11))), f64))
        unit = s.emit(arith.MulfOp(unit, s.const(2.0**-53, "f64")))
        lo64, hi64 = s.cast(lo, dt, "f64"), s.cast(hi, dt, "f64")
        span = s.emit(arith.SubfOp(hi64, lo64))
        value = s.emit(arith.AddfOp(lo64, s.emit(arith.MulfOp(span, unit))))
        if dt == "f16":  # f64 -> f16 needs a libcall missing from the JIT: go via f32
            value = s.cast(s.cast(value, "f64", "f32"), "f32", dt)
        else:
            value = s.cast(value, "f64", dt)
        inside = s.cmpf("olt", value, hi)
        return s.select(s.emit(arith.AndIOp(inside, s.cmpf("olt", lo, hi))), value, lo)
    lo64, hi64 = s.cast(lo, dt, "i64"), s.cast(hi, dt, "i64")
    span = s.emit(arith.SubiOp(hi64, lo64))
    value = s.emit(arith.AddiOp(lo64, s.emit(arith.RemUIOp(bits, span))))
    if dtype_bits(dt) != 64:
        value = s.emit(arith.TruncIOp(value, int_scalar_type(dt)))
    return s.select(s.binary("lessThan", dt, lo, hi), value, lo)


def lower_random(
    b: Builder, op: gm.RandomOp, args: list[Lowered], materialize: Materialize
) -> Lowered:
    """The draws of one `random` op; advances the generator counter."""
    out = op.result.type
    assert isinstance(out, TensorType)
    lo, hi = args
    if out.num_elements == 0:
        return Splat(0, out)
    addr = b.insert(tm.GlobalAddressOp(RNG_VAR, RNG_BYTES)).result
    end = materialize(b, _offset(b, addr, RNG_BYTES))
    counter_at = materialize(b, _offset(b, addr, 8))
    seed = b.insert(tm.MemReadOp(addr, addr, end, I64)).result
    counter = b.insert(tm.MemReadOp(counter_at, addr, end, I64)).result
    advanced = materialize(b, _offset(b, counter, out.num_elements))
    b.insert(tm.MemWriteOp(advanced, counter_at, addr, end))

    def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        position = s.emit(arith.AddiOp(s.read(counter, []), _linear(s, i, out.dims)))
        bits = mix64(s, s.read(seed, []), position)
        return _draw(s, bits, s.read(lo, []), s.read(hi, []), out.dt)

    return build_compute(b, out, body).result


def _offset(b: Builder, value: SSAValue, delta: int) -> Lowered:
    def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        return s.emit(arith.AddiOp(s.read(value, []), s.index(delta)))

    return build_compute(b, I64, body).result


def lower_stack_op(
    b: Builder,
    op: Operation,
    args: list[Lowered],
    rules: StackRules,
    materialize: Materialize,
) -> Lowered | None:
    """createStack / push / pop / destroyStack on the heap header (see module doc)."""
    match op:
        case gm.CreateStackOp():
            nbytes = b.insert(tm.HeapAllocOp(materialize(b, Splat(STACK_HEADER, I64)))).result
            return [nbytes]
        case gm.PushOp():
            t = op.value.type
            size = rules.size(t)
            header = materialize(b, _header(args[1]))
            at = b.insert(tm.StackPushOp(header, size, format_type(t))).result
            rules.write(b, t, args[0], [at, at, _offset(b, at, size)])
            return None
        case gm.PopOp():
            t = op.result.type
            size = rules.size(t)
            header = materialize(b, _header(args[0]))
            at = b.insert(tm.StackPopOp(header, size, format_type(t))).result
            return rules.read(b, t, [at, at, _offset(b, at, size)])
        case gm.DestroyStackOp():
            header = materialize(b, _header(args[0]))
            end = materialize(b, _offset(b, header, STACK_HEADER))
            data = b.insert(tm.MemReadOp(header, header, end, I64)).result
            b.insert(tm.HeapFreeOp(data, raw=True))  # grown by realloc: no heap header
            for index, word in enumerate((0, 0, DESTROYED)):  # [data, size, capacity]
                word_at = materialize(b, _offset(b, header, 8 * index))
                b.insert(tm.MemWriteOp(materialize(b, Splat(word, I64)), word_at, header, end))
            return None
    raise AssertionError(op.name)


def tagged_heap_object(
    b: Builder, addr: SSAValue, nbytes: Lowered, materialize: Materialize
) -> list[Lowered]:
    """The pointer to a new `allocateHeap` object of `nbytes` at `addr`, tagged
    (`abi.TAG_SHIFT`): the tag is `mix64(addr, count)` (SplitMix64) made odd, 31 bits, where
    `count` counts the module's heap objects (`HEAP_TAGS_VAR`), and is written to the
    header word before the object, where each access through the pointer looks for it."""
    var = b.insert(tm.GlobalAddressOp(HEAP_TAGS_VAR, 8)).result
    var_end = materialize(b, _offset(b, var, 8))
    count = b.insert(tm.MemReadOp(var, var, var_end, I64)).result
    b.insert(tm.MemWriteOp(materialize(b, _offset(b, count, 1)), var, var, var_end))

    def tag_body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
        bits = mix64(s, s.read(addr, []), s.read(count, []))
        return s.emit(arith.OrIOp(s.emit(arith.ShRUIOp(bits, s.index(33))), s.index(1)))

    tag = build_compute(b, I64, tag_body).result
    header = materialize(b, _offset(b, addr, -8))
    b.insert(tm.MemWriteOp(tag, header, header, addr))
    size = materialize(b, nbytes)

    def bound(upper: bool) -> Lowered:
        def body(s: BodyBuilder, i: Sequence[SSAValue], _: Sequence[SSAValue]) -> SSAValue:
            t, base = s.read(tag, []), s.read(addr, [])
            if upper:  # the low 16 bits of the tag above the end
                base = s.emit(arith.AddiOp(base, s.read(size, [])))
                part = s.emit(arith.AndIOp(t, s.index(0xFFFF)))
            else:  # the high 15 bits above the start
                part = s.emit(arith.ShRUIOp(t, s.index(16)))
            return s.emit(arith.OrIOp(base, s.emit(arith.ShLIOp(part, s.index(TAG_SHIFT)))))

        return build_compute(b, I64, body).result

    return [addr, bound(False), bound(True)]
