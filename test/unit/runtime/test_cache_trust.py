"""The disk compile cache trusts only its owner (dlc/runtime/cache.py): directories and
files others can write, symlinks and foreign owners are refused with one warning, and
entries not signed with the per-user key are never loaded."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import dlc
from dlc.runtime import cache

# Any untrusted-cache warning a test does not expect with pytest.warns is a failure.
pytestmark = pytest.mark.filterwarnings("error::dlc.runtime.cache.UntrustedCacheWarning")

VICTIM = """module "victim"
stage raw

func @f: (<4 x f32>) -> <4 x f32> {
'entry(%x: <4 x f32>):
    %y = add %x: <4 x f32>, %x: <4 x f32>
    return %y: <4 x f32>
}
"""

# The same signature, another result: object code a planted entry could smuggle in.
ATTACKER = VICTIM.replace("victim", "attacker").replace("add", "multiply")

X = np.array([1, 2, 3, 4], dtype=np.float32)
OTHER_UID = 12345
KEY_BYTES = 32


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty cache directory (0700, as pytest makes it) and an empty memory cache."""
    directory = tmp_path / "cache"
    directory.mkdir(mode=0o700)
    monkeypatch.setenv("DLC_CACHE_DIR", str(directory))
    monkeypatch.delenv("DLC_CACHE", raising=False)
    cache.clear_memory()
    yield directory
    cache.clear_memory()


def entry_dir(base: Path) -> Path:
    return base / f"v{cache.FORMAT}"


def entry(base: Path) -> tuple[Path, Path]:
    """The (json, object) files of the only entry under `base`."""
    (meta,) = entry_dir(base).glob("*.json")
    return meta, meta.with_suffix(".o")


def check_victim() -> None:
    """Compile VICTIM afresh (memory forgotten) and check it computes x + x."""
    cache.clear_memory()
    np.testing.assert_array_equal(dlc.compile(VICTIM).f(X), X + X)


def refused(path: Path, reason: str, entry_only: bool = False) -> pytest.WarningsRecorder:
    """Expect the one warning about `path` failing a check for `reason`."""
    off = "the entry is ignored and rewritten" if entry_only else "compiling without the disk cache"
    message = f"dlc: compile cache: {path} {reason}; {off}"
    return pytest.warns(cache.UntrustedCacheWarning, match=f"^{re.escape(message)}$")


def snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    """Name -> (inode, mtime) of everything under `directory`: a rewrite changes it."""
    return {
        str(p.relative_to(directory)): (p.lstat().st_ino, p.lstat().st_mtime_ns)
        for p in sorted(directory.rglob("*"))
    }


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def give_away(path: Path) -> None:
    """Make `path` belong to another user; only root can (skip otherwise)."""
    try:
        os.chown(path, OTHER_UID, -1, follow_symlinks=False)
    except PermissionError:
        pytest.skip("only root can give a file to another user")


@pytest.mark.parametrize("bad_mode", [0o777, 0o770, 0o702], ids=lambda m: f"{m:04o}")
def test_directory_writable_by_others_is_refused(
    base: Path, lowerings: list[int], bad_mode: int
) -> None:
    check_victim()
    before = snapshot(base)
    base.chmod(bad_mode)
    reason = f"is writable by group or others (mode {bad_mode:04o})"
    with refused(base, reason):
        check_victim()
    assert len(lowerings) == 2  # the entry on disk was not read
    assert snapshot(base) == before  # nor rewritten, nor anything added
    check_victim()  # one warning per process and directory (an unexpected one is an error)
    assert len(lowerings) == 3


def test_fresh_directory_writable_by_others_gets_nothing(base: Path) -> None:
    base.chmod(0o777)
    with refused(base, "is writable by group or others (mode 0777)"):
        check_victim()
    assert list(base.iterdir()) == []  # no key, no entry directory, no entry


def test_entry_directory_writable_by_others_is_refused(base: Path, lowerings: list[int]) -> None:
    check_victim()
    entry_dir(base).chmod(0o757)
    before = snapshot(base)
    with refused(entry_dir(base), "is writable by group or others (mode 0757)"):
        check_victim()
    assert len(lowerings) == 2
    assert snapshot(base) == before


