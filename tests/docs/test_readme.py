"""The README runs as written: its commands in order in a fresh directory, its Python example without rioxarray."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from doc_blocks import ROOT, python_blocks

from xarray_rumi.cli import _EXTRAS

#: The steps of a set-up command that make the environment the test suite already runs in.
SETUP = ["python3 -m venv .venv", ". .venv/bin/activate", "pip install -U pip"]
#: The README's two set-up commands, after SETUP: the plain install and the demo, the tests' install and run.
SETUPS = [["pip install .", "rumi demo"], ['pip install ".[test]" -c ci/constraints.txt', "python -m pytest"]]
_BLOCK = re.compile(r"^```(bash|python)\n(.*?)^```", re.S | re.M)

#: Runs the example in a fresh interpreter where the ``geo`` extra's modules cannot be imported.
WITHOUT_GEO = """
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("rioxarray", "rasterio"):
            raise ImportError(f"{name} is not installed (the geo extra)")
sys.meta_path.insert(0, Refuse())
exec(compile(sys.stdin.read(), "README.md", "exec"), {})
"""


def test_readme_example_runs_without_the_geo_extra(tmp_path):
    (block,) = python_blocks("README.md")
    script = block + "\nprint('the example ran')\nimport rioxarray\n"   # the last line proves the refusal works
    done = subprocess.run([sys.executable, "-c", WITHOUT_GEO], input=script, text=True, capture_output=True,
                          cwd=tmp_path, timeout=300)
    assert done.stdout.strip().endswith("the example ran"), done.stderr
    assert done.returncode != 0 and "rioxarray is not installed (the geo extra)" in done.stderr, done.stderr


def readme_blocks() -> list[tuple[str, str]]:
    """The README's ```bash and ```python blocks, in order, as ``(language, text)``."""
    return _BLOCK.findall((ROOT / "README.md").read_text())


def commands(block: str) -> list[str]:
    """A bash block's commands, one a line, without their comments."""
    return [line.partition(" #")[0].strip() for line in block.splitlines() if line.strip()]


def test_the_readme_has_exactly_two_set_up_commands():
    installs = [line for language, block in readme_blocks() if language == "bash" for line in block.splitlines()
                if "pip install" in line]
    assert [line.split(" && ") for line in installs] == [SETUP + steps for steps in SETUPS]


def test_commands_that_need_an_extra_say_which():
    for language, block in readme_blocks():
        for line in block.splitlines() if language == "bash" else []:
            words = line.split()
            if words[:1] == ["rumi"] and words[1] in _EXTRAS:
                assert f"the {_EXTRAS[words[1]]} extra" in line, line


def test_the_readme_runs_in_order_as_written(tmp_path):
    """Every block, in order, in one fresh directory: a newcomer's session after the set-up commands.

    The set-up steps that make the environment (venv, pip) are the suite's own, and the suite does not run
    itself; everything else runs as written. ``in.tif`` stands for the reader's own GeoTIFF.
    """
    tifffile = pytest.importorskip("tifffile")
    tifffile.imwrite(tmp_path / "in.tif", np.arange(64 * 64, dtype=np.uint16).reshape(64, 64))
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    ran = []
    for language, block in readme_blocks():
        if language == "python":
            done = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, env=env, capture_output=True,
                                  text=True, timeout=300)
            assert done.returncode == 0, f"README python block: {done.stderr}"
            continue
        for line in commands(block):
            steps = line.split(" && ")
            if steps[:len(SETUP)] == SETUP:
                steps = steps[len(SETUP) + 1:]  # the venv and the install are this environment
                if steps == SETUPS[1][1:]:
                    continue  # the test suite, running now
            for step in steps:
                done = subprocess.run(shlex.split(step), cwd=tmp_path, env=env, capture_output=True, text=True,
                                      timeout=300)
                assert done.returncode == 0, f"README: {step}: {done.stderr}"
                assert "Traceback" not in done.stderr, done.stderr
                ran.append(step)
    assert ran[:2] == ["rumi demo", "rumi quicklook demo.rumi -o quicklook.png --bands 3,2,1 --size 384"]
    assert {"demo.rumi", "demo.rumi.header", "quicklook.png", "scene.rumi", "out.rumi", "scene.refs.json",
            "scene.item.json", "scene.png"} <= {p.name for p in tmp_path.iterdir()}
