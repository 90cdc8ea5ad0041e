"""`rumi validate`: the verdict on standard output, the rule named, exit 1 for an invalid file."""

from __future__ import annotations

import shutil
import subprocess
import sys

from _rumi_bytes import put, save
from cli_runs import run


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


def test_installed_command(written):
    path, _, data = written
    rumi = shutil.which("rumi") or str(__import__("pathlib").Path(sys.executable).with_name("rumi"))
    ok = subprocess.run([rumi, "validate", str(path)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "valid rumi 0.1.0" in ok.stdout
    broken = save(path.parent, data[:-3], "cut.rumi")
    bad = subprocess.run([rumi, "validate", str(broken)], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "frames.truncated" in bad.stdout and "Traceback" not in bad.stderr


def test_a_damaged_frame_is_named_once(capsys, written):
    path, _, data = written
    from _rumi_bytes import tile_offsets

    at = int(tile_offsets(data)[1])
    damaged = save(path.parent, put(data, at, "<B", 0x28), "damaged.rumi")
    status, out, _ = run(capsys, "validate", damaged)
    assert status == 1
    assert out.startswith(f"rumi validate: frame.openzl: frame 1 of {damaged}: the frame does not start with an OpenZL")
    assert out.count("frame 1") == 1
