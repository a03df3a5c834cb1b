"""`python -m dlc.runtime.jit_worker`: optimize one part of a module and emit its object
code, in a process of its own (`jit_parts.py`: llvmlite serializes every LLVM call
behind one lock, so threads cannot build parts in parallel; processes can).

Input on stdin: one line of JSON (`opt_level`, and `target`: the fields of a
`dlc.target.Target`, or null for the host), then the part's LLVM IR text. Output on
stdout: the object code. A failure is a message on stderr and exit status 1 (the parent
then builds the part itself). Nothing read is executed but LLVM IR, through LLVM.
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    from dlc.runtime.jit import build_object
    from dlc.target import Target

    try:
        header = json.loads(sys.stdin.buffer.readline())
        text = sys.stdin.buffer.read().decode("utf-8")
        fields = header["target"]
        target = Target(**fields) if fields else None
        sys.stdout.buffer.write(build_object(text, int(header["opt_level"]), target))
    except Exception as error:  # noqa: BLE001 -- reported to the parent, which builds it
        print(f"dlc.runtime.jit_worker: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
