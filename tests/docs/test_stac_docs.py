"""docs/stac.md runs: every ```python block, in order, in one namespace."""

from __future__ import annotations

import pathlib
import re

import pytest

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "stac.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_stac_page_examples_run(tmp_path, monkeypatch):
    pytest.importorskip("pystac")
    pytest.importorskip("stac_geoparquet")
    monkeypatch.chdir(tmp_path)
    blocks = BLOCK.findall(DOC.read_text())
    assert len(blocks) >= 2
    namespace = {}
    for number, block in enumerate(blocks, start=1):
        try:
            exec(compile(block, f"{DOC.name} block {number}", "exec"), namespace)
        except Exception as exc:  # name the block that broke
            raise AssertionError(f"docs/stac.md python block {number} failed: {exc!r}") from exc
