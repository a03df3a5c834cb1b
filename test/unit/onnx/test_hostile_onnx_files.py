"""Hostile ONNX models against the file system: external tensor data is read only from
a directory the caller names (a model file's own directory by default), through plain
relative paths with no symlink, never from the process's current directory (issue 28:
`location="etc/passwd"` with the process in `/` returned /etc/passwd as the output)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

import dlc
import dlc.onnx
from dlc.cli import dlc_opt, dlc_run

SECRET = b"top secret!"


def _model(location: str, offset: int = 0, length: int = 4) -> onnx.ModelProto:
    """y = Identity(w), w a <length x u8> initializer stored in `location`."""
    w = TensorProto(name="w", data_type=TensorProto.UINT8, dims=[length])
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph(
        [helper.make_node("Identity", ["w"], ["y"], name="y")],
        "g",
        [],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [length])],
        [w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp/data/w.bin holds the weights; tmp/etc/passwd is a secret in the current
    directory the models must not reach."""
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "passwd").write_bytes(SECRET)
    data = tmp_path / "data"
    data.mkdir()
    (data / "w.bin").write_bytes(bytes([1, 2, 3, 4, 5, 6]))
    monkeypatch.chdir(tmp_path)
    return data


REFUSED = (
    "<model>: error: tensor 'w': external data is refused: a model given as bytes or a "
    "ModelProto reads external data only from a directory named by external_data_dir="
)


@pytest.mark.parametrize("as_bytes", [False, True])
def test_bytes_and_protos_refuse_external_data_without_a_directory(
    data_dir: Path, as_bytes: bool
) -> None:
    model = _model("etc/passwd")
    given = model.SerializeToString() if as_bytes else model
    for entry in (dlc.onnx.load, dlc.compile_onnx):
        with pytest.raises(dlc.DiagnosticError) as info:
            entry(given)
        assert str(info.value) == REFUSED


def test_named_directory_reads_external_data(data_dir: Path) -> None:
    model = _model("w.bin", offset=1, length=4)
    out = dlc.compile_onnx(model, external_data_dir=data_dir).g()
    assert out.tolist() == [2, 3, 4, 5]
    out = dlc.compile_onnx(model.SerializeToString(), external_data_dir=str(data_dir)).g()
    assert out.tolist() == [2, 3, 4, 5]
    assert model.graph.initializer[0].data_location == TensorProto.EXTERNAL  # not changed


@pytest.mark.parametrize(
    ("location", "why"),
    [
        ("../etc/passwd", "location '../etc/passwd' is not a plain relative path"),
        ("/etc/passwd", "location '/etc/passwd' is not a plain relative path"),
        ("./w.bin", "location './w.bin' is not a plain relative path"),
        ("", "location '' is not a plain relative path"),
        ("sub/../../etc/passwd", "location 'sub/../../etc/passwd' is not a plain relative path"),
        ("linkdir/passwd", "location 'linkdir/passwd' goes through a symlink"),
        ("link.bin", "location 'link.bin' goes through a symlink"),
        ("missing.bin", "'missing.bin': No such file or directory"),
        ("sub", "location 'sub' is not a regular file"),
    ],
)
def test_locations_outside_the_directory_are_refused(
    data_dir: Path, location: str, why: str
) -> None:
    (data_dir / "linkdir").symlink_to(data_dir.parent / "etc")
    (data_dir / "link.bin").symlink_to(data_dir.parent / "etc" / "passwd")
    (data_dir / "sub").mkdir()
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.onnx.load(_model(location), external_data_dir=data_dir)
    assert str(info.value) == f"<model>: error: tensor 'w': external data {why}"


def test_ranges_outside_the_file_are_refused(data_dir: Path) -> None:
    with pytest.raises(dlc.DiagnosticError) as info:
        dlc.onnx.load(_model("w.bin", offset=4, length=4), external_data_dir=data_dir)
    assert str(info.value) == (
        "<model>: error: tensor 'w': external data range [4, 8) is outside the 6-byte file"
    )


def test_a_model_file_reads_only_its_own_directory(data_dir: Path) -> None:
    path = data_dir / "m.onnx"
    onnx.save(_model("w.bin"), str(path))
    assert dlc.compile_onnx(path).g().tolist() == [1, 2, 3, 4]
    onnx.save(_model("../etc/passwd"), str(path))
    with pytest.raises(dlc.DiagnosticError, match="is not a plain relative path"):
        dlc.compile_onnx(str(path))
    # a symlinked directory inside the model's directory is not followed
    (data_dir / "linkdir").symlink_to(data_dir.parent / "etc")
    onnx.save(_model("linkdir/passwd"), str(path))
    with pytest.raises(dlc.DiagnosticError, match="goes through a symlink"):
        dlc.onnx.load(str(path))


def test_cli_external_data_dir(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "elsewhere.onnx"
    onnx.save(_model("w.bin"), str(model))
    assert dlc_run.main([str(model)]) == 1
    assert "tensor 'w': external data 'w.bin': No such file" in capsys.readouterr().err
    assert dlc_run.main([str(model), "--external-data-dir", str(data_dir)]) == 0
    assert capsys.readouterr().out.startswith("output 0: <4 x u8>")
    assert dlc_opt.main([str(model)]) == 1
    assert "tensor 'w': external data 'w.bin': No such file" in capsys.readouterr().err
    assert dlc_opt.main([str(model), "--external-data-dir", str(data_dir)]) == 0
    assert "literal" in capsys.readouterr().out
