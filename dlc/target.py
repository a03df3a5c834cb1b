"""`Target`: what the schedule policy and the JIT need to know about the CPU.

`Target.host()` describes this machine (LLVM's name and features of the host CPU,
cache sizes from sysfs); `Target.from_cpu("haswell")` an LLVM CPU model by name, for
code that must run on an older machine (and to test the schedule policy for one on
any host). The schedule pass reads the vector width, FMA, register count and cache
sizes; the JIT compiles for `cpu` with `features`; the compile cache keys on `key()`.

`Target.from_cpu(cpu, triple)` with a foreign `triple` (ahead-of-time compilation,
`dlc-compile --target`) describes another machine: `FOREIGN_ARCHES` gives each
supported architecture its default CPU model and features and what the schedule policy
must assume (AArch64: NEON, 16-byte vectors, 32 registers, FMA; RISC-V 64: RV64GC,
no vector unit; wasm32: SIMD128). `triple` is "" for this process's own target.

The core count is deliberately not part of a target: schedules and results do not
depend on it (threads come from the OpenMP runtime at run time).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, replace

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
_SPLIT_VECTORS = "znver4"  # AVX-512 on 256-bit units


@dataclass(frozen=True)
class ForeignArch:
    """What dlc assumes about an architecture it only compiles for (never runs here)."""

    cpu: str  # the default LLVM CPU model
    features: str  # LLVM feature string added to every model's own
    cpus: tuple[str, ...]  # the models `--target-cpu` accepts
    vector_bytes: int
    fma: bool
    vector_registers: int
    pointer_bits: int = 64


FOREIGN_ARCHES = {
    "aarch64": ForeignArch(
        "generic",
        "+neon",
        ("generic", "cortex-a53", "cortex-a55", "cortex-a72", "cortex-a76", "neoverse-n1"),
        vector_bytes=16,  # NEON (SVE's wider vectors are not assumed)
        fma=True,
        vector_registers=32,
    ),
    "riscv64": ForeignArch(
        "generic-rv64",
        "+m,+a,+f,+d,+c",  # RV64GC, the Linux baseline: no vector extension
        ("generic-rv64", "sifive-u74"),
        vector_bytes=16,  # LLVM scalarizes; the width only sizes register tiles
        fma=True,
        vector_registers=32,
    ),
    "wasm32": ForeignArch(
        "generic",
        "+simd128",
        ("generic", "mvp", "bleeding-edge"),
        vector_bytes=16,
        fma=False,
        vector_registers=16,
        pointer_bits=32,
    ),
}
"""The architectures `Target.from_cpu(cpu, triple)` knows besides this machine's."""


def triple_arch(triple: str) -> str:
    """The architecture of a target triple ("" means this process's), e.g. "aarch64"."""
    if not triple:
        triple = process_triple()
    return triple.split("-", 1)[0]


@functools.cache
def process_triple() -> str:
    """LLVM's triple of this process ("x86_64-unknown-linux-gnu")."""
    from dlc import llvm_c

    return llvm_c.process_triple()


