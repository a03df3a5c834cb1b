"""Generate the reference pages of the documentation from the code: dlc's dialects and
their ops (from the op definitions), the passes and their options (from the pass
classes), the command-line tools (from their argparse parsers) and the ONNX operator
coverage (from the importer's converter table).

The MkDocs build calls `pages()` through `tools/mkdocs_hooks.py`, so the pages are never
stale; `python tools/gen_docs.py --out DIR` writes them to DIR to read them without
MkDocs. `undocumented()` lists what has no documentation (an op without a docstring of
its own, a pass option its docstring does not name, a flag without help);
test/unit/test_docs.py fails on any.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import sys
from collections.abc import Callable
from importlib import import_module
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

OWN_DIALECTS = ("graph", "tensor", "loop", "schedule")
"""dlc's own dialects (xDSL's builtin, arith, math and llvm are documented by xDSL)."""

CLI_TOOLS = ("dlc-opt", "dlc-run", "dlc-compile", "dlc-tune", "dlc-prove", "dlc-bisect")

IMPORTER_OPERATORS = {
    "Constant": "its value is a constant of the import (`GraphImporter._constant`)"
}
"""Operators the importer handles before its converter table (`importer.py`, `_convert`)."""


# -- dialects ------------------------------------------------------------------------------


def _own_doc(cls: type) -> str:
    """`cls`'s own docstring, cleaned; "" when it has none (an inherited one is none)."""
    doc = cls.__dict__.get("__doc__")
    return inspect.cleandoc(doc) if doc else ""


def _dialect(name: str):  # noqa: ANN202 -- xdsl.ir.Dialect
    from dlc.dialects import get_all_dialects

    return get_all_dialects()[name]()


def _class_path(cls: type) -> str:
    """`module.Class`; the class name alone for classes made at run time (a family of
    ops generated from one table)."""
    module = cls.__module__
    return f"{module}.{cls.__name__}" if module.startswith("dlc.") else cls.__name__


def _op_signature(op: type) -> str:
    """Operands, results, properties and regions of an op definition, one line."""
    definition = op.get_irdl_definition()
    parts = []
    for label, items in (
        ("operands", definition.operands),
        ("results", definition.results),
        ("properties", list(definition.properties.items())),
        ("attributes", list(definition.attributes.items())),
        ("regions", definition.regions),
        ("successors", definition.successors),
    ):
        names = [f"`{n}`" for n, _ in items]
        if names:
            parts.append(f"{label}: {', '.join(names)}")
    return "; ".join(parts) or "no operands, results or properties"


def dialect_page(name: str) -> str:
    """The reference page of dialect `name`: its module's docstring, then every op and
    attribute with its docstring."""
    dialect = _dialect(name)
    ops = sorted(dialect.operations, key=lambda op: op.name)
    attrs = sorted(dialect.attributes, key=lambda a: a.name)
    overview = inspect.cleandoc(import_module(f"dlc.dialects.{name}").__doc__ or "")
    lines = [f"# The `{name}` dialect", ""]
    lines += [
        f"*Generated from the op definitions by `tools/gen_docs.py`: {len(ops)} ops, "
        f"{len(attrs)} attributes and types.* From `dlc/dialects/{name}.py`:",
        "",
        overview,
        "",
    ]
    if ops:
        lines += ["## Operations", ""]
    for op in ops:
        lines += [f"### `{op.name}`", ""]
        lines += [f"`{_class_path(op)}`: {_op_signature(op)}.", ""]
        lines += [_own_doc(op), ""]
    if attrs:
        lines += ["## Attributes and types", ""]
    for attr in attrs:
        lines += [f"### `{attr.name}`", "", f"`{_class_path(attr)}`", ""]
        lines += [_own_doc(attr), ""]
    return "\n".join(lines)


def undocumented_ops() -> list[str]:
    """Ops and attributes of dlc's dialects without a docstring of their own."""
    missing = []
    for name in OWN_DIALECTS:
        dialect = _dialect(name)
        for item in [*dialect.operations, *dialect.attributes]:
            if not _own_doc(item):
                missing.append(f"{name}: {item.name} ({item.__name__}) has no docstring")
    return missing


# -- passes ---------------------------------------------------------------------------------


