"""`python -m dlc.runtime.jit_worker`: optimize one part of a module and emit its object
code, in a process of its own (`jit_parts.py`: llvmlite serializes every LLVM call
behind one lock, so threads cannot build parts in parallel; processes can).

Input on stdin: one line of JSON (`opt_level`; `target`: the fields of a
`dlc.target.Target`, or null for the host; `sizes`: the byte size of each part's text),
then the parts' LLVM IR texts, one after the other. Output on stdout: their object code
(`jit_parts.pack_objects`: one object as it is). A failure is a message on stderr and exit status 1 (the parent
then builds the part itself). Nothing read is executed but LLVM IR, through LLVM.
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    from dlc.runtime.jit import build_object
    from dlc.runtime.jit_parts import pack_objects
    from dlc.target import Target

    try:
        header = json.loads(sys.stdin.buffer.readline())
        data = sys.stdin.buffer.read()
        sizes = [int(n) for n in header["sizes"]]
        if sum(sizes) != len(data) or min(sizes, default=0) < 0:
            raise ValueError(f"{len(data)} bytes of input for parts of sizes {sizes}")
        fields = header["target"]
        target = Target(**fields) if fields else None
        objects, start = [], 0
        for size in sizes:
            text = data[start : start + size].decode("utf-8")
            objects.append(build_object(text, int(header["opt_level"]), target))
            start += size
        sys.stdout.buffer.write(pack_objects(objects))
    except Exception as error:  # noqa: BLE001 -- reported to the parent, which builds it
        print(f"dlc.runtime.jit_worker: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
