"""Ahead-of-time compilation: a DLVM program as a C library with a header.

`dlc-compile model.dl -o libmodel.so` and `dlc.compile(...).export("libmodel.so")`
lower the program through the one pipeline (`dlc.pipeline`, via `dlc.program_levels.lower`,
without the Python entries), for this machine or another target
(`dlc.target.FOREIGN_ARCHES`), and write a `.so`, `.o` or `.a` whose C entry points
(`c_entry.py`) need no Python at run time, plus a C header (`header.py`). The C
signatures are `signature.py`'s, the settings are checked by `request.py`, the
library is put together by `library.py` and linked by `link.py`.
"""

from dlc.aot.arena_formula import arena_formulas
from dlc.aot.library import Exported, Request, write_library
from dlc.aot.link import ExportError, text_relocations
from dlc.aot.request import exported_functions, make_request, parallel_loops, target_options

__all__ = [
    "ExportError",
    "arena_formulas",
    "Exported",
    "Request",
    "exported_functions",
    "make_request",
    "parallel_loops",
    "target_options",
    "text_relocations",
    "write_library",
]
