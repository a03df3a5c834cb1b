"""MkDocs hooks (mkdocs.yml `hooks:`): add the generated reference pages
(`tools/gen_docs.py`) and the repository's CONTRIBUTING, CHANGELOG and BENCHMARKS
documents to the site, so each has one source; render docstrings' doctest examples
(`>>>` blocks) as code."""

from __future__ import annotations

import sys
from pathlib import Path

from markdown import Extension, Markdown
from markdown.preprocessors import Preprocessor
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))

import gen_docs  # noqa: E402 -- after the path set-up

ROOT_DOCUMENTS = {
    "contributing.md": "CONTRIBUTING.md",
    "changelog.md": "CHANGELOG.md",
    "benchmarks.md": "BENCHMARKS.md",
}
"""Page under docs/ -> document at the repository's root it shows."""


class DoctestFences(Preprocessor):
    """A doctest block (a `>>>` line, the lines after it up to a blank line) outside a
    fenced block becomes a fenced Python block; Markdown would read `>>>` as quotes."""

    def run(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        fenced = doctest = False
        for line in lines:
            if line.lstrip().startswith("```"):
                fenced = not fenced
            elif not fenced and not doctest and line.lstrip().startswith(">>>"):
                doctest = True
                out += ["", "```python"]
            elif doctest and not line.strip():
                doctest = False
                out.append("```")
            out.append(line)
        return out + (["```"] if doctest else [])


class DoctestExtension(Extension):
    def extendMarkdown(self, md: Markdown) -> None:  # noqa: N802 -- Markdown's API
        md.preprocessors.register(DoctestFences(md), "doctest_fences", 30)


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    config.markdown_extensions.append(DoctestExtension())
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    pages = gen_docs.pages()
    for page, document in ROOT_DOCUMENTS.items():
        # Links written for the repository's root (docs/x.md) point into the site (x.md).
        pages[page] = (ROOT / document).read_text().replace("](docs/", "](")
    for path, text in pages.items():
        files.append(File.generated(config, path, content=text))
    return files
