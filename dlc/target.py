"""`Target`: what the schedule policy and the JIT need to know about the CPU.

`Target.host()` describes this machine (LLVM's name and features of the host CPU,
cache sizes from sysfs); `Target.from_cpu("haswell")` an LLVM CPU model by name, for
code that must run on an older machine (and to test the schedule policy for one on
any host). The schedule pass reads the vector width, FMA, register count and cache
sizes; the JIT compiles for `cpu` with `features`; the compile cache keys on `key()`.

The core count is deliberately not part of a target: schedules and results do not
depend on it (threads come from the OpenMP runtime at run time).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

# LLVM x86 CPU models by widest vector (bytes); unknown names default to 16 (SSE2).
_VECTOR_BYTES = {
    64: (
        "x86-64-v4 skylake-avx512 cascadelake cooperlake cannonlake icelake-client "
        "icelake-server tigerlake rocketlake sapphirerapids emeraldrapids graniterapids "
        "graniterapids-d diamondrapids znver4 znver5 knl knm"
    ),
    32: (
        "x86-64-v3 haswell broadwell skylake alderlake raptorlake meteorlake arrowlake "
        "arrowlake-s lunarlake gracemont pantherlake znver1 znver2 znver3 bdver4 "
        "sandybridge ivybridge btver2 bdver1 bdver2 bdver3"
    ),
}
_NO_FMA = "sandybridge ivybridge btver2 bdver1"  # AVX without FMA3


@dataclass(frozen=True)
class Target:
    """A CPU as the compiler sees it."""

    cpu: str  # LLVM's name for the model ("znver5", "haswell", "x86-64-v3", ...)
    features: str = ""  # LLVM feature string ("+avx2,+fma,..."); "" = the model's own
    vector_bytes: int = 16  # widest SIMD register
    fma: bool = False
    vector_registers: int = 16
    l1_bytes: int = 32 << 10  # L1 data cache per core
    l2_bytes: int = 1 << 20  # L2 cache per core

    def key(self) -> dict[str, object]:
        """A JSON-able description (part of the compile-cache key)."""
        return {
            "cpu": self.cpu,
            "features": self.features,
            "vector_bytes": self.vector_bytes,
            "fma": self.fma,
            "vector_registers": self.vector_registers,
            "l1_bytes": self.l1_bytes,
            "l2_bytes": self.l2_bytes,
        }

    @staticmethod
    @functools.cache
    def host() -> Target:
        """This machine: LLVM's host CPU name and features, caches from sysfs."""
        import llvmlite.binding as llvm_binding

        llvm_binding.initialize_native_target()
        features = llvm_binding.get_host_cpu_features()
        has = {name for name, on in features.items() if on}
        vector_bytes = 64 if "avx512f" in has else 32 if "avx" in has else 16
        l1, l2 = _cache_sizes()
        return Target(
            cpu=llvm_binding.get_host_cpu_name(),
            features=features.flatten(),
            vector_bytes=vector_bytes,
            fma="fma" in has,
            vector_registers=32 if "avx512f" in has else 16,
            l1_bytes=l1,
            l2_bytes=l2,
        )

    @staticmethod
    def from_cpu(cpu: str) -> Target:
        """The LLVM CPU model `cpu` with its own features and typical caches; "host"
        is `Target.host()`. Raises ValueError for a name LLVM does not know."""
        if cpu == "host":
            return Target.host()
        if not known_cpu(cpu):
            raise ValueError(f"unknown CPU model {cpu!r} (LLVM's names: x86-64-v3, znver4, ...)")
        vector_bytes = next((n for n, names in _VECTOR_BYTES.items() if cpu in names.split()), 16)
        return Target(
            cpu=cpu,
            vector_bytes=vector_bytes,
            fma=vector_bytes >= 32 and cpu not in _NO_FMA.split(),
            vector_registers=32 if vector_bytes == 64 else 16,
        )


@functools.cache
def known_cpu(cpu: str) -> bool:
    """Whether LLVM's x86 backend knows the CPU model `cpu`."""
    names = {n for group in _VECTOR_BYTES.values() for n in group.split()}
    return cpu in names or cpu in ("x86-64", "x86-64-v2", "generic", "nehalem", "westmere")


def _cache_sizes() -> tuple[int, int]:
    """(L1 data, L2) bytes of CPU 0 from sysfs, or typical sizes."""
    sizes = {"1": 32 << 10, "2": 1 << 20}
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for index in root.glob("index*"):
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
            if kind in ("Data", "Unified") and level in sizes and size.endswith("K"):
                sizes[level] = int(size[:-1]) << 10
    except (OSError, ValueError):
        pass
    return sizes["1"], sizes["2"]
