"""lit configuration of dlc's IR tests: `*.dl` and `*.mlir` files with RUN lines.

`dlc-opt`, `dlc-run` and `filecheck` resolve to the tools installed next to the Python
running lit (the venv), so the suite works without activating the venv. Run it with
`lit -v test/lit` (or through pytest: test/unit/test_lit.py).
"""

import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile

import lit.formats

config.name = "dlc"  # noqa: F821 -- `config` is injected by lit
config.test_format = lit.formats.ShTest(execute_external=False)  # noqa: F821
config.suffixes = [".dl", ".mlir"]  # noqa: F821
config.test_source_root = os.path.dirname(os.path.abspath(__file__))  # noqa: F821
config.test_exec_root = config.test_source_root  # noqa: F821
config.excludes = ["Output", "inputs", "lit.cfg.py", "lit.site.cfg.py", "forkserver.py"]  # noqa: F821

_BIN_DIR = os.path.dirname(sys.executable)
_MODULE_FALLBACK = {
    "dlc-opt": "dlc.cli.dlc_opt",
    "dlc-run": "dlc.cli.dlc_run",
    "dlc-prove": "dlc.cli.dlc_prove",
    "filecheck": "filecheck",
}


def _tool(name: str) -> str:
    """The tool next to lit's Python, else on PATH, else `python -m module`."""
    local = os.path.join(_BIN_DIR, name)
    if os.path.isfile(local) and os.access(local, os.X_OK):
        return local
    found = shutil.which(name)
    if found:
        return found
    return f'"{sys.executable}" -m {_MODULE_FALLBACK[name]}'


# With DLC_LIT_FORKSERVER=1 (test/unit/test_lit.py) these tools' RUN lines are processes
# forked from a server that has imported the tool (forkserver.py), not new interpreters.
# Each tool's console-script function, then what every run of it imports anyway (dlc-opt:
# its pass and plugin registries and, for `.dl` input, the parser and its tables).
_SERVED = {
    "dlc-opt": ["dlc.cli.dlc_opt:main", "dlc.pipeline", "dlc.plugins", "dlc.parser:prepare"],
    "filecheck": ["filecheck.main:main"],
}
_FORKSERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "forkserver.py")


def _stop_servers(servers: list[subprocess.Popen[bytes]], directory: str) -> None:
    for server in servers:
        server.stdin.close()  # the server's signal to stop
    for server in servers:
        server.wait()
    shutil.rmtree(directory, ignore_errors=True)


def _start_servers(env: dict[str, str]) -> dict[str, str]:
    """Tool -> the command that runs it through its fork server (started here, each
    stopped when lit exits and closes its standard input)."""
    directory = tempfile.mkdtemp(prefix="dlc-lit-")
    started = {}
    for name, entries in _SERVED.items():
        tool = os.path.join(_BIN_DIR, name)
        path = os.path.join(directory, name)
        argv = [sys.executable, _FORKSERVER, "--serve", path, tool, *entries]
        started[name] = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
    atexit.register(_stop_servers, list(started.values()), directory)
    for name, server in started.items():
        if server.stdout.readline() != b"ready\n":
            raise RuntimeError(f"lit.cfg.py: the fork server of {name} did not start")
    return {
        name: f'"{sys.executable}" -S -E "{_FORKSERVER}" "{os.path.join(directory, name)}"'
        for name in _SERVED
    }


config.environment["PATH"] = os.pathsep.join([_BIN_DIR, os.environ.get("PATH", "")])  # noqa: F821
# A checkout run with PYTHONPATH=<checkout> (beside an installed dlc) tests that checkout.
if "PYTHONPATH" in os.environ:
    config.environment["PYTHONPATH"] = os.environ["PYTHONPATH"]  # noqa: F821

# The compile cache (dlc/runtime/cache.py): an explicit DLC_CACHE / DLC_CACHE_DIR passes
# through; otherwise it is off, so lit never writes into the user's ~/.cache.
for _var in ("DLC_CACHE", "DLC_CACHE_DIR"):
    if _var in os.environ:
        config.environment[_var] = os.environ[_var]  # noqa: F821
if "DLC_CACHE_DIR" not in os.environ:
    config.environment["DLC_CACHE"] = "0"  # noqa: F821

# The servers import their tool in the environment the RUN lines get.
_served = {}
if os.environ.get("DLC_LIT_FORKSERVER") == "1":
    _served = _start_servers(dict(config.environment))  # noqa: F821

for _name in _MODULE_FALLBACK:
    # Only whole words: a path such as test/lit/cli/dlc-opt-targets.dl must stay as it is.
    _pattern = r"(?<![-\w/.])" + re.escape(_name) + r"(?![-\w])"
    config.substitutions.append((_pattern, _served.get(_name) or _tool(_name)))  # noqa: F821

# %python: the Python running lit (its venv has onnx for the ONNX tests' model builders)
config.substitutions.append(("%python", f'"{sys.executable}"'))  # noqa: F821