def is_foreign(triple: str) -> bool:
    """Whether code for `triple` cannot run on this machine's architecture."""
    return bool(triple) and triple_arch(triple) != triple_arch("")


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
    triple: str = ""  # LLVM target triple; "" = this process's
    pointer_bits: int = 64

    @property
    def split_vectors(self) -> bool:
        """Whether the widest vectors' arithmetic runs as two halves (Zen 4 executes
        512-bit operations on 256-bit units): the schedule policy then prefers fewer
        broadcasts per multiply-add (`schedule_policy.tile_shape`)."""
        return self.vector_bytes == 64 and self.cpu in _SPLIT_VECTORS.split()

    def key(self) -> dict[str, object]:
        """A JSON-able description (part of the compile-cache key)."""
        triple = {"triple": self.triple} if self.triple else {}
        return {
            **triple,
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
        from dlc import llvm_c

        llvm_c.initialize(all_targets=False)
        features = llvm_c.host_cpu_features()
        has = {name for name, on in features.items() if on}
        vector_bytes = 64 if "avx512f" in has else 32 if "avx" in has else 16
        l1, l2 = _cache_sizes()
        return Target(
            cpu=llvm_c.host_cpu_name(),
            features=llvm_c.flatten(features),
            vector_bytes=vector_bytes,
            fma="fma" in has,
            vector_registers=32 if "avx512f" in has else 16,
            l1_bytes=l1,
            l2_bytes=l2,
        )

    @staticmethod
    def from_cpu(cpu: str, triple: str = "") -> Target:
        """The LLVM CPU model `cpu` with its own features and typical caches; "host"
        is `Target.host()`. With a `triple` of another architecture, a model of it
        (`foreign`). Raises ValueError for a name LLVM does not know."""
        if is_foreign(triple):
            return foreign(cpu, triple)
        if cpu == "host":
            return Target.host() if not triple else replace(Target.host(), triple=triple)
        if not known_cpu(cpu):
            raise ValueError(f"unknown CPU model {cpu!r} (LLVM's names: x86-64-v3, znver4, ...)")
        vector_bytes = next((n for n, names in _VECTOR_BYTES.items() if cpu in names.split()), 16)
        return Target(
            cpu=cpu,
            vector_bytes=vector_bytes,
            fma=vector_bytes >= 32 and cpu not in _NO_FMA.split(),
            vector_registers=32 if vector_bytes == 64 else 16,
            triple=triple,
        )


def foreign(cpu: str, triple: str) -> Target:
    """CPU model `cpu` ("host": the architecture's default) of the architecture of
    `triple`, one of `FOREIGN_ARCHES` (ValueError otherwise)."""
    arch = FOREIGN_ARCHES.get(triple_arch(triple))
    if arch is None:
        known = ", ".join(sorted([*FOREIGN_ARCHES, triple_arch("")]))
        raise ValueError(f"unsupported target {triple!r} (architectures: {known})")
    cpu = arch.cpu if cpu == "host" else cpu
    if cpu not in arch.cpus:
        raise ValueError(f"unknown CPU model {cpu!r} for {triple} (models: {', '.join(arch.cpus)})")
    return Target(
        cpu=cpu,
        features=arch.features,
        vector_bytes=arch.vector_bytes,
        fma=arch.fma,
        vector_registers=arch.vector_registers,
        triple=triple,
        pointer_bits=arch.pointer_bits,
    )


@functools.cache
def known_cpu(cpu: str) -> bool:
    """Whether LLVM's x86 backend knows the CPU model `cpu`."""
    names = {n for group in _VECTOR_BYTES.values() for n in group.split()}
    return cpu in names or cpu in ("x86-64", "x86-64-v2", "generic", "nehalem", "westmere")


def _cache_sizes() -> tuple[int, int]:
    """(L1 data, L2) bytes of CPU 0 from sysfs, or typical sizes."""
    sizes = {"1": 32 << 10, "2": 1 << 20}
    root = "/sys/devices/system/cpu/cpu0/cache"

    def read(index: str, name: str) -> str:
        with open(os.path.join(root, index, name)) as f:
            return f.read().strip()

    try:
        for index in os.listdir(root):
            if not index.startswith("index"):
                continue
            level, kind, size = (read(index, n) for n in ("level", "type", "size"))
            if kind in ("Data", "Unified") and level in sizes and size.endswith("K"):
                sizes[level] = int(size[:-1]) << 10
    except (OSError, ValueError):
        pass
    return sizes["1"], sizes["2"]


def check_runnable(cpu: object) -> str:
    """`cpu` when code compiled for it runs on this machine (JIT): the host itself, or a
    model with no wider vectors and no FMA the host lacks; AVX-512 code only for the
    host or `x86-64-v4` (other AVX-512 models may use extensions this host has not).
    TypeError / ValueError otherwise."""
    if not isinstance(cpu, str):
        raise TypeError(f"target_cpu must be a str, got {type(cpu).__name__}")
    try:
        target = Target.from_cpu(cpu)
    except ValueError as err:
        raise ValueError(f"target_cpu: {err}") from None
    host = Target.host()
    if cpu in ("host", host.cpu):
        return cpu
    fits = target.vector_bytes <= host.vector_bytes and (host.fma or not target.fma)
    if target.vector_bytes == 64 and cpu != "x86-64-v4":
        fits = False
    if not fits:
        raise ValueError(
            f"target_cpu {cpu!r} may use instructions this machine ({host.cpu}) lacks: "
            "compiled code must run here; choose an older model such as 'x86-64-v3'"
        )
    return cpu
