"""docs/cookbook.md runs: every ```python block, in order, in one namespace.

``base_url`` is a Range HTTP server for the working directory on 127.0.0.1,
so the Items' assets are URLs and the Cube reads its pixels over HTTP.
"""

from __future__ import annotations

import pathlib
import re

import pytest

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "cookbook.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_doc_blocks_exist():
    blocks = BLOCK.findall(DOC.read_text())
    assert len(blocks) >= 5
    text = "\n".join(blocks)
    for needed in ("xarray_rumi.write", "xarray_rumi.stac.item", "open_cube(", ".median(", "quicklook"):
        assert needed in text, needed


def test_cookbook_runs(tmp_path, monkeypatch, http_server):
    pytest.importorskip("pystac")
    monkeypatch.chdir(tmp_path)  # the HTTP server serves tmp_path: files written here are online
    namespace = {"base_url": http_server.url}
    blocks = BLOCK.findall(DOC.read_text())
    for number, block in enumerate(blocks, start=1):
        if "open_cube" in block:
            http_server.requests.clear()
        try:
            exec(compile(block, f"{DOC.name} block {number}", "exec"), namespace)
        except Exception as exc:  # name the block that broke
            raise AssertionError(f"docs/cookbook.md python block {number} failed: {exc!r}") from exc
        if "open_cube" in block:
            assert http_server.requests == [], "opening the Cube from the Items read something"
    assert http_server.get_requests()  # the pixels came over HTTP
    for name in ("median.png", "last.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
