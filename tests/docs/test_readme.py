"""The README's Python example runs after a plain install: without rioxarray."""

from __future__ import annotations

import subprocess
import sys

from doc_blocks import python_blocks

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
