"""The rumi command on a file cut short: one line naming ``frames.truncated``, exit 1, nothing written.

Every command that reads the file's IFD or checks its blob (``info``,
``stac``, ``refs``, ``header``, with or without a blob) refuses it; none
reports the size the blob claims for a file that is not that size.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from cli_runs import run

import xarray_rumi

VALUES = np.random.default_rng(2).integers(0, 4000, (2, 40, 48), dtype=np.uint16)


@pytest.fixture
def written(tmp_path):
    """``(path, blob path, size)`` of a file written with its blob beside it."""
    path = tmp_path / "scene.rumi"
    xarray_rumi.write(path, VALUES, tile_size=16, crs=32618, transform=(30, 0, 500000, 0, -30, 4000000))
    return path, tmp_path / "scene.rumi.header", os.path.getsize(path)


@pytest.fixture
def halved(written):
    """The file cut to half its length after its blob was made (the blob stays beside it)."""
    path, blob_path, size = written
    os.truncate(path, size // 2)
    return path, blob_path, size


def _one_line_naming_truncation(status: int, err: str) -> None:
    assert status == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "frames.truncated" in lines[0] and "Traceback" not in err, err


@pytest.mark.parametrize("argv", [
    ["info"], ["info", "--json"], ["header"], ["stac"],
], ids=["info", "info-json", "header", "stac"])
def test_a_command_that_reads_the_ifd_refuses_a_truncated_file(capsys, halved, argv):
    if argv == ["stac"]:
        pytest.importorskip("pystac")
    path, _, _ = halved
    status, out, err = run(capsys, *argv, path)
    _one_line_naming_truncation(status, err)
    assert out == ""   # no size, no Item printed


def test_rumi_header_writes_no_blob_for_a_truncated_file(capsys, halved, tmp_path):
    path, _, _ = halved
    output = tmp_path / "rebuilt.header"
    status, _, err = run(capsys, "header", path, "-o", output)
    _one_line_naming_truncation(status, err)
    assert not output.exists()


@pytest.mark.parametrize("blob_beside", [True, False], ids=["blob-beside", "no-blob"])
def test_rumi_refs_refuses_a_truncated_file_and_writes_no_references(capsys, halved, blob_beside):
    pytest.importorskip("numcodecs")
    path, blob_path, _ = halved
    if not blob_beside:
        blob_path.unlink()
    status, _, err = run(capsys, "refs", path)
    _one_line_naming_truncation(status, err)
    assert not os.path.exists(f"{path}.json")


def test_rumi_info_with_the_blob_refuses_a_truncated_file(capsys, halved):
    path, blob_path, _ = halved
    status, out, err = run(capsys, "info", path, "--header", blob_path)
    _one_line_naming_truncation(status, err)
    assert out == ""


def test_rumi_stac_with_several_files_names_the_truncated_one(capsys, halved, tmp_path):
    pytest.importorskip("pystac")
    path, _, _ = halved
    whole = tmp_path / "whole.rumi"
    xarray_rumi.write(whole, VALUES, tile_size=16, crs=32618, transform=(30, 0, 500000, 0, -30, 4000000))
    status, _, err = run(capsys, "stac", whole, path)
    _one_line_naming_truncation(status, err)
    assert str(path) in err and str(whole) not in err


@pytest.mark.parametrize("with_blob", [False, True], ids=["ifd", "blob"])
def test_rumi_info_reports_the_files_own_size(capsys, written, with_blob):
    """A file longer than its frames (trailing bytes, which validate refuses) opens: info says its real size."""
    path, blob_path, size = written
    with open(path, "ab") as f:
        f.write(b"\0" * 5)
    blob = ["--header", blob_path] if with_blob else []
    status, out, _ = run(capsys, "info", path, *blob)
    assert status == 0 and f"size         {size + 5} bytes for" in out
    status, out, _ = run(capsys, "info", "--json", path, *blob)
    assert status == 0 and json.loads(out)["file_size"] == size + 5