def _passes() -> dict[str, type]:
    from dlc.pipeline import get_all_passes

    return {name: factory() for name, factory in get_all_passes().items()}


def _pass_options(cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if f.init]


def _option_named(doc: str, field: str) -> bool:
    return field in doc or field.replace("_", "-") in doc


def _default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        return repr(field.default)
    if field.default_factory is not dataclasses.MISSING:
        return repr(field.default_factory())
    return "required"


def passes_page() -> str:
    """Every pass `dlc-opt -p` accepts: level, contract (its docstring) and options."""
    from dlc.pipeline import _PASSES

    lines = [
        "# Passes",
        "",
        "*Generated from the pass classes by `tools/gen_docs.py`.* Run any of them with",
        "`dlc-opt FILE -p name` or `-p 'name{option=value ...}'` (several: comma-separated).",
        "Options are written with dashes or underscores alike. Which passes each",
        "optimization level runs is in [the architecture](../design/architecture.md#pipeline).",
        "",
        "| pass | class | options |",
        "|---|---|---|",
    ]
    classes = _passes()
    for name, cls in classes.items():
        options = ", ".join(f"`{f.name.replace('_', '-')}`" for f in _pass_options(cls)) or "–"
        lines.append(f"| [`{name}`](#{name}) | `{_PASSES[name].partition(':')[2]}` | {options} |")
    lines.append("")
    for name, cls in classes.items():
        lines += [f"## `{name}`", "", f"`{_PASSES[name].replace(':', '.')}`", ""]
        lines += [_own_doc(cls), ""]
        fields = _pass_options(cls)
        if fields:
            lines += ["| option | type | default |", "|---|---|---|"]
            for f in fields:
                kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", f.type)
                lines.append(f"| `{f.name.replace('_', '-')}` | `{kind}` | `{_default(f)}` |")
            lines.append("")
    return "\n".join(lines)


def undocumented_passes() -> list[str]:
    """Passes without a docstring, and options their docstring does not name."""
    missing = []
    for name, cls in _passes().items():
        doc = _own_doc(cls)
        if not doc:
            missing.append(f"pass {name} ({cls.__name__}) has no docstring")
            continue
        missing += [
            f"pass {name}: option {f.name} is not named in {cls.__name__}'s docstring"
            for f in _pass_options(cls)
            if not _option_named(doc, f.name)
        ]
    return missing


# -- command-line tools ---------------------------------------------------------------------


def _dlc_opt_parser() -> argparse.ArgumentParser:
    from xdsl.context import Context

    from dlc.cli.dlc_opt import DlcOptMain

    main = DlcOptMain.__new__(DlcOptMain)  # the parser without parsing sys.argv
    main.available_frontends, main.available_passes, main.available_targets = {}, {}, {}
    main.ctx = Context()
    main.register_all_dialects()
    main.register_all_frontends()
    main.register_all_passes()
    main.register_all_targets()
    parser = argparse.ArgumentParser(prog="dlc-opt", description=main_doc("dlc_opt"))
    main.register_all_arguments(parser)
    return parser


def main_doc(module: str) -> str:
    return (import_module(f"dlc.cli.{module}").__doc__ or "").strip().splitlines()[0]


def cli_parsers() -> dict[str, Callable[[], argparse.ArgumentParser]]:
    """Tool name -> a function building its argparse parser."""

    def of(module: str) -> Callable[[], argparse.ArgumentParser]:
        def build() -> argparse.ArgumentParser:
            return import_module(f"dlc.cli.{module}")._argument_parser()

        return build

    return {
        "dlc-opt": _dlc_opt_parser,
        "dlc-run": of("dlc_run"),
        "dlc-compile": of("dlc_compile"),
        "dlc-tune": of("dlc_tune"),
        "dlc-prove": of("dlc_prove"),
        "dlc-bisect": of("dlc_bisect"),
    }


def _flag(action: argparse.Action) -> str:
    names = ", ".join(f"`{n}`" for n in action.option_strings) or f"`{action.dest}`"
    if action.nargs == 0:
        return names
    metavar = action.metavar or (action.dest.upper() if action.option_strings else "")
    return f"{names} `{metavar}`" if metavar and action.option_strings else names


