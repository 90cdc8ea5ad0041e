"""`rumi header`: the blob rebuilt from the IFD, beside the file or where -o says; none for a broken file."""

from __future__ import annotations

from _rumi_bytes import put, save
from cli_runs import run


def test_header_default_and_output(capsys, written, tmp_path):
    path, blob, _ = written
    status, out, _ = run(capsys, "header", path)
    assert status == 0
    assert (path.parent / (path.name + ".header")).read_bytes() == blob
    assert f"{len(blob)} bytes" in out
    target = tmp_path / "elsewhere.bin"
    assert run(capsys, "header", path, "-o", target)[0] == 0
    assert target.read_bytes() == blob


def test_header_of_a_broken_file(capsys, written):
    path, _, data = written
    broken = save(path.parent, put(data, 8, "<Q", 24), "moved.rumi")
    status, _, err = run(capsys, "header", broken)
    assert status == 1 and "placement.ifd" in err
    assert not (path.parent / "moved.rumi.header").exists()
