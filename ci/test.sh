#!/usr/bin/env bash
# Install the project from its own files into fresh virtual environments and run
# the README's test command twice: on Python 3.11 with the pinned versions
# (ci/constraints.txt: what the README's command installs), and on Python 3.13
# with the newest releases pip resolves, so a release of zarr, VirtualiZarr,
# Icechunk or xarray that breaks us is seen the day it lands.
# Used by .ci/run; runnable by hand from the repo root.
set -euo pipefail
cd "$(dirname "$0")/.."

# The newest installed Python of a minor version: pyenv's where it has one, else on PATH.
python_for() {
    local minor="$1" version
    if command -v pyenv >/dev/null 2>&1; then
        version="$(pyenv versions --bare | grep -E "^${minor//./\\.}\.[0-9]+$" | sort -t. -k3 -n | tail -1 || true)"
        if [ -n "$version" ]; then
            PYENV_VERSION="$version" pyenv which "python$minor"
            return
        fi
    fi
    command -v "python$minor" || { echo "ci/test.sh: no Python $minor on this machine" >&2; return 1; }
}

# run_suite NAME PYTHON [pip install arguments...]
run_suite() {
    local name="$1" python="$2"
    shift 2
    local venv
    venv="${RUMI_CI_VENV:-$(mktemp -d)}/$name"
    echo "== $name: $("$python" --version) =="
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet ".[test]" "$@"
    # The README's test command, after its install step:
    "$venv/bin/python" -m pytest
}

run_suite pinned "$(python_for 3.11)" --constraint ci/constraints.txt
run_suite newest "$(python_for 3.13)"
