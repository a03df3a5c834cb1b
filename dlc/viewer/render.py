"""Write a picture as Graphviz DOT (dlc's own writer), SVG (Graphviz's `dot` program)
or a self-contained HTML page (an SVG laid out here in layers, plus the DOT source).

The HTML layout is a plain layered drawing: a node's layer is one more than its
deepest drawn producer's, the nodes of a layer are ordered by the mean position of
their producers, and every cluster is the box around its nodes. It needs no script and
no network, so the file opens in any browser, offline.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict
from html import escape

from dlc.viewer.picture import Picture

CHAR_W, LINE_H, GAP_X, GAP_Y, PAD = 7, 15, 24, 44, 10
FILL = {"op": "#eef3fb", "input": "#e8f6e8", "output": "#fbeee8"}
FRAME = {"func": "#ffffff", "group": "#fff7dc", "repeat": "#f1ecfb"}


class MissingDot(Exception):
    """SVG output needs Graphviz's `dot` program and this host has none."""


def _dot_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _children(picture: Picture) -> tuple[dict[int | None, list[int]], dict[int, list[int]]]:
    """Clusters by parent cluster (None: top level), visible nodes by cluster."""
    clusters: dict[int | None, list[int]] = defaultdict(list)
    for i, cluster in enumerate(picture.clusters):
        clusters[cluster.parent].append(i)
    nodes: dict[int, list[int]] = defaultdict(list)
    for i, node in enumerate(picture.nodes):
        if i not in picture.hidden:
            nodes[node.cluster].append(i)
    return clusters, nodes


def to_dot(picture: Picture, title: str) -> str:
    """The picture in DOT: clusters as nested `subgraph cluster_N`."""
    out = [
        f"digraph {_dot_string(title)} {{",
        "  rankdir=TB; compound=true; fontname=monospace;",
        '  node [shape=box, style="rounded,filled", fontname=monospace, fontsize=10];',
    ]
    clusters, nodes = _children(picture)
    # ("open", cluster, depth) writes a frame and its nodes; ("close", -1, depth) ends it.
    stack = [("open", c, 1) for c in reversed(clusters.get(None, []))]
    while stack:
        what, c, depth = stack.pop()
        indent = "  " * depth
        if what == "close":
            out.append(f"{indent}}}")
            continue
        cluster = picture.clusters[c]
        out.append(f"{indent}subgraph cluster_{c} {{")
        out.append(
            f"{indent}  label={_dot_string(cluster.label)}; style=filled; "
            f'fillcolor="{FRAME[cluster.kind]}";'
        )
        for n in nodes.get(c, []):
            node = picture.nodes[n]
            label = _dot_string("\n".join(node.label)).replace("\n", "\\n")
            out.append(f'{indent}  n{n} [label={label}, fillcolor="{FILL[node.kind]}"];')
        stack.append(("close", -1, depth))
        stack.extend(("open", child, depth + 1) for child in reversed(clusters.get(c, [])))
    out.extend(f"  n{s} -> n{t};" for s, t in picture.edges)
    out.append("}")
    return "\n".join(out) + "\n"


def dot_program() -> str:
    """The path of Graphviz's `dot`; MissingDot, saying what to install, without one."""
    program = shutil.which("dot")
    if program is None:
        raise MissingDot(
            "writing .svg needs Graphviz's 'dot' program, which is not on PATH (install "
            "Graphviz, e.g. 'apt-get install graphviz'), or write .dot or .html instead"
        )
    return program


