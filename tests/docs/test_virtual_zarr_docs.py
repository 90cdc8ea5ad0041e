"""The examples of docs/virtual-zarr.md run, in order, as written."""

from __future__ import annotations

import pytest
from doc_blocks import run_blocks


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_virtual_zarr_page_examples_run(tmp_path, monkeypatch, capsys):
    pytest.importorskip("virtualizarr")
    pytest.importorskip("icechunk")
    monkeypatch.chdir(tmp_path)
    assert run_blocks("docs/virtual-zarr.md") >= 6
    printed = capsys.readouterr().out.split()
    assert "openzl" in printed and "ManifestArray" in printed