def _help(action: argparse.Action) -> str:
    text = (action.help or "").replace("%(default)s", str(action.default)).replace("%%", "%")
    if action.choices and not isinstance(action.choices, dict):
        text += f" (one of: {', '.join(f'`{c}`' for c in action.choices)})"
    return text.replace("|", "\\|").replace("\n", " ")


def cli_page(tool: str) -> str:
    """The reference page of one command-line tool: usage and every argument."""
    parser = cli_parsers()[tool]()
    parser.prog = tool
    usage = parser.format_usage().removeprefix("usage: ").strip()
    lines = [f"# `{tool}`", "", "*Generated from its argparse parser by `tools/gen_docs.py`.*"]
    lines += ["", parser.description or "", "", "```", usage, "```", ""]
    lines += ["| argument | meaning |", "|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        lines.append(f"| {_flag(action)} | {_help(action)} |")
    lines.append("")
    return "\n".join(lines)


def undocumented_flags() -> list[str]:
    """Arguments of the command-line tools without help text."""
    missing = []
    for tool, build in cli_parsers().items():
        for action in build()._actions:
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(
                    f"{tool}: {'/'.join(action.option_strings) or action.dest} has no help"
                )
    return missing


# -- ONNX operators -------------------------------------------------------------------------


def onnx_page() -> str:
    """Every operator of the `ai.onnx` domain and how dlc imports it."""
    import onnx

    from dlc.onnx.converters import CONVERTERS

    latest: dict[str, onnx.defs.OpSchema] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain == "" and (
            schema.name not in latest or schema.since_version > latest[schema.name].since_version
        ):
            latest[schema.name] = schema
    counts = {"importer": 0, "converter": 0, "function body": 0, "refused": 0}
    rows = []
    for name in sorted(latest, key=str.lower):
        schema = latest[name]
        if name in IMPORTER_OPERATORS:
            how, note = "importer", IMPORTER_OPERATORS[name]
        elif name in CONVERTERS:
            module = CONVERTERS[name].__module__.replace(".", "/") + ".py"
            how, note = "converter", f"`{module}`"
        elif schema.has_function or schema.has_context_dependent_function:
            how, note = "function body", "imported as its ONNX function body (`dlc/onnx/expand.py`)"
        else:
            how, note = "refused", "an `OnnxImportError` naming the node"
        if schema.deprecated:
            note += " (deprecated in ONNX)"
        counts[how] += 1
        rows.append(f"| {name} | {schema.since_version} | {how} | {note} |")
    lines = [
        "# ONNX operator coverage",
        "",
        f"*Generated from the importer's converter table by `tools/gen_docs.py`, against "
        f"onnx {onnx.__version__}.* Of {len(rows)} operators of the `ai.onnx` domain, "
        f"{counts['importer']} is read by the importer itself, {counts['converter']} have a "
        f"converter, {counts['function body']} are imported as their function body and "
        f"{counts['refused']} are refused. What each converter supports (attributes, types, "
        "limits) is in the [ONNX guide](../guide/onnx.md#supported-operators).",
        "",
        "| operator | latest opset | how | notes |",
        "|---|---:|---|---|",
        *rows,
        "",
    ]
    return "\n".join(lines)


# -- all pages ------------------------------------------------------------------------------


def pages() -> dict[str, str]:
    """Path under docs/ -> Markdown text of every generated page."""
    out = {f"reference/dialects/{name}.md": dialect_page(name) for name in OWN_DIALECTS}
    out["reference/passes.md"] = passes_page()
    out.update({f"reference/cli/{tool}.md": cli_page(tool) for tool in CLI_TOOLS})
    out["reference/onnx-operators.md"] = onnx_page()
    return out


def undocumented() -> list[str]:
    """Everything that should be documented and is not."""
    return undocumented_ops() + undocumented_passes() + undocumented_flags()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the generated pages under this directory")
    parser.add_argument("--check", action="store_true", help="list what has no documentation")
    args = parser.parse_args(argv)
    if args.check:
        missing = undocumented()
        print("\n".join(missing) or "everything is documented")
        return 1 if missing else 0
    out: Path = args.out or ROOT / "site-generated"
    for path, text in pages().items():
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_text(text)
        print(out / path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