def to_svg(dot_text: str) -> str:
    """The DOT text drawn by Graphviz's `dot -Tsvg`."""
    program = dot_program()
    done = subprocess.run(
        [program, "-Tsvg"], input=dot_text, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise MissingDot(f"Graphviz's dot failed: {done.stderr.strip().splitlines()[-1:]}")
    return done.stdout


def _layout(picture: Picture) -> dict[int, tuple[float, float, float, float]]:
    """(x, y, width, height) of every visible node: functions side by side, layers down."""
    visible = [i for i in range(len(picture.nodes)) if i not in picture.hidden]
    preds: dict[int, list[int]] = defaultdict(list)
    for s, t in picture.edges:
        if s < t:
            preds[t].append(s)
    layer: dict[int, int] = {}
    for n in visible:  # program order: producers first
        layer[n] = max((layer[p] + 1 for p in preds[n] if p in layer), default=0)
    top = {n: _function_of(picture, n) for n in visible}
    boxes: dict[int, tuple[float, float, float, float]] = {}
    x0 = PAD * 3.0
    for func in sorted(set(top.values())):
        rows: dict[int, list[int]] = defaultdict(list)
        for n in visible:
            if top[n] == func:
                rows[layer[n]].append(n)
        centre: dict[int, float] = {}
        width = 0.0
        y = PAD * 5.0
        for depth in sorted(rows):
            row = sorted(rows[depth], key=lambda n: (_mean(centre, preds[n]), n))
            x = x0
            height = 0.0
            for n in row:
                w = max(map(len, picture.nodes[n].label)) * CHAR_W + 2 * PAD
                h = len(picture.nodes[n].label) * LINE_H + PAD
                boxes[n] = (x, y, w, h)
                centre[n] = x + w / 2
                x += w + GAP_X
                height = max(height, h)
            width = max(width, x - x0)
            y += height + GAP_Y
        x0 += width + PAD * 6
    return boxes


def _function_of(picture: Picture, node: int) -> int:
    """The outermost cluster (the function) around `node`."""
    c = picture.nodes[node].cluster
    while (parent := picture.clusters[c].parent) is not None:
        c = parent
    return c


def _mean(centre: dict[int, float], preds: list[int]) -> float:
    xs = [centre[p] for p in preds if p in centre]
    return sum(xs) / len(xs) if xs else 0.0


def _frames(picture: Picture, boxes: dict[int, tuple[float, float, float, float]]) -> list[str]:
    """A rectangle and a label per cluster, outermost first."""
    extent: dict[int, list[float]] = {}
    depth = [0] * len(picture.clusters)
    for i, cluster in enumerate(picture.clusters):
        p, d = cluster.parent, 0
        while p is not None:
            p, d = picture.clusters[p].parent, d + 1
        depth[i] = d
    for n, (x, y, w, h) in boxes.items():
        c: int | None = picture.nodes[n].cluster
        while c is not None:
            pad = PAD * (1 + 2 * (max(depth) - depth[c]) if max(depth) else 1)
            box = [x - pad, y - pad - LINE_H, x + w + pad, y + h + pad]
            old = extent.setdefault(c, box)
            extent[c] = [
                min(old[0], box[0]),
                min(old[1], box[1]),
                max(old[2], box[2]),
                max(old[3], box[3]),
            ]
            c = picture.clusters[c].parent
    out = []
    for c in sorted(extent, key=lambda c: depth[c]):
        x1, y1, x2, y2 = extent[c]
        cluster = picture.clusters[c]
        out.append(
            f'<rect x="{x1:.0f}" y="{y1:.0f}" width="{x2 - x1:.0f}" height="{y2 - y1:.0f}" '
            f'rx="6" fill="{FRAME[cluster.kind]}" stroke="#999"/>'
            f'<text x="{x1 + 6:.0f}" y="{y1 + 13:.0f}" class="frame">{escape(cluster.label)}</text>'
        )
    return out


def _edges(picture: Picture, boxes: dict[int, tuple[float, float, float, float]]) -> list[str]:
    """A curve per edge, from the bottom of its source to the top of its target."""
    out = []
    for s, t in picture.edges:
        if s not in boxes or t not in boxes:
            continue
        sx, sy, sw, sh = boxes[s]
        tx, ty, tw, _ = boxes[t]
        a, b = (sx + sw / 2, sy + sh), (tx + tw / 2, ty)
        mid = (a[1] + b[1]) / 2
        out.append(
            f'<path d="M{a[0]:.0f},{a[1]:.0f} C{a[0]:.0f},{mid:.0f} {b[0]:.0f},{mid:.0f} '
            f'{b[0]:.0f},{b[1]:.0f}" class="edge" marker-end="url(#arrow)"/>'
        )
    return out


def to_html(picture: Picture, title: str, dot_text: str) -> str:
    """A self-contained page: the laid-out SVG and, folded, the DOT source."""
    boxes = _layout(picture)
    parts = _frames(picture, boxes) + _edges(picture, boxes)
    for n, (x, y, w, h) in boxes.items():
        node = picture.nodes[n]
        parts.append(
            f'<rect x="{x:.0f}" y="{y:.0f}" width="{w:.0f}" height="{h:.0f}" rx="4" '
            f'fill="{FILL[node.kind]}" stroke="#555"/>'
        )
        for k, line in enumerate(node.label):
            parts.append(
                f'<text x="{x + PAD:.0f}" y="{y + PAD / 2 + LINE_H * (k + 0.8):.0f}">{escape(line)}</text>'
            )
    width = max((x + w for x, _, w, _ in boxes.values()), default=0) + PAD * 6
    height = max((y + h for _, y, _, h in boxes.values()), default=0) + PAD * 6
    shown = len(boxes)
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{escape(title)}</title>
<style>body{{font-family:sans-serif;margin:1em}} svg text{{font:11px monospace}}
svg text.frame{{font-weight:bold}} .edge{{fill:none;stroke:#446;stroke-width:1}}</style></head>
<body><h1>{escape(title)}</h1>
<p>{shown} nodes drawn, {len(picture.hidden)} more in collapsed repeats (a "×N" frame is drawn once).</p>
<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}">
<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6"
orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#446"/></marker></defs>
{chr(10).join(parts)}
</svg>
<details><summary>Graphviz source</summary><pre>{escape(dot_text)}</pre></details>
</body></html>
"""
