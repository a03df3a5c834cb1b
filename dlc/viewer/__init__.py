"""The graph viewer: draw a program as `dlc-opt --view` and `dlc.view` do.

`kind="graph"` draws the graph-level program (an instruction per box, with its result
type); `kind="fused"` lowers a copy to the tensor level with the passes of
`opt_level` (`fuse`, `schedule`) and draws each fusion group as a frame labelled with
its members' schedules. Repeated blocks are drawn once in a "×N" frame
(`dlc.viewer.repeats`). The format follows the file name: `.dot`/`.gv` (Graphviz source,
written by dlc), `.svg` (drawn by Graphviz's `dot` program) or `.html` (a
self-contained page with its own layout; no script, no network).
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from dlc.analysis.levels import level_of
from dlc.diagnostics import clone_located
from dlc.viewer.picture import Picture, argument_names, fused_picture, graph_picture
from dlc.viewer.render import MissingDot, dot_program, to_dot, to_html, to_svg
from dlc.viewer.repeats import collapse

KINDS = ("graph", "fused")
FORMATS = {"dot": "dot", "gv": "dot", "svg": "svg", "html": "html", "htm": "html"}

__all__ = [
    "FORMATS",
    "KINDS",
    "MissingDot",
    "ViewError",
    "dot_program",
    "format_of",
    "picture",
    "render",
]


class ViewError(ValueError):
    """A request the viewer cannot draw: a wrong kind, format or level (one line)."""


def format_of(path: str | None) -> str:
    """The output format a file name asks for (DOT without a file)."""
    if path is None or path == "-":
        return "dot"
    base = path.rsplit("/", 1)[-1]
    extension = base.rsplit(".", 1)[-1].lower() if "." in base else ""
    if extension not in FORMATS:
        raise ViewError(f"cannot tell the drawing format of '{path}': name it .dot, .svg or .html")
    return FORMATS[extension]


def _fused_level(module: ModuleOp, opt_level: int) -> ModuleOp:
    """A copy of `module` at the tensor level after that level's passes."""
    from dlc import pipeline
    from dlc.options import Options

    level = level_of(module)
    if level not in ("graph", "tensor"):
        raise ViewError(
            f"--view=fused draws graph- or tensor-level modules; this one is at the {level} level"
        )
    options = Options(opt_level=opt_level)  # at 0: no fusion, no schedules
    steps = pipeline.steps(options, start=level, stop="tensor") if level == "graph" else []
    steps += [pipeline.Step("tensor", p, False) for p in pipeline.level_passes("tensor", options)]
    return pipeline.run(clone_located(module), steps)


def picture(
    module: ModuleOp, kind: str = "graph", *, opt_level: int = 2, collapse_repeats: bool = True
) -> Picture:
    """What `render` draws: the nodes, edges and frames of `module` for `kind`."""
    if kind not in KINDS:
        raise ViewError(f"unknown view '{kind}' (views: {', '.join(KINDS)})")
    if kind == "graph":
        level = level_of(module)
        if level != "graph":
            raise ViewError(
                f"--view=graph draws graph-level modules; this one is at the {level} level "
                "(use --view=fused)"
            )
        drawn = graph_picture(module)
    else:
        names = argument_names(module) if level_of(module) == "graph" else {}
        drawn = fused_picture(_fused_level(module, opt_level), names)
    return collapse(drawn) if collapse_repeats else drawn


def render(
    module: ModuleOp,
    kind: str = "graph",
    fmt: str = "dot",
    *,
    title: str = "dlc",
    opt_level: int = 2,
    collapse_repeats: bool = True,
) -> str:
    """`module` drawn as `kind` in `fmt` (dot, svg or html): the text of the file."""
    if fmt not in ("dot", "svg", "html"):
        raise ViewError(f"unknown drawing format '{fmt}' (formats: dot, svg, html)")
    drawn = picture(module, kind, opt_level=opt_level, collapse_repeats=collapse_repeats)
    dot_text = to_dot(drawn, title)
    if fmt == "dot":
        return dot_text
    if fmt == "svg":
        return to_svg(dot_text)
    return to_html(drawn, f"{title}: {kind} view", dot_text)
