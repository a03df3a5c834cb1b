"""Test-suite defaults: an isolated compile cache (never the user's ~/.cache/dlc), and
every level the compiler builds verified (DLC_VERIFY=1), and every result array
filled with 0x7f bytes before the native code runs (DLC_POISON_OUTPUTS=1), so an
element the code fails to write is a wrong value, not a lucky leftover. opt_level 3's
search prices graphs with the analytical model (DLC_SUPEROPT_COSTS=analytical), so no
test's compile depends on a timing; the tests of measured costs set it back
(test_superopt_costs.py, test_superopt_guard.py).

The unit tests live in directories that mirror dlc's packages (README.md); the shared
helper modules (graph_builders.py, onnx_models.py, autodiff_util.py, aot_driver.py) stay
here, on sys.path for the tests in every directory (and so is every test directory).

Every test process gets its own temporary DLC_CACHE_DIR, removed at exit, unless the
environment already names one (or turns the cache off with DLC_CACHE=0). Fixtures of
the cache tests: `cache_dir` (a fresh, empty cache for one test) and `lowerings`
(counts full compiles).
"""

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
# the shared helper modules, and every test directory: a test may import what another
# test module defines (test file names are unique, test_unit_layout.py), whichever
# files this run collects
for _dir in sorted({p.parent for p in _HERE.rglob("test_*.py")}, reverse=True):
    sys.path.insert(0, str(_dir))
sys.path.insert(0, str(_HERE))

os.environ.setdefault("DLC_VERIFY", "1")  # every level of every compile verified
os.environ.setdefault("DLC_POISON_OUTPUTS", "1")  # results start as 0x7f bytes
os.environ.setdefault("DLC_SUPEROPT_COSTS", "analytical")  # no compile depends on timings

if "DLC_CACHE_DIR" not in os.environ:
    _CACHE_DIR = tempfile.mkdtemp(prefix="dlc-test-cache-")
    os.environ["DLC_CACHE_DIR"] = _CACHE_DIR
    atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh, empty cache (disk and memory) for one test."""
    from dlc.runtime import cache

    monkeypatch.setenv("DLC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("DLC_CACHE", raising=False)
    cache.clear_memory()
    yield tmp_path
    cache.clear_memory()


@pytest.fixture
def lowerings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts calls of the lowering pipeline (one per full compile)."""
    from dlc import api, program_levels

    calls: list[int] = []
    original = program_levels.lower

    def counting(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(api, "lower", counting)  # a compile
    monkeypatch.setattr(program_levels, "lower", counting)  # `ir(level)`, export
    return calls


_LIT_FILE = "test_lit.py"


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's: none without it (-p no:xdist)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`--dist loadfile` (pyproject.toml's default) with the lit shards as work units of
    their own, handed out first: `test_lit.py` runs the lit suite in shards (minutes of
    processes between them), which would otherwise make one unit that the scheduler,
    ordering files by their number of tests, starts last, on one worker."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LitFirstLoadFile(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.split("::", 1)[0].endswith(_LIT_FILE):
                return nodeid  # each shard a unit
            return super()._split_scope(nodeid)

        def _assign_work_unit(self, node: object) -> None:
            shards = [s for s in self.workqueue if s.split("::", 1)[0].endswith(_LIT_FILE)]
            for scope in reversed(shards):
                self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return LitFirstLoadFile(config, log)
