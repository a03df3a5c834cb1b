"""The options of a compile (`Options`: all of them are part of the compile-cache key)
and the checks of the ones `dlc.compile` takes from users. No xDSL here: the warm start
(`dlc.runtime.quick`) keys its lookups on them without loading the IR classes;
`dlc.pipeline` re-exports them."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

from dlc.target import Target


@dataclass(frozen=True)
class Options:
    """What changes the generated code (all of it is part of the compile-cache key)."""

    opt_level: int = 2
    fuse: bool = True
    plan_memory: bool = True
    fast_math_functions: bool = True
    bounds_check: bool = False
    target_cpu: str = "host"  # an LLVM CPU model (dlc.target.Target.from_cpu)
    fma: bool | None = None  # fused multiply-add in reductions; None: opt_level >= 2
    openmp: bool = True  # parallel loops on the OpenMP runtime (else serial)
    triple: str = ""  # the LLVM target triple (ahead-of-time); "" = this process's
    tuning_db: str | None = None  # a tuning database (JSON lines) the schedule pass applies

    def __post_init__(self) -> None:
        if self.opt_level not in (0, 1, 2, 3):
            raise ValueError(f"opt_level must be 0, 1, 2 or 3, got {self.opt_level}")
        Target.from_cpu(self.target_cpu, self.triple)  # ValueError for an unknown CPU model

    @property
    def contract(self) -> bool:
        """Whether reductions fuse multiply-adds (`fma`, by default at opt_level >= 2)."""
        return self.opt_level >= 2 if self.fma is None else self.fma

    @property
    def target(self) -> Target:
        return Target.from_cpu(self.target_cpu, self.triple)

    def key(self) -> dict[str, Any]:
        """A JSON-able description (the compile cache hashes it)."""
        return {
            "opt_level": self.opt_level,
            "fuse": self.fuse,
            "plan_memory": self.plan_memory,
            "fast_math_functions": self.fast_math_functions,
            "bounds_check": self.bounds_check,
            "target": self.target.key(),
            "fma": self.contract,
            "openmp": self.openmp,
            "tuning_db": tuning_fingerprint(self.tuning_db),
        }


def tuning_fingerprint(path: str | None) -> str | None:
    """SHA-256 of a tuning database's bytes (what the compile cache keys on: a new
    record changes the code), "missing" for an unreadable file, None without one."""
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return "missing"


def check_fma(fma: object) -> bool | None:
    """The `fma` option of `dlc.compile`, checked."""
    if fma is not None and not isinstance(fma, bool):
        raise TypeError(f"fma must be None, True or False, got {type(fma).__name__}")
    return fma


def check_tuning_db(path: object) -> str | None:
    """The `tuning_db` option of `dlc.compile`, checked, as a str."""
    if path is None:
        return None
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"tuning_db must be None or a path, got {type(path).__name__}")
    return os.fspath(path)  # type: ignore[arg-type]
