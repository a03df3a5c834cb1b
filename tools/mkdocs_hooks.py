"""MkDocs hooks (mkdocs.yml `hooks:`): add the generated reference pages
(`tools/gen_docs.py`) and the repository's CONTRIBUTING, CHANGELOG and BENCHMARKS
documents to the site, so each has one source."""

from __future__ import annotations

import sys
from pathlib import Path

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


def on_files(files: Files, config: MkDocsConfig) -> Files:
    pages = gen_docs.pages()
    for page, document in ROOT_DOCUMENTS.items():
        # Links written for the repository's root (docs/x.md) point into the site (x.md).
        pages[page] = (ROOT / document).read_text().replace("](docs/", "](")
    for path, text in pages.items():
        files.append(File.generated(config, path, content=text))
    return files
