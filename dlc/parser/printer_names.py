"""Printed names of a function's blocks and values (the naming rules of the DLVM printer).

Names are unique per function so the output always re-parses: a clashing or malformed
value name prints in the anonymous `%b.i` form, a block parameter gets a fresh
`%argB_K` name, an unnamed block prints as `'bb<index>`, and block 0 always prints as
`'entry`. Ops that print at their uses take no `%b.i` position.
"""

from __future__ import annotations

import re

from xdsl.ir import Block, SSAValue

from dlc.dialects.graph import FuncOp, prints_at_use

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


class FunctionNames:
    """Printed names of one function's blocks and values, unique within the function."""

    def __init__(self, func: FuncOp):
        self.blocks: dict[Block, str] = {}
        self.values: dict[SSAValue, str] = {}
        wanted = self._wanted(func)
        taken: set[str] = set()
        for b, block in enumerate(func.body.blocks):
            self.blocks[block] = self._block_name(block, b, taken)
        taken = set()
        for b, block in enumerate(func.body.blocks):
            for k, arg in enumerate(block.args):
                name = _wanted_name(arg)
                if name is None or name in taken:
                    name = _fresh(f"arg{b}_{k}", taken | wanted)
                taken.add(name)
                self.values[arg] = name
            self._name_instructions(block, b, taken)

    @staticmethod
    def _wanted(func: FuncOp) -> set[str]:
        names = {_wanted_name(a) for block in func.body.blocks for a in block.args}
        names |= {_wanted_name(r) for op in func.body.walk() for r in op.results}
        return {n for n in names if n is not None}

    @staticmethod
    def _block_name(block: Block, index: int, taken: set[str]) -> str:
        name = getattr(block, "_name", None)
        if index == 0:
            name = "entry"
        elif not isinstance(name, str) or not _NAME_RE.fullmatch(name) or name in taken:
            name = _fresh(f"bb{index}", taken)
        if name == "entry" and index != 0:
            name = _fresh(f"bb{index}", taken)
        taken.add(name)
        return name

    def _name_instructions(self, block: Block, b: int, taken: set[str]) -> None:
        i = 0
        for op in block.ops:
            if prints_at_use(op):
                continue
            for r in op.results:
                name = _wanted_name(r)
                if name is None or name in taken:
                    name = f"{b}.{i}"
                taken.add(name)
                self.values[r] = name
            i += 1


def _wanted_name(value: SSAValue) -> str | None:
    name = getattr(value, "_name", None)
    if isinstance(name, str) and _NAME_RE.fullmatch(name):
        return name
    return None


def _fresh(base: str, taken: set[str]) -> str:
    name, n = base, 0
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return name
