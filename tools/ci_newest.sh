#!/usr/bin/env bash
# The drift job: installs dlc with its test extra into a new virtual environment, taking
# the newest version of every dependency that pyproject.toml's bounds allow (no
# constraints file), prints what it got and runs the whole suite. CI runs the pinned
# versions (requirements/ci.txt) on every submission; run this one on a schedule
# (weekly) or before raising an upper bound: a failure here is the next release of a
# dependency breaking dlc, found before a user finds it.
#
#   bash tools/ci_newest.sh            # venv in .venv-newest, removed first
#   VENV=/tmp/v bash tools/ci_newest.sh
#
# To try a release beyond an upper bound, raise the bound in pyproject.toml first; when
# the suite passes, regenerate requirements/ci.txt from that venv (its header says how).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv-newest}"

rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
export PIP_DISABLE_PIP_VERSION_CHECK=1
pip install --upgrade pip
pip install --upgrade --upgrade-strategy eager '.[test]'
echo "ci_newest: resolved versions:"
pip freeze --exclude dlc
pytest -rs
