"""The examples of docs/virtual-zarr.md run, in order, as written."""

from __future__ import annotations

import pathlib
import re

import pytest

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "virtual-zarr.md"


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_virtual_zarr_page_examples_run(tmp_path, monkeypatch, capsys):
    pytest.importorskip("virtualizarr")
    pytest.importorskip("icechunk")
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 6
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for number, block in enumerate(blocks, 1):
        exec(compile(block, f"{DOC.name} block {number}", "exec"), namespace)
    printed = capsys.readouterr().out.split()
    assert "openzl" in printed and "ManifestArray" in printed
