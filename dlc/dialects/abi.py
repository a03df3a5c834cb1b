"""The conventions a compiled llvm-level module shares with the runtime that calls it.

Code generation writes these names and the runtime reads them; they live here, below
both, so neither imports the other: the function signature `f(ctx, in..., out...)`, the
call context's words (`CTX_*`), variable slots and the module attributes
(`MESSAGES`, `VARS`, `RECURSIVE`). Each explained: docs/design/abi.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # the warm start reads this module without importing xDSL
    from xdsl.dialects.builtin import ModuleOp

CTX_STATUS = 0
"""ctx word: 0, or the 1-based index of a message in the module attribute `MESSAGES`
recorded by the first trap / out-of-bounds access / interrupt; every function returns
at once when a callee set it. The caller reads and resets it after a call."""
STATUS_INTERRUPTED = 0x7FFF_FFFF
"""The status an interrupt poll stores (every poll, in every module; not an index into
`MESSAGES`, which holds "interrupt\tinterrupted" for it): code that polls prints the
same wherever it was compiled, so its object code can be reused (`unit_cache`)."""
CTX_DEPTH = 1
"""ctx word: the number of active calls of recursive functions; at the depth limit a
recursive function traps ("call depth limit exceeded") instead of recursing."""
CTX_STACK_LIMIT = 2
"""ctx word: the lowest stack address a call may use (the calling thread's stack end
plus a margin); a function whose stack pointer would go below it traps ("stack
overflow") instead of crashing."""
CTX_INTERRUPT = 3
"""ctx word: the address of an i32 flag a signal handler sets; loops that may run long
poll it and return with an "interrupt" status."""
CTX_ARENA_TOP = 4
CTX_ARENA_END = 5
CTX_ARENA_BASE = 6
"""ctx words: the caller's arena, [top, end) within [base, end). A function with a
planned arena takes its block at `top` on entry and gives it back on return (a stack
discipline), so every call has its own arena."""
CTX_FAULT = 7
"""ctx word: the value a failed check stores with a "bounds-value" status (the index of
an out-of-range dynamic index, the byte offset of an out-of-bounds pointer access): the
message is baked into the code, the value only known at run time."""
CTX_THREADS = 8
"""ctx word: how many threads parallel loops may use (1: serial; set by the runtime)."""
CTX_WORDS = 9

VAR_PREFIX = "_dlc_var_"
"""`VAR_PREFIX + name`: an i64 global holding the address of module variable `name`'s
storage, which the runtime allocates and installs after loading the code."""

FUNCTION_PREFIX = "dlc.fn."
"""`FUNCTION_PREFIX + f`: the symbol of the program's function `f` in the generated code.
User functions live in this namespace of their own, so no program function can take
the name of a runtime, libc, libm or LLVM symbol (`memcpy`, `exp`, `free`,
`llvm.memcpy...`, `_dlc_py_...`) and be called in its place. Pieces outlined from `f`
(parallel loop bodies, nests) are `dlc.fn.f$omp<k>`, `dlc.fn.f$nest<k>`: `$` is not a
character of DLVM names. C exports keep their C names (dlc/aot)."""


def variable_sizes(llvm_level: ModuleOp) -> dict[str, int]:
    """The module variables `VARS` records: name -> byte size."""
    from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr

    sizes = llvm_level.attributes.get(VARS)
    if sizes is None:
        return {}
    assert isinstance(sizes, DictionaryAttr), sizes
    out: dict[str, int] = {}
    for name, size in sizes.data.items():
        assert isinstance(size, IntegerAttr), size
        out[name] = size.value.data
    return out


def function_symbol(name: str) -> str:
    """The code's symbol of the program's function `name`."""
    return FUNCTION_PREFIX + name


PY_ENTRY_PREFIX = "_dlc_py_"
"""`PY_ENTRY_PREFIX + f`: f's entry taking `PyArrayObject*`s (see the module doc). It
returns the status word after the call (0: success), or `BAD_ARGUMENTS` without
calling when an argument fails the entry's native checks."""

FAST_ENTRY_PREFIX = "_dlc_pyfast_"
"""`FAST_ENTRY_PREFIX + f`: f's entry as a CPython METH_FASTCALL function (the runtime
wraps it in a builtin function object): the cheapest call from Python there is, used
where the interpreter's object layout is the one the code assumes (see
`dlc.lowering.loop_to_llvm.python_entry.fast_entry`)."""

PY_TYPES = "_dlc_py_types"
"""An i64 global array the runtime fills after loading: the address of NumPy's
`ndarray` type, then that of the `numpy.dtype` of each of `graph_types.NATIVE_DTYPES`
in order. Python entries compare an argument's type and dtype with them."""

BAD_ARGUMENTS = -1
"""A Python entry's result when an argument is not an `ndarray` (exactly) of the
parameter's dtype and shape, C-contiguous: nothing ran; the runtime takes its general
path (conversions, or the error naming the argument)."""


class ArrayLayout(NamedTuple):
    """Byte offsets in a `PyArrayObject` (and its `PyObject` head) of the fields a
    Python entry reads; the runtime probes them in its own process."""

    type: int  # ob_type
    data: int  # char *data
    nd: int  # int nd
    dims: int  # npy_intp *dimensions
    descr: int  # PyArray_Descr *descr
    flags: int  # int flags (bit 0: C-contiguous)


RNG_VAR = "dlc.rng"
"""Name of the `random` generator's state variable (not a DLVM identifier, so it
cannot clash): two u64 words, seed and counter."""

MESSAGES = "dlc.messages"
VARS = "dlc.vars"
RECURSIVE = "dlc.recursive"
PROFILE = "dlc.profile"
"""Module attribute of a profiling compile: the kernels' facts as JSON (see
dlc/lowering/loop_to_llvm/profile.py)."""
PROFILE_BUFFER = "_dlc_profile"
"""i64 global of a profiling compile: the address of the event buffer the timing
marks append to, which the runtime installs after loading the code."""

RESERVED_PREFIX = "dlc:"
"""Functions and variables code generation adds to a module are named with this prefix,
which the graph verifier refuses in a program's own names."""
BOX_RETAIN = "dlc:retain"
BOX_RELEASE = "dlc:release"
"""`f(ctx, i64 box)`: count one more / one less reference to an indirect enum's box (0:
no box, nothing to do); the last release frees the box and releases what it holds
(iteratively: a deep tree does not deepen the native stack)."""
LIVE_BOXES_VAR = "dlc:boxes"
"""A module variable of one i64: the number of indirect enum boxes alive (allocated and
not yet freed), by the compiled code and by the runtime's argument conversions."""
ZERO_VAR = "dlc:zero"
"""A zeroed module variable as large as the largest indirect enum body: what a null box
address reads as (the enum's zero value)."""

HEAP_HEADER = 16
"""Bytes before each heap object (`raw_alloc`): a word saying whether it is live (the
runtime's own heap objects, boxes of arguments, follow it too)."""
LIVE, DEAD = 0x6576696C2D636C64, 0x646165642D636C64  # "dlc-live", "dlc-dead"

HEAP_TAGS_VAR = "dlc:heap-tags"
"""A module variable of one i64: how many objects `allocateHeap` has made (the counter
each object's tag is mixed from)."""
TAG_SHIFT = 48
"""An `allocateHeap` pointer's lower and upper bound words carry its object's tag
above this bit (addresses stay below 2^48): 15 bits in the lower bound, 16 in the
upper. The tag (odd, 31 bits) is also the header's second word (the one right
before the object); `deallocate` clears it, and every load, store and copy through a
tagged pointer first checks that the word still holds the pointer's tag, so a
pointer to a freed object traps (until the memory holds that exact word again:
about 1 in 2^30)."""
ADDRESS_MASK = (1 << TAG_SHIFT) - 1
