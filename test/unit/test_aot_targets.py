"""Foreign targets (`dlc.target.FOREIGN_ARCHES`): what the schedule policy assumes for
them, and object code for their machine (ELF machine / wasm magic), never this one's."""

from __future__ import annotations

from pathlib import Path

import pytest

import dlc
from dlc.pipeline import Options
from dlc.target import Target, process_triple

SOURCE = """module "k"
stage raw

func @axpy: (f32, <64 x f32>, <64 x f32>) -> <64 x f32> {
'entry(%a: f32, %x: <64 x f32>, %y: <64 x f32>):
    %ax = multiply %a: f32, %x: <64 x f32>
    %r = add %ax: <64 x f32>, %y: <64 x f32>
    return %r: <64 x f32>
}
"""

EM_AARCH64, EM_RISCV, EM_X86_64 = 183, 243, 62


def test_foreign_target_facts() -> None:
    arm = Target.from_cpu("host", "aarch64-linux-gnu")
    assert (arm.cpu, arm.vector_bytes, arm.fma, arm.vector_registers) == ("generic", 16, True, 32)
    assert "+neon" in arm.features and arm.key()["triple"] == "aarch64-linux-gnu"
    assert Target.from_cpu("cortex-a72", "aarch64-linux-gnu").cpu == "cortex-a72"
    wasm = Target.from_cpu("host", "wasm32-unknown-unknown")
    assert (wasm.pointer_bits, wasm.fma, wasm.features) == (32, False, "+simd128")
    assert Options(triple="riscv64-linux-gnu").target.cpu == "generic-rv64"
    assert "triple" not in Target.host().key()  # the JIT's cache keys stay as they were


def test_foreign_target_errors() -> None:
    with pytest.raises(ValueError, match="unknown CPU model 'znver5' for aarch64-linux-gnu"):
        Target.from_cpu("znver5", "aarch64-linux-gnu")
    with pytest.raises(ValueError, match="unsupported target 'mips-linux-gnu'"):
        Options(triple="mips-linux-gnu")


def _machine(data: bytes) -> int:
    assert data[:4] == b"\x7fELF"
    return int.from_bytes(data[18:20], "little")


@pytest.mark.parametrize(
    ("triple", "machine"),
    [("aarch64-linux-gnu", EM_AARCH64), ("riscv64-linux-gnu", EM_RISCV), ("", EM_X86_64)],
)
def test_object_code_is_for_the_target(tmp_path: Path, triple: str, machine: int) -> None:
    mod = dlc.compile(SOURCE, filename="k.dl")
    if not triple and not process_triple().startswith("x86_64"):
        pytest.skip("this machine is not x86-64")
    mod.export(tmp_path / "k.o", target=triple or None)
    assert _machine((tmp_path / "k.o").read_bytes()) == machine


def test_wasm32_object(tmp_path: Path) -> None:
    exported = dlc.compile(SOURCE, filename="k.dl").export(
        tmp_path / "k.o", target="wasm32-unknown-unknown"
    )
    assert exported.library.read_bytes()[:4] == b"\0asm"
    assert "int32_t k_axpy(\n    float a," in exported.header.read_text()
