"""Outputs are written to a fresh file in the target directory and renamed into place,
never through an existing name (issue 28: `dlc-compile -o /shared/dir/lib.so` wrote the
header and object through symlinks another user had planted in a sticky directory)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dlc.cli import dlc_compile, dlc_opt
from dlc.files import atomic_output, write_atomically

PROGRAM = """module "m"
stage raw

func @f: (f32) -> f32 {
'entry(%x: f32):
    %y = add %x: f32, 1: f32
    return %y: f32
}
"""
VICTIM = b"the victim's file\n"


@pytest.fixture
def shared(tmp_path: Path) -> tuple[Path, Path]:
    """A shared directory and a victim's file outside it."""
    victim = tmp_path / "victim"
    victim.write_bytes(VICTIM)
    directory = tmp_path / "shared"
    directory.mkdir()
    return directory, victim


def _plant(path: Path, victim: Path) -> None:
    path.symlink_to(victim)


@pytest.mark.parametrize("suffix", [".o", ".so", ".a"])
def test_dlc_compile_replaces_planted_symlinks(
    shared: tuple[Path, Path], tmp_path: Path, suffix: str
) -> None:
    directory, victim = shared
    source = tmp_path / "m.dl"
    source.write_text(PROGRAM)
    out, header = directory / f"libm{suffix}", directory / "m.h"
    _plant(out, victim)
    _plant(header, victim)
    assert dlc_compile.main([str(source), "-o", str(out), "--prefix", "m"]) == 0
    assert victim.read_bytes() == VICTIM
    assert not out.is_symlink() and out.stat().st_size > 0
    assert not header.is_symlink() and b"int32_t m_f(" in header.read_bytes()
    assert sorted(p.name for p in directory.iterdir()) == sorted([out.name, header.name])


def test_dlc_opt_output_replaces_a_planted_symlink(
    shared: tuple[Path, Path], tmp_path: Path
) -> None:
    directory, victim = shared
    source = tmp_path / "m.dl"
    source.write_text(PROGRAM)
    out = directory / "out.mlir"
    _plant(out, victim)
    assert dlc_opt.main([str(source), "-o", str(out)]) == 0
    assert victim.read_bytes() == VICTIM
    assert not out.is_symlink() and "func @f" in out.read_text()
    assert [p.name for p in directory.iterdir()] == ["out.mlir"]


def test_dlc_opt_still_writes_to_devices(tmp_path: Path) -> None:
    source = tmp_path / "m.dl"
    source.write_text(PROGRAM)
    assert dlc_opt.main([str(source), "-o", os.devnull]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["m.dl"]


def test_failed_write_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_output(path) as stream:
        stream.write(b"half")
        raise RuntimeError("interrupted")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_written_files_follow_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        write_atomically(tmp_path / "x", b"data")
    finally:
        os.umask(old)
    assert (tmp_path / "x").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "x").read_bytes() == b"data"
