"""The options of a compile (`Options`: all of them are part of the compile-cache key)
and the checks of the ones `dlc.compile` takes from users. No xDSL here: the warm start
(`dlc.runtime.quick`) keys its lookups on them without loading the IR classes;
`dlc.pipeline` re-exports them."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
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
    rules: str | None = None  # a DLVM rule file: its proven rules join the superoptimizer's
    extra_passes: tuple[tuple[str, tuple[str, ...]], ...] = ()  # plugin passes by level
    profile: bool = False  # timing marks around every kernel (dlc.profile)
    # opt_level 3's search costs: kernels measured here, or the analytical model
    superopt_costs: str = field(default_factory=lambda: default_superopt_costs())

    def __post_init__(self) -> None:
        if self.opt_level not in (0, 1, 2, 3):
            raise ValueError(f"opt_level must be 0, 1, 2 or 3, got {self.opt_level}")
        Target.from_cpu(self.target_cpu, self.triple)  # ValueError for an unknown CPU model
        if self.superopt_costs not in SUPEROPT_COSTS:
            raise ValueError(
                f"superopt_costs must be one of {', '.join(SUPEROPT_COSTS)}, "
                f"got {self.superopt_costs!r}"
            )

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
            "rules": tuning_fingerprint(self.rules),
            "extra_passes": [[level, list(specs)] for level, specs in self.extra_passes],
            "profile": self.profile,
            "superopt_costs": self.superopt_costs if self.opt_level >= 3 else None,
        }


SUPEROPT_COSTS = ("measured", "analytical")


def default_superopt_costs() -> str:
    """The environment variable DLC_SUPEROPT_COSTS, else `measured`: opt_level 3 prices
    products by kernels timed on this machine (`analytical` makes its result depend on
    the program alone, never on timings)."""
    value = os.environ.get("DLC_SUPEROPT_COSTS", "measured").strip() or "measured"
    if value not in SUPEROPT_COSTS:
        import warnings

        warnings.warn(
            f"DLC_SUPEROPT_COSTS={value!r} is not one of {', '.join(SUPEROPT_COSTS)}; "
            "using measured",
            stacklevel=2,
        )
        return "measured"
    return value


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


def check_tuning_db(path: object, option: str = "tuning_db") -> str | None:
    """A path option of `dlc.compile` (`tuning_db`, `rules`), checked, as a str."""
    if path is None:
        return None
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"{option} must be None or a path, got {type(path).__name__}")
    return os.fspath(path)


def check_threads(num_threads: object) -> int:
    """The `num_threads` option of `dlc.compile`, checked (None: the runtime's default,
    `DLC_NUM_THREADS` or the cores this process may use)."""
    from dlc.runtime.native import default_threads

    if num_threads is None:
        return default_threads()
    if isinstance(num_threads, bool) or not isinstance(num_threads, int):
        raise TypeError(f"num_threads must be None or an int, got {type(num_threads).__name__}")
    if num_threads < 1:
        raise ValueError(f"num_threads must be at least 1, got {num_threads}")
    return num_threads


def planted_fault() -> bool:
    """Whether a test plants a miscompile (`DLC_TEST_MISCOMPILE`, read by the schedule
    pass): such compiles bypass the compile cache."""
    return bool(os.environ.get("DLC_TEST_MISCOMPILE", "").strip())


def compile_options(
    *,
    opt_level: int,
    fuse: bool,
    plan_memory: bool,
    fast_math_functions: bool,
    bounds_check: bool | None,
    fma: bool | None,
    target_cpu: str,
    tuning_db: object,
    rules: object = None,
    extra_passes: tuple[tuple[str, tuple[str, ...]], ...] = (),
    profile: bool = False,
) -> Options:
    """The pipeline options of a `dlc.compile` call, checked (`bounds_check` None: the
    environment variable DLC_BOUNDS_CHECK=1; the CPU model must run here)."""
    from dlc.runtime.native import openmp_available
    from dlc.target import check_runnable

    if bounds_check is None:  # DLC_BOUNDS_CHECK=1 runs a whole test suite checked
        bounds_check = os.environ.get("DLC_BOUNDS_CHECK", "") == "1"
    return Options(
        opt_level=opt_level,
        fuse=fuse,
        plan_memory=plan_memory,
        fast_math_functions=fast_math_functions,
        bounds_check=bounds_check,
        fma=check_fma(fma),
        target_cpu=check_runnable(target_cpu),
        openmp=openmp_available(),
        tuning_db=check_tuning_db(tuning_db),
        rules=check_tuning_db(rules, "rules"),
        extra_passes=extra_passes,
        profile=profile,
    )


def quick_facts(options: Options, allowed: frozenset[str]) -> dict[str, Any] | None:
    """What keys the warm start's quick record of a compile with `options` allowing
    the externs `allowed` besides the text (`dlc.runtime.quick.quick_key`); None when
    such compiles leave no record (no cache; a tuning database, whose warnings must
    show every time)."""
    from dlc.runtime import cache
    from dlc.version import __version__

    if (
        not cache.enabled()
        or options.tuning_db is not None
        or options.extra_passes
        or planted_fault()
    ):
        return None
    return {**options.key(), "allowed_externs": sorted(allowed), "dlc": __version__}