def test_directory_of_another_user_is_refused(
    base: Path, lowerings: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    check_victim()
    me = os.geteuid()
    if me == 0:
        os.chown(base, OTHER_UID, -1)
        owner, me_now = OTHER_UID, 0
    else:  # a normal user cannot give files away: become someone else instead
        monkeypatch.setattr(os, "geteuid", lambda: me + 1)
        owner, me_now = me, me + 1
    reason = f"is owned by uid {owner}, not by the current user (uid {me_now})"
    with refused(base, reason):
        check_victim()
    assert len(lowerings) == 2


@pytest.mark.parametrize("which", ["entry directory", "object", "json"])
def test_entry_of_another_user_is_refused(base: Path, lowerings: list[int], which: str) -> None:
    check_victim()
    meta, obj = entry(base)
    path = {"entry directory": entry_dir(base), "object": obj, "json": meta}[which]
    give_away(path)
    reason = f"is owned by uid {OTHER_UID}, not by the current user (uid {os.geteuid()})"
    with refused(path, reason, entry_only=which != "entry directory"):
        check_victim()
    assert len(lowerings) == 2


def test_symlinked_directory_is_refused(
    base: Path, lowerings: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    check_victim()
    link = base.parent / "link"
    link.symlink_to(base)
    monkeypatch.setenv("DLC_CACHE_DIR", str(link))
    before = snapshot(base)
    with refused(link, "is a symbolic link"):
        check_victim()
    assert len(lowerings) == 2
    assert snapshot(base) == before


def test_symlinked_entry_directory_is_refused(base: Path, lowerings: list[int]) -> None:
    check_victim()
    real = base.parent / "elsewhere"
    entry_dir(base).rename(real)
    entry_dir(base).symlink_to(real)
    with refused(entry_dir(base), "is a symbolic link"):
        check_victim()
    assert len(lowerings) == 2


def test_cache_path_that_is_a_file_is_refused(base: Path) -> None:
    base.rmdir()
    base.write_bytes(b"")
    with refused(base, "is not a directory"):
        check_victim()


@pytest.mark.parametrize("damage", ["symlink", "writable", "directory"])
def test_bad_entry_file_is_ignored_and_rewritten(
    base: Path, lowerings: list[int], damage: str
) -> None:
    check_victim()
    meta, obj = entry(base)
    if damage == "symlink":  # the same bytes, through a link
        obj.rename(base.parent / "object")
        obj.symlink_to(base.parent / "object")
        reason = "is a symbolic link"
    elif damage == "writable":
        obj.chmod(0o666)
        reason = "is writable by group or others (mode 0666)"
    else:
        obj.unlink()
        obj.mkdir(mode=0o700)
        reason = "is not a regular file"
    with refused(obj, reason, entry_only=True):
        check_victim()
    assert len(lowerings) == 2
    if damage != "directory":  # a directory is not replaced by a rename; it stays a miss
        assert stat.S_ISREG(obj.lstat().st_mode) and mode(obj) == 0o600  # rewritten
        check_victim()
        assert len(lowerings) == 2  # and read


def plant(victim_base: Path, attacker_base: Path, monkeypatch: pytest.MonkeyPatch) -> bytes:
    """Compile ATTACKER into `attacker_base` and put its object code and metadata under
    VICTIM's key in `victim_base`, its record naming VICTIM's key; the attacker's key."""
    monkeypatch.setenv("DLC_CACHE_DIR", str(attacker_base))
    cache.clear_memory()
    np.testing.assert_array_equal(dlc.compile(ATTACKER).f(X), X * X)
    attacker_meta, attacker_obj = entry(attacker_base)
    victim_meta, victim_obj = entry(victim_base)
    record = json.loads(attacker_meta.read_text())
    record["key"] = victim_meta.stem
    victim_meta.write_text(json.dumps(record))
    victim_obj.write_bytes(attacker_obj.read_bytes())
    monkeypatch.setenv("DLC_CACHE_DIR", str(victim_base))
    return (attacker_base / cache.KEY_FILE).read_bytes()


def resign(base: Path, secret: bytes) -> None:
    """Replace the MAC of the only entry under `base` by one made with `secret`."""
    meta, obj = entry(base)
    record = json.loads(meta.read_text())
    del record["mac"]
    record["mac"] = cache._mac(secret, record, obj.read_bytes())
    meta.write_text(json.dumps(record))


@pytest.mark.parametrize("forgery", ["signed with another key", "copied", "plain SHA-256"])
def test_planted_entry_is_never_loaded(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forgery: str
) -> None:
    check_victim()
    attacker_key = plant(base, tmp_path / "attacker", monkeypatch)
    meta, obj = entry(base)
    if forgery == "signed with another key":  # a consistent record, MAC and all
        resign(base, attacker_key)
    elif forgery == "plain SHA-256":  # what the cache checked before it had a key
        record = json.loads(meta.read_text())
        del record["mac"]
        record["object_sha256"] = hashlib.sha256(obj.read_bytes()).hexdigest()
        meta.write_text(json.dumps(record))
    # "copied": the record as the other cache wrote it, but naming the victim's key
    check_victim()  # x + x: the planted x * x was not run
    # The same plant signed with the victim's own key is run: only the key stops it.
    plant(base, tmp_path / "attacker2", monkeypatch)
    resign(base, (base / cache.KEY_FILE).read_bytes())
    cache.clear_memory()
    np.testing.assert_array_equal(dlc.compile(VICTIM).f(X), X * X)


def test_metadata_is_authenticated(base: Path, lowerings: list[int]) -> None:
    check_victim()
    meta, _ = entry(base)
    record = json.loads(meta.read_text())
    record["meta"]["arena_bytes"] += 64  # well-formed, but not ours
    meta.write_text(json.dumps(record))
    check_victim()
    assert len(lowerings) == 2


@pytest.mark.parametrize("layout", ["explicit", "xdg"])
def test_created_directories_and_files_are_private_under_umask_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    monkeypatch.delenv("DLC_CACHE", raising=False)
    if layout == "explicit":
        monkeypatch.setenv("DLC_CACHE_DIR", str(tmp_path / "a" / "b" / "dlc"))
    else:
        monkeypatch.delenv("DLC_CACHE_DIR")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a" / "b"))
    old = os.umask(0)
    try:
        check_victim()
    finally:
        os.umask(old)
    made = [tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "dlc"]
    made.append(entry_dir(made[-1]))
    assert {str(p): oct(mode(p)) for p in made} == {str(p): "0o700" for p in made}
    meta, obj = entry(made[2])
    quick = sorted(made[3].glob("*.quick"))  # the warm start's record (dlc.runtime.quick)
    assert len(quick) == 1
    files = [made[2] / cache.KEY_FILE, meta, obj, *quick]
    assert {str(p): oct(mode(p)) for p in files} == {str(p): "0o600" for p in files}
    assert sorted(tmp_path.rglob("*")) == sorted(made + files)  # no temporary left over
    assert len((made[2] / cache.KEY_FILE).read_bytes()) == KEY_BYTES


@pytest.mark.parametrize("damage", ["mode 0644", "mode 0620", "short", "symlink", "owner"])
def test_bad_key_file_is_refused(base: Path, lowerings: list[int], damage: str) -> None:
    check_victim()
    key = base / cache.KEY_FILE
    if damage.startswith("mode"):
        key.chmod(int(damage[-4:], 8))
        reason = f"is readable or writable by group or others ({damage})"
    elif damage == "short":
        key.write_bytes(key.read_bytes()[:16])
        reason = f"does not hold a {KEY_BYTES}-byte key"
    elif damage == "symlink":
        key.rename(base.parent / "key")
        key.symlink_to(base.parent / "key")
        reason = "is a symbolic link"
    else:
        give_away(key)
        reason = f"is owned by uid {OTHER_UID}, not by the current user (uid {os.geteuid()})"
    before = snapshot(base)
    with refused(key, reason):
        check_victim()
    assert len(lowerings) == 2
    assert snapshot(base) == before  # the key is not replaced: that is for its owner


def test_existing_key_is_kept(base: Path) -> None:
    check_victim()
    key = (base / cache.KEY_FILE).read_bytes()
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    try:
        cache._create_secret(fd)  # as a second process racing the first would
    finally:
        os.close(fd)
    assert (base / cache.KEY_FILE).read_bytes() == key
    assert sorted(p.name for p in base.iterdir()) == [cache.KEY_FILE, entry_dir(base).name]
    assert len(key) == KEY_BYTES


def test_no_warning_is_repeated_across_calls(base: Path) -> None:
    base.chmod(0o777)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            check_victim()
    assert len([w for w in caught if w.category is cache.UntrustedCacheWarning]) == 1
