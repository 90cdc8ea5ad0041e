"""docs/writing.md and the README's example run, in order, as written."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _run_blocks(path: pathlib.Path) -> int:
    namespace: dict = {}
    blocks = BLOCK.findall(path.read_text())
    for number, block in enumerate(blocks, start=1):
        try:
            exec(compile(block, f"{path.name} block {number}", "exec"), namespace)
        except Exception as exc:  # name the block that broke
            raise AssertionError(f"{path.name} python block {number} failed: {exc!r}") from exc
    return len(blocks)


def test_writing_page_runs(tmp_path, monkeypatch):
    pytest.importorskip("rasterio")
    pytest.importorskip("pyarrow")
    monkeypatch.chdir(tmp_path)
    assert _run_blocks(ROOT / "docs" / "writing.md") >= 6


def test_readme_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _run_blocks(ROOT / "README.md") == 1
