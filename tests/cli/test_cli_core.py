"""The rumi command's core: info, validate and header."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from _rumi_bytes import make, put, ramp, save

from xarray_rumi.cli import main


@pytest.fixture
def written(tmp_path):
    return make(tmp_path, ramp((3, 40, 50)), tile_size=16, crs=32618, transform=(30, 0, 500000, 0, -30, 4000000))


def run(capsys, *argv) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return status, out, err


def test_info(capsys, written):
    path, blob, data = written
    status, out, _ = run(capsys, "info", path)
    assert status == 0
    for expected in ("3 bands x 40 rows x 50 columns", "uint16 (sample_format 1, 16 bits)", "frame unit   tile",
                     "4 x 3 of 16 x 16 px, 36 frames", "EPSG:32618 (projected), pixel is area",
                     "30, 0, 500000, 0, -30, 4000000", f"{len(data)} bytes for {3 * 40 * 50 * 2} raw",
                     f"blob {len(blob)} bytes"):
        assert expected in out, expected
    header_path = save(written[0].parent, blob, "f.header")
    status, with_blob, _ = run(capsys, "info", path, "--header", header_path)
    assert status == 0 and with_blob == out


def test_info_without_georeferencing(capsys, tmp_path):
    path, _, _ = make(tmp_path, ramp((1, 8, 8), "float32"), tile_size=8, frame_unit="cell")
    status, out, _ = run(capsys, "info", path)
    assert status == 0 and "crs          none" in out and "float32" in out


def test_info_on_a_broken_file(capsys, written):
    path, _, data = written
    status, _, err = run(capsys, "info", save(path.parent, data[:200], "short.rumi"))
    assert status == 1 and "file-profile.truncated" in err


def test_validate_ok(capsys, written):
    path, blob, _ = written
    status, out, _ = run(capsys, "validate", path)
    assert status == 0 and "valid rumi 0.1.0" in out
    header_path = save(path.parent, blob, "f.header")
    assert run(capsys, "validate", path, "--header", header_path)[0] == 0


def test_validate_names_the_rule(capsys, written):
    path, blob, data = written
    broken = save(path.parent, data + b"\0", "trailing.rumi")
    status, out, _ = run(capsys, "validate", broken)
    assert status == 1 and "frames.trailing-bytes" in out
    big_endian = save(path.parent, b"MM" + data[2:], "mm.rumi")
    status, out, _ = run(capsys, "validate", big_endian)
    assert status == 1 and "file-profile.little-endian" in out
    bad_blob = save(path.parent, put(blob, 0, "<I", 0), "bad.header")
    status, out, _ = run(capsys, "validate", path, "--header", bad_blob)
    assert status == 1 and "blob.magic" in out


def test_validate_missing_file(capsys, tmp_path):
    status, out, _ = run(capsys, "validate", tmp_path / "absent.rumi")
    assert status == 1 and "cannot read" in out


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


def test_installed_command(written):
    path, _, data = written
    rumi = shutil.which("rumi") or str(__import__("pathlib").Path(sys.executable).with_name("rumi"))
    ok = subprocess.run([rumi, "validate", str(path)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "valid rumi 0.1.0" in ok.stdout
    broken = save(path.parent, data[:-3], "cut.rumi")
    bad = subprocess.run([rumi, "validate", str(broken)], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "frames.truncated" in bad.stdout and "Traceback" not in bad.stderr
