"""llvmlite's C library called directly (dlc/llvm_c.py): the same answers and the same
loaded code as through `llvmlite.binding`, the fallback to it, and a warm start that
never imports it (its signal handler comes from the cache entry, and Ctrl-C still
stops a native loop)."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import llvmlite.binding as llvm_binding
import numpy as np
import pytest
from test_threads import SPIN  # an endless native loop (n < -5 ends it)

import dlc
from dlc import llvm_c
from dlc.runtime import cache, interrupts
from dlc.runtime.jit import JITModule, build_object

ADD = """
@counter = global i64 41

define i64 @add(i64 %a, i64 %b) {
  %s = add i64 %a, %b
  ret i64 %s
}
"""


def test_host_queries_agree_with_llvmlite() -> None:
    assert llvm_c.library() is not None  # the pinned llvmlite: its entry points are declared
    assert llvm_c.process_triple() == llvm_binding.get_process_triple()
    assert llvm_c.host_cpu_name() == llvm_binding.get_host_cpu_name()
    features = llvm_c.host_cpu_features()
    assert features == dict(llvm_binding.get_host_cpu_features())
    assert llvm_c.flatten(features) == llvm_binding.get_host_cpu_features().flatten()
    assert llvm_c.llvm_version() == tuple(llvm_binding.llvm_version_info)


def _check_add(jit: JITModule) -> None:
    add = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)(jit.address("add"))
    assert add(2, 40) == 42
    counter = jit.global_address("counter")
    assert counter is not None and ctypes.c_int64.from_address(counter).value == 41
    assert jit.address_or_none("missing") is None


def test_object_code_runs_in_an_engine_of_its_own() -> None:
    code = build_object(ADD, 2)
    first, second = JITModule.from_object(code), JITModule.from_object(code)
    assert isinstance(first._engine, llvm_c.Engine)
    _check_add(first)
    ctypes.c_int64.from_address(first.global_address("counter") or 0).value = 7
    _check_add(second)  # its own copy of every global


def test_without_the_library_llvmlite_binding_does_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(llvm_c, "_LIB", [None])  # as with an llvmlite of another version
    assert llvm_c.library() is None
    jit = JITModule.from_object(build_object(ADD, 2))
    assert isinstance(jit._engine, llvm_binding.ExecutionEngine)
    _check_add(jit)
    assert llvm_c.process_triple() == llvm_binding.get_process_triple()
    assert llvm_c.host_cpu_name() == llvm_binding.get_host_cpu_name()
    assert llvm_c.llvm_version() == tuple(llvm_binding.llvm_version_info)
    llvm_c.add_symbol("dlc.test.symbol", 4096)
    assert llvm_c.address_of_symbol("dlc.test.symbol") == 4096
    with pytest.raises(RuntimeError):
        llvm_c.load_library_permanently("libdlc-no-such-library.so")


def test_another_llvmlite_version_is_not_called_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llvm_c, "_LIB", [])
    monkeypatch.setattr(llvm_c, "SUPPORTED", ("0.0.",))
    assert llvm_c.library() is None


def test_symbols_and_libraries_through_the_library() -> None:
    llvm_c.add_symbol("dlc.test.direct", 8192)
    assert llvm_c.address_of_symbol("dlc.test.direct") == 8192
    assert llvm_c.address_of_symbol("dlc.test.never.defined") is None
    with pytest.raises(RuntimeError, match="libdlc-no-such-library"):
        llvm_c.load_library_permanently("libdlc-no-such-library.so")


def test_a_stored_entry_carries_the_signal_handler(cache_dir: Path) -> None:
    mod = dlc.compile(SPIN)
    assert mod.spin(np.int64(-10)) == -9
    (path,) = sorted((cache_dir / f"v{cache.FORMAT}").glob("*.json"))
    cache.clear_memory()
    entry = cache.lookup(path.stem)
    assert entry is not None and bytes(entry.handler or b"") == interrupts.handler_object()
    assert cache.HANDLER_SEGMENT not in entry.data  # not a symbol the code is bound to


WARM_SPIN = """
import signal, sys, numpy as np, dlc
signal.signal(signal.SIGINT, signal.default_int_handler)
mod = dlc.compile_file(sys.argv[1])
print(sorted(m for m in sys.modules if m.startswith(("llvmlite.", "xdsl"))), flush=True)
try:
    mod.spin(np.int64(0))
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
print(int(mod.spin(np.int64(-100))))
"""


def test_a_warm_start_loads_no_binding_and_ctrl_c_still_stops_a_loop(
    cache_dir: Path, tmp_path: Path
) -> None:
    source = tmp_path / "program" / "spin.dl"  # tmp_path is the cache's directory too
    source.parent.mkdir()
    source.write_text(SPIN)
    env = {**os.environ, "DLC_CACHE_DIR": str(cache_dir)}
    for run in ("cold", "warm"):
        proc = subprocess.Popen(
            [sys.executable, "-c", WARM_SPIN, str(source)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        loaded = proc.stdout.readline()
        threading.Timer(0.5, lambda p=proc: os.kill(p.pid, signal.SIGINT)).start()
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        assert proc.returncode == 0, err
        assert out.splitlines() == ["KeyboardInterrupt", "-99"]
        if run == "warm":
            assert loaded == "['llvmlite._version']\n", loaded
