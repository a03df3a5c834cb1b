"""The layout of `test/unit` (test/unit/README.md): its directories mirror dlc's
packages. A test in `test/unit/<path>/` imports from `dlc.<path>` (the package it tests,
directly or in a subpackage); a test at the top imports from dlc's top level (the public
API, the driver modules) or from more than one package, or is one of the repository-wide
checks. A test whose dlc imports all lie in one package belongs in that package's
directory.
"""

from __future__ import annotations

import ast
from pathlib import Path

UNIT = Path(__file__).resolve().parent
ROOT = UNIT.parents[1]

# Checks of the repository as a whole, at the top whatever they import.
REPO_WIDE = {
    "test_budgets.py",
    "test_docs.py",
    "test_documents.py",
    "test_imports.py",
    "test_layout.py",
    "test_lint.py",
    "test_lit.py",
    "test_readme.py",
    "test_typing.py",
    "test_unit_layout.py",
}


def _dlc_imports(source: str) -> set[str]:
    """The dlc modules a source imports (top level and inside functions); `from dlc
    import x` counts as `dlc.x` when x is a module, else as `dlc`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "dlc"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "dlc":
                found |= {_module_or_package(f"dlc.{a.name}") for a in node.names}
            elif node.module.split(".")[0] == "dlc":
                found.add(node.module)
    return found


def _module_or_package(name: str) -> str:
    path = ROOT.joinpath(*name.split("."))
    return name if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file() else "dlc"


def _package(module: str) -> str:
    """The package directory of a dlc module, relative to dlc/ ("" for the top level)."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if (ROOT.joinpath(*parts[:n]) / "__init__.py").is_file():
            return "/".join(parts[1:n])
    return ""


def _home(source: str) -> str | None:
    """The one package all the dlc imports of a test lie in, None when they span the top
    level or several packages (or there are none)."""
    packages = {_package(m) for m in _dlc_imports(source)}
    if not packages or "" in packages:
        return None
    split = [p.split("/") for p in packages]
    common = []
    for parts in zip(*split, strict=False):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return "/".join(common) or None


def _tests() -> list[Path]:
    return sorted(UNIT.rglob("test_*.py"))


def test_directories_mirror_dlc_packages() -> None:
    for directory in sorted({t.parent for t in _tests()} - {UNIT}):
        rel = directory.relative_to(UNIT)
        assert (ROOT / "dlc" / rel / "__init__.py").is_file(), f"test/unit/{rel}: no dlc/{rel}"


def test_a_test_in_a_package_directory_imports_that_package() -> None:
    wrong = []
    for test in _tests():
        rel = test.parent.relative_to(UNIT)
        if rel == Path("."):
            continue
        package = "dlc." + ".".join(rel.parts)
        imports = _dlc_imports(test.read_text())
        if not any(m == package or m.startswith(package + ".") for m in imports):
            wrong.append(f"{test.relative_to(UNIT)} imports nothing from {package}")
    assert not wrong, "\n".join(wrong)


def test_a_test_of_one_package_lives_in_its_directory() -> None:
    misplaced = []
    for test in _tests():
        rel = test.parent.relative_to(UNIT)
        home = _home(test.read_text())
        if home is None or (rel == Path(".") and test.name in REPO_WIDE):
            continue
        if not ("/".join(rel.parts) + "/").startswith(home + "/"):
            misplaced.append(f"{test.relative_to(UNIT)} tests only dlc/{home}: move it there")
    assert not misplaced, "\n".join(misplaced)


def test_test_file_names_are_unique() -> None:
    # pytest imports test modules by file name (rootdir-relative "prepend" import mode)
    names = [t.name for t in _tests()]
    assert len(names) == len(set(names))


def test_the_layout_checks_see_imports() -> None:
    source = (
        "import dlc\nfrom dlc.onnx import load\n\ndef f():\n    from dlc.passes.graph import cse\n"
    )
    assert _dlc_imports(source) == {"dlc", "dlc.onnx", "dlc.passes.graph"}
    assert _home("from dlc.passes.graph import cse\nfrom dlc.passes.tensor import x\n") == "passes"
    assert _home("import dlc\nfrom dlc.onnx import load\n") is None
    assert _home("from dlc.onnx.importer import OnnxImportError\n") == "onnx"
