"""Pass and dialect plugins: files (`--load-pass-plugin`, `dlc.load_plugin`) and installed
entry points, in `dlc-opt -p` and in `dlc.compile(..., extra_passes=)`; every way a plugin
can be wrong is a one-line error naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dlc
from dlc import pipeline, plugins
from dlc.cli import dlc_opt

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "test" / "lit" / "cli" / "inputs" / "double_to_add.py"
PROGRAM = """module "m"
stage raw

func @f: (<4 x f32>) -> <4 x f32> {
'entry(%x: <4 x f32>):
    %0.0 = multiply %x: <4 x f32>, 2: f32
    return %0.0: <4 x f32>
}
"""


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test loads plugins into empty registries (restored afterwards)."""
    monkeypatch.setattr(pipeline, "PLUGIN_PASSES", {})
    monkeypatch.setattr(plugins, "DIALECTS", {})
    monkeypatch.setattr(plugins, "_LOADED", {})
    monkeypatch.setattr(plugins, "_ENTRY_POINTS_READ", [])


def test_a_plugin_file_brings_its_passes_and_dialects() -> None:
    plugin = dlc.load_plugin(PLUGIN)
    assert list(plugin.passes) == ["double-to-add"]
    assert [d.name for d in plugin.dialects] == ["plugin_marker"]
    assert "double-to-add" in pipeline.get_all_passes()
    assert dlc.load_plugin(PLUGIN) is plugin  # once per file


def test_extra_passes_run_in_compile() -> None:
    dlc.load_plugin(PLUGIN)
    module = dlc.compile(PROGRAM, extra_passes={"graph": ["double-to-add"]})
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(module.f(x), 2 * x)
    graph = module.ir("graph")
    assert "%0.0 = add %x: <4 x f32>, %x: <4 x f32>" in graph and "multiply" not in graph


def test_dlc_opt_runs_a_plugin_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "p.dl"
    source.write_text(PROGRAM)
    argv = [
        str(source),
        "--load-pass-plugin",
        str(PLUGIN),
        "-p",
        "double-to-add",
        "--pass-statistics",
    ]
    assert dlc_opt.main(argv) == 0
    out = capsys.readouterr()
    assert "%0.0 = add %x: <4 x f32>, %x: <4 x f32>" in out.out
    assert "double-to-add: doublings: 1" in out.err
    tool = dlc_opt.DlcOptMain([str(source), f"--load-pass-plugin={PLUGIN}"])
    assert tool.ctx.get_optional_dialect("plugin_marker") is not None


def _plugin(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


PASS_TEXT = """from dataclasses import dataclass
from xdsl.passes import ModulePass


@dataclass(frozen=True)
class P(ModulePass):
    name = "{name}"

    def apply(self, ctx, op):
        pass
"""


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("missing.py", None, "plugin {path}: no such file"),
        (
            "empty.py",
            "x = 1\n",
            "plugin {path}: defines no ModulePass subclass with a name, and no Dialect",
        ),
        (
            "boom.py",
            "raise RuntimeError('boom')\n",
            "plugin {path}: cannot import it: RuntimeError: boom",
        ),
        (
            "clash.py",
            PASS_TEXT.format(name="canonicalize"),
            "plugin {path}: pass 'canonicalize' clashes with a built-in pass",
        ),
        (
            "dialect.py",
            "from xdsl.ir import Dialect\nD = Dialect('graph', [], [])\n",
            "plugin {path}: dialect 'graph' clashes with a built-in dialect",
        ),
    ],
)
def test_bad_plugins_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str | None, expected: str
) -> None:
    path = tmp_path / name if text is None else _plugin(tmp_path, name, text)
    with pytest.raises(plugins.PluginError) as info:
        dlc.load_plugin(path)
    assert str(info.value) == expected.format(path=path)
    source = _plugin(tmp_path, "p.dl", PROGRAM)
    assert dlc_opt.main([str(source), "--load-pass-plugin", str(path)]) == 1
    assert capsys.readouterr().err == f"dlc-opt: error: {expected.format(path=path)}\n"


def test_two_plugins_may_not_define_one_pass(tmp_path: Path) -> None:
    first = _plugin(tmp_path, "a.py", PASS_TEXT.format(name="mine"))
    second = _plugin(tmp_path, "b.py", PASS_TEXT.format(name="mine"))
    dlc.load_plugin(first)
    with pytest.raises(plugins.PluginError, match=f"pass 'mine' is already defined by {first}"):
        dlc.load_plugin(second)


@pytest.mark.parametrize(
    ("extra", "error", "expected"),
    [
        (
            ["double-to-add"],
            TypeError,
            "extra_passes must be a mapping of level to pass names, got list",
        ),
        ({"llvm": ["double-to-add"]}, ValueError, "extra_passes: unknown level 'llvm'"),
        (
            {"graph": "double-to-add"},
            TypeError,
            "extra_passes['graph'] must be a list of pass names",
        ),
        (
            {"graph": ["nope"]},
            ValueError,
            "extra_passes: unknown pass 'nope' (load its plugin first",
        ),
        ({"graph": ["inline{bogus=1}"]}, ValueError, "bogus"),
    ],
)
def test_extra_passes_are_checked(extra: object, error: type, expected: str) -> None:
    dlc.load_plugin(PLUGIN)
    with pytest.raises(error) as info:
        dlc.compile(PROGRAM, extra_passes=extra)
    assert expected in str(info.value)


def test_an_installed_entry_point_is_found(tmp_path: Path) -> None:
    """A distribution on the path with a `dlc.passes` entry point: dlc-opt knows its
    pass without --load-pass-plugin."""
    (tmp_path / "userpasses.py").write_text(PASS_TEXT.format(name="user-nothing"))
    info = tmp_path / "userpasses-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: userpasses\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[dlc.passes]\nnothing = userpasses:P\n")
    source = _plugin(tmp_path, "p.dl", PROGRAM)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    done = subprocess.run(
        [sys.executable, "-m", "dlc.cli.dlc_opt", str(source), "-p", "user-nothing"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "%0.0 = multiply %x: <4 x f32>, 2: f32" in done.stdout
