"""docs/stac.md runs: every ```python block, in order, in one namespace."""

from __future__ import annotations

import pytest
from doc_blocks import run_blocks


def test_stac_page_examples_run(tmp_path, monkeypatch):
    pytest.importorskip("pystac")
    pytest.importorskip("stac_geoparquet")
    monkeypatch.chdir(tmp_path)
    assert run_blocks("docs/stac.md") >= 2
