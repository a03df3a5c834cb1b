"""The conventions a compiled llvm-level module shares with the runtime that calls it.

Code generation (`dlc.lowering`) writes these names; the runtime (`dlc.runtime`) reads
them. They live here, below both, so neither imports the other.

- Functions: `f(ptr in0, ..., ptr out0, ...)` on C-contiguous data, tuple results
  flattened, void result; `PY_ENTRY_PREFIX + f` takes the `PyArrayObject*`s instead
  and loads their data pointers natively (a cheaper call from Python).
- Globals: `STATUS` (trap / bounds status word), `CALL_DEPTH` (recursion guard),
  `VAR_PREFIX + name` (address slot of a module variable, filled by the runtime).
- Module attributes: `MESSAGES` (status messages, "trap\\t<text>" or
  "bounds\\t<text>"), `VARS` (variable name -> byte size), `RECURSIVE` (names of
  recursive functions).
"""

from __future__ import annotations

STATUS = "_dlc_status"
"""i64 global of a compiled module: 0, or the 1-based index of a message in the
module attribute `MESSAGES` recorded by the first trap / out-of-bounds access. The
Python caller reads and resets it after a call."""

CALL_DEPTH = "_dlc_call_depth"
"""i64 global next to `STATUS`: the number of active calls of recursive functions
(those that can reach themselves through `loop.call` / `loop.scalar_call`). Each such
function checks it at entry: at the depth limit it traps with "call depth limit
exceeded" instead of overflowing the native stack; otherwise it counts itself until it
returns."""

VAR_PREFIX = "_dlc_var_"
"""`VAR_PREFIX + name`: an i64 global holding the address of module variable `name`'s
storage, which the runtime allocates and installs after loading the code."""

PY_ENTRY_PREFIX = "_dlc_py_"
"""`PY_ENTRY_PREFIX + f`: f's entry taking `PyArrayObject*`s (see the module doc)."""

RNG_VAR = "dlc.rng"
"""Name of the `random` generator's state variable (not a DLVM identifier, so it
cannot clash): two u64 words, seed and counter."""

MESSAGES = "dlc.messages"
VARS = "dlc.vars"
RECURSIVE = "dlc.recursive"
