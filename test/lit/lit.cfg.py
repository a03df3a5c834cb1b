"""lit configuration of dlc's IR tests: `*.dl` and `*.mlir` files with RUN lines.

`dlc-opt`, `dlc-run` and `filecheck` resolve to the tools installed next to the Python
running lit (the venv), so the suite works without activating the venv. Run it with
`lit -v test/lit` (or through pytest: test/unit/test_lit.py).
"""

import os
import re
import shutil
import sys

import lit.formats

config.name = "dlc"  # noqa: F821 -- `config` is injected by lit
config.test_format = lit.formats.ShTest(execute_external=False)  # noqa: F821
config.suffixes = [".dl", ".mlir"]  # noqa: F821
config.test_source_root = os.path.dirname(os.path.abspath(__file__))  # noqa: F821
config.test_exec_root = config.test_source_root  # noqa: F821
config.excludes = ["Output", "inputs", "lit.cfg.py", "lit.site.cfg.py"]  # noqa: F821

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


for _name in _MODULE_FALLBACK:
    # Only whole words: a path such as test/lit/cli/dlc-opt-targets.dl must stay as it is.
    _pattern = r"(?<![-\w/.])" + re.escape(_name) + r"(?![-\w])"
    config.substitutions.append((_pattern, _tool(_name)))  # noqa: F821

# %python: the Python running lit (its venv has onnx for the ONNX tests' model builders)
config.substitutions.append(("%python", f'"{sys.executable}"'))  # noqa: F821

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
