"""docs/cookbook.md runs: every ```python block, in order, in one namespace.

``base_url`` is a Range HTTP server for the working directory on 127.0.0.1,
so the Items' assets are URLs and the Cube reads its pixels over HTTP.
"""

from __future__ import annotations

import pytest
from doc_blocks import python_blocks, run_blocks

PAGE = "docs/cookbook.md"


def test_doc_blocks_exist():
    blocks = python_blocks(PAGE)
    assert len(blocks) >= 5
    text = "\n".join(blocks)
    for needed in ("xarray_rumi.write", "xarray_rumi.stac.item", "open_cube(", ".median(", "quicklook"):
        assert needed in text, needed


def test_cookbook_runs(tmp_path, monkeypatch, http_server):
    pytest.importorskip("pystac")
    monkeypatch.chdir(tmp_path)  # the HTTP server serves tmp_path: files written here are online

    def before(block):
        if "open_cube" in block:
            http_server.requests.clear()

    def after(block):
        if "open_cube" in block:
            assert http_server.requests == [], "opening the Cube from the Items read something"

    run_blocks(PAGE, {"base_url": http_server.url}, before_each=before, after_each=after)
    assert http_server.get_requests()  # the pixels came over HTTP
    for name in ("median.png", "last.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
