"""The graph viewer (`dlc-opt --view`, `dlc.view`): what it draws, repeated blocks
collapsed, the formats, and every error it reports."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx_models import make, node

import dlc
import dlc.onnx
from dlc.cli import dlc_opt
from dlc.viewer import picture, render
from dlc.viewer.picture import Cluster, Node, Picture
from dlc.viewer.repeats import collapse

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MLP = (EXAMPLES / "mlp.dl").read_text()


def transformer(layers: int, tokens: int = 4, hidden: int = 8, ffn: int = 16) -> onnx.ModelProto:
    """`layers` transformer-like layers: attention, residual, LayerNorm, a ReLU FFN."""
    rng = np.random.default_rng(0)
    nodes, weights = [], {}

    def w(name: str, *shape: int) -> str:
        weights[name] = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        return name

    def op(kind: str, inputs: list[str], out: str, **attrs: object) -> str:
        nodes.append(node(kind, inputs, [out], **attrs))
        return out

    x = "x"
    for i in range(layers):
        p = f"l{i}."
        q, k, v = (op("MatMul", [x, w(p + n, hidden, hidden)], p + n + "x") for n in "qkv")
        scores = op("MatMul", [q, op("Transpose", [k], p + "kt", perm=[1, 0])], p + "scores")
        attn = op("MatMul", [op("Softmax", [scores], p + "probs", axis=-1), v], p + "attn")
        res = op("Add", [x, attn], p + "res1")
        h = op("LayerNormalization", [res, w(p + "g1", hidden), w(p + "b1", hidden)], p + "n1")
        f = op("Relu", [op("MatMul", [h, w(p + "w1", hidden, ffn)], p + "ffn1")], p + "relu")
        res2 = op("Add", [h, op("MatMul", [f, w(p + "w2", ffn, hidden)], p + "ffn2")], p + "res2")
        x = op("LayerNormalization", [res2, w(p + "g2", hidden), w(p + "b2", hidden)], p + "n2")
    return make(nodes, {"x": [tokens, hidden]}, {x: [tokens, hidden]}, weights)


def test_graph_view_draws_every_instruction_with_its_shape() -> None:
    dot = render(dlc.parse(MLP, "mlp.dl"), "graph")
    assert dot.startswith('digraph "dlc" {')
    for line in ("%xw1 = dot\\n<1x256xf32>", "%probs = divide\\n<1x10xf32>", "%x\\n<1x784xf32>"):
        assert line in dot
    names = dict(re.findall(r"(n\d+) \[label=\"([^\\\"]+)", dot))
    by_label = {label: n for n, label in names.items()}
    assert f"{by_label['%xw1 = dot']} -> {by_label['%z1 = add']};" in dot
    assert "×" not in dot  # a small program is drawn whole


def test_fused_view_frames_groups_with_their_schedules() -> None:
    dot = render(dlc.parse(MLP, "mlp.dl"), "fused")
    assert re.search(r'label="group (\d+)";(.|\n)*\\ngroup \1 at \d+', dot)  # frame, schedule
    assert "mlp.dl:14" in dot  # each kernel names the DLVM line it came from
    assert "%w1\\n<784x256xf32>" in dot  # the arguments keep their names
    unfused = render(dlc.parse(MLP, "mlp.dl"), "fused", opt_level=0)
    assert "group" not in unfused


def test_repeated_layers_are_drawn_once_with_their_count() -> None:
    module = dlc.onnx.load(transformer(24))
    drawn = picture(module, "graph")
    frames = [c.label for c in drawn.clusters if c.kind == "repeat"]
    assert frames and max(int(f[1:]) for f in frames) >= 23
    shown = len(drawn.nodes) - len(drawn.hidden)
    assert shown * 5 < len(drawn.nodes)
    every = picture(module, "graph", collapse_repeats=False)
    assert not every.hidden and len(every.nodes) == len(drawn.nodes)


def test_fused_view_collapses_repeated_groups() -> None:
    drawn = picture(dlc.onnx.load(transformer(6)), "fused")
    assert any(c.kind == "repeat" and c.label in ("×5", "×6") for c in drawn.clusters)
    assert any(c.kind == "group" for c in drawn.clusters)


def test_collapse_keeps_edges_into_and_out_of_the_repeat() -> None:
    """in -> (a -> b) x 4 -> out: one copy drawn, entered from `in`, leaving to `out`."""
    p = Picture()
    f = p.add_cluster(Cluster("@f", None, "func"))
    keys = ["in"] + ["a|1", "b|1"] * 4 + ["out|1"]
    for key in keys:
        p.add_node(Node([key], "op", f, key))
    p.edges = [(i, i + 1) for i in range(len(keys) - 1)]
    p.order = [list(range(len(keys)))]
    collapse(p, min_cover=4)
    assert p.hidden == set(range(3, 9))
    assert p.edges == [(0, 1), (1, 2), (2, 9)]
    assert [c.label for c in p.clusters] == ["@f", "×4"]


def test_html_is_self_contained(tmp_path: Path) -> None:
    out = tmp_path / "t.html"
    text = dlc.view(dlc.onnx.load(transformer(3)), "fused", out)
    assert out.read_text() == text
    assert text.startswith("<!DOCTYPE html>") and "<svg" in text and "×2" in text
    assert "<script" not in text and not re.search(r"(src|href)=\"?(https?:)?//", text)
    assert "Graphviz source" in text


def test_api_errors() -> None:
    module = dlc.parse(MLP)
    with pytest.raises(ValueError, match="unknown view 'boxes'"):
        dlc.view(module, "boxes")
    with pytest.raises(ValueError, match="cannot tell the drawing format of 'x.png'"):
        dlc.view(module, "graph", "x.png")
    with pytest.raises(TypeError, match="view: expected a ModuleOp"):
        dlc.view(MLP)  # type: ignore[arg-type]


def _opt(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = dlc_opt.main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_writes_each_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "mlp.dl"
    src.write_text(MLP)
    code, out, _ = _opt([str(src), "--view=graph"], capsys)
    assert code == 0 and out.startswith('digraph "mlp.dl" {')
    for name in ("m.dot", "m.html"):
        code, _, err = _opt([str(src), "--view=fused", "-o", str(tmp_path / name)], capsys)
        assert code == 0 and err == ""
    assert (tmp_path / "m.dot").read_text().startswith("digraph")
    assert "group 0" in (tmp_path / "m.html").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--view=graph", "-o", "OUT.png"], "out.png': name it .dot, .svg or .html"),
        (["--view=graph", "-t", "llvm"], "--view draws one program; it does not take -t"),
        (["--view=graph", "--split-input-file"], "it does not take --split-input-file"),
        (
            ["--view=graph", "-p", "lower-graph-to-tensor"],
            "--view=graph draws graph-level modules; this one is at the tensor level",
        ),
        (
            ["--view=fused", "-p", "lower-graph-to-tensor,lower-tensor-to-loop"],
            "--view=fused draws graph- or tensor-level modules; this one is at the loop level",
        ),
    ],
)
def test_cli_errors(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "mlp.dl"
    src.write_text(MLP)
    args = [a.replace("OUT", str(tmp_path / "out")) for a in args]
    code, _, err = _opt([str(src), *args], capsys)
    assert code == 1
    assert err.startswith("dlc-opt: error: ") and message in err
    assert not (tmp_path / "out.png").exists()


def test_svg_without_graphviz_says_what_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "mlp.dl"
    src.write_text(MLP)
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` there
    code, _, err = _opt([str(src), "--view=graph", "-o", str(tmp_path / "m.svg")], capsys)
    assert code == 1
    assert (
        "writing .svg needs Graphviz's 'dot' program" in err and "apt-get install graphviz" in err
    )
    assert not (tmp_path / "m.svg").exists()
