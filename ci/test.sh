#!/usr/bin/env bash
# Install the project from its own files into a fresh virtual environment and run
# the README's test command. Used by .ci/run; runnable by hand from the repo root.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${RUMI_CI_VENV:-$(mktemp -d)/venv}"
python3 -m venv "$venv"
# shellcheck disable=SC1091
. "$venv/bin/activate"
python -m pip install --quiet --upgrade pip
# Pinned versions (ci/constraints.txt) so a release on PyPI cannot break a landing.
python -m pip install --quiet ".[test]" --constraint ci/constraints.txt

# The README's test command, after its install step:
python -m pytest
