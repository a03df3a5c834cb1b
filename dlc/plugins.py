"""Pass and dialect plugins: users' xDSL passes and dialects beside dlc's own.

A plugin is a Python file (`dlc-opt --load-pass-plugin PATH.py`, `dlc.load_plugin(path)`)
or an installed distribution's entry point (group `dlc.passes`: a `ModulePass` subclass
or a module of them; group `dlc.dialects`: an xDSL `Dialect`). Its passes are known by
their `name` to `dlc-opt -p` (options, `--help`, statistics, timing, IR printing) and to
`dlc.compile(..., extra_passes={"graph": ["my-pass"]})`, which runs them at the end of
that level's passes. Loading a plugin runs its code with this process's rights: it is a
capability the user grants by naming the file or installing the package, never something
a compiled program can ask for.

A plugin that fails to import, defines no pass or dialect, or names a pass like a
built-in (or another plugin's) is a `PluginError` whose one line names the file.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from xdsl.ir import Dialect
from xdsl.passes import ModulePass

ENTRY_POINT_GROUPS = ("dlc.passes", "dlc.dialects")


class PluginError(Exception):
    """A plugin could not be loaded: one line, naming its file or entry point."""


@dataclass
class Plugin:
    """What one plugin brings: passes by name and dialects."""

    origin: str
    passes: dict[str, type[ModulePass]] = field(default_factory=dict)
    dialects: list[Dialect] = field(default_factory=list)


DIALECTS: dict[str, tuple[Dialect, str]] = {}
"""Registered plugin dialects: name -> (dialect, the plugin it came from)."""
_LOADED: dict[str, Plugin] = {}
_ENTRY_POINTS_READ: list[bool] = []


def load_plugin(path: str | os.PathLike[str]) -> Plugin:
    """Import the plugin file `path` and register its passes and dialects (once per
    file: loading it again returns what it brought)."""
    origin = os.path.abspath(os.fspath(path))
    if origin in _LOADED:
        return _LOADED[origin]
    if not os.path.isfile(origin):
        raise PluginError(f"plugin {path}: no such file")
    name = "dlc_plugin_" + "".join(c if c.isalnum() else "_" for c in origin)
    spec = importlib.util.spec_from_file_location(name, origin)
    if spec is None or spec.loader is None:
        raise PluginError(f"plugin {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 -- the user's code: reported in one line
        del sys.modules[name]
        raise PluginError(f"plugin {path}: cannot import it: {type(e).__name__}: {e}") from None
    plugin = _collect(module, str(path))
    if not plugin.passes and not plugin.dialects:
        raise PluginError(
            f"plugin {path}: defines no ModulePass subclass with a name, and no Dialect"
        )
    register(plugin)
    _LOADED[origin] = plugin
    return plugin


def _collect(module: ModuleType, origin: str) -> Plugin:
    plugin = Plugin(origin)
    for value in vars(module).values():
        if (
            inspect.isclass(value)
            and issubclass(value, ModulePass)
            and value.__module__ == module.__name__
            and isinstance(getattr(value, "name", None), str)
            and not inspect.isabstract(value)
        ):
            plugin.passes[value.name] = value
        elif isinstance(value, Dialect):
            plugin.dialects.append(value)
    return plugin


def register(plugin: Plugin) -> None:
    """Make `plugin`'s passes and dialects known; a name taken by a built-in pass or
    another plugin is a PluginError (nothing of the plugin is registered then)."""
    from dlc.dialects import get_all_dialects
    from dlc.pipeline import PLUGIN_PASSES, builtin_pass_names

    builtin = builtin_pass_names()
    for name in plugin.passes:
        if name in builtin:
            raise PluginError(f"plugin {plugin.origin}: pass '{name}' clashes with a built-in pass")
        if name in PLUGIN_PASSES and PLUGIN_PASSES[name][0] is not plugin.passes[name]:
            raise PluginError(
                f"plugin {plugin.origin}: pass '{name}' is already defined by "
                f"{PLUGIN_PASSES[name][1]}"
            )
    dialects = get_all_dialects()
    for dialect in plugin.dialects:
        if dialect.name in dialects:
            raise PluginError(
                f"plugin {plugin.origin}: dialect '{dialect.name}' clashes with a built-in dialect"
            )
    for name, cls in plugin.passes.items():
        PLUGIN_PASSES[name] = (cls, plugin.origin)
    for dialect in plugin.dialects:
        DIALECTS[dialect.name] = (dialect, plugin.origin)


def dialect_factory(name: str) -> Callable[[], Dialect]:
    """Registered plugin dialect `name` as a context's factory (dlc-opt's context loads
    it when the input uses it)."""
    dialect = DIALECTS[name][0]
    return lambda: dialect


def load_entry_points() -> None:
    """Register the passes and dialects of installed distributions' entry points
    (groups `dlc.passes` and `dlc.dialects`), once per process."""
    if _ENTRY_POINTS_READ:
        return
    _ENTRY_POINTS_READ.append(True)
    from importlib.metadata import entry_points

    installed = entry_points()  # one read of every distribution's entry points, not one a group
    for group in ENTRY_POINT_GROUPS:
        for ep in installed.select(group=group):
            origin = f"entry point {ep.name} = {ep.value} ({group})"
            try:
                value: Any = ep.load()
            except Exception as e:  # noqa: BLE001 -- the distribution's code
                raise PluginError(
                    f"plugin {origin}: cannot import it: {type(e).__name__}: {e}"
                ) from None
            plugin = _from_entry_point(value, origin)
            if not plugin.passes and not plugin.dialects:
                raise PluginError(
                    f"plugin {origin}: is neither a pass, a module of passes nor a Dialect"
                )
            register(plugin)


def _from_entry_point(value: Any, origin: str) -> Plugin:
    if isinstance(value, ModuleType):
        return _collect(value, origin)
    plugin = Plugin(origin)
    if (
        inspect.isclass(value)
        and issubclass(value, ModulePass)
        and isinstance(getattr(value, "name", None), str)
    ):
        plugin.passes[value.name] = value
    elif isinstance(value, Dialect):
        plugin.dialects.append(value)
    return plugin


def plugin_paths(argv: list[str]) -> list[str]:
    """The values of `--load-pass-plugin PATH` / `--load-pass-plugin=PATH` in `argv`."""
    paths: list[str] = []
    for i, arg in enumerate(argv):
        if arg == "--load-pass-plugin" and i + 1 < len(argv):
            paths.append(argv[i + 1])
        elif arg.startswith("--load-pass-plugin="):
            paths.append(arg.split("=", 1)[1])
    return paths


EXTRA_LEVELS = ("graph", "tensor", "loop")


def check_extra_passes(extra: object) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`dlc.compile`'s `extra_passes` ({level: [pass spec, ...]}) checked: known levels,
    pass names known to dlc or a loaded plugin (installed plugins' entry points are
    read first), options that parse. TypeError / ValueError otherwise."""
    from collections.abc import Mapping

    from dlc.pipeline import get_all_passes, make_pass

    if extra is None:
        return ()
    if not isinstance(extra, Mapping):
        raise TypeError(
            f"extra_passes must be a mapping of level to pass names, got {type(extra).__name__}"
        )
    load_entry_points()
    known = get_all_passes()
    out: list[tuple[str, tuple[str, ...]]] = []
    for level, specs in extra.items():
        if level not in EXTRA_LEVELS:
            raise ValueError(
                f"extra_passes: unknown level {level!r} (one of {', '.join(EXTRA_LEVELS)})"
            )
        if isinstance(specs, str) or not all(isinstance(s, str) for s in specs):
            raise TypeError(f"extra_passes[{level!r}] must be a list of pass names")
        for spec in specs:
            name = spec.split("{", 1)[0].strip()
            if name not in known:
                raise ValueError(
                    f"extra_passes: unknown pass '{name}' (load its plugin first: "
                    "dlc.load_plugin(path), or install it with a dlc.passes entry point)"
                )
            make_pass(spec)  # options that do not parse are a ValueError here
        out.append((level, tuple(specs)))
    return tuple(sorted(out))
