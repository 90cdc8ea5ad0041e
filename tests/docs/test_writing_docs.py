"""docs/writing.md and the README's example run, in order, as written."""

from __future__ import annotations

import pytest
from doc_blocks import run_blocks


def test_writing_page_runs(tmp_path, monkeypatch):
    pytest.importorskip("rasterio")
    pytest.importorskip("pyarrow")
    monkeypatch.chdir(tmp_path)
    assert run_blocks("docs/writing.md") >= 6


def test_readme_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_blocks("README.md") == 1
