"""Writes that fail: a full file system, a read-only one, permission denied, a missing directory.

Each ends in a clear OSError and leaves nothing at the target: no partial
file, no header, no temporary (an existing file at the target is kept).  The
writer stages into an anonymous ``O_TMPFILE`` in the target's directory and
renames it into place only when complete, so a full disk is met while
staging, before anything has a name.

The small file systems are tmpfs mounts made here (root is needed; skipped,
saying so, without it).  Root bypasses permission bits, so "permission
denied" is shown from a child process running as ``nobody``.  A process
killed mid-write is covered by ``test_write_scale.py``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import xarray_rumi

# Incompressible: ~2 MiB of frames whatever the recipe.
NOISE = np.random.default_rng(9).integers(0, 65535, (1, 1024, 1024), dtype=np.uint16)


@contextlib.contextmanager
def tmpfs(directory, options: str):
    directory.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)],
                              capture_output=True, text=True)
    except FileNotFoundError:
        pytest.skip("no mount command: cannot make a small file system")
    if done.returncode:
        pytest.skip(f"mounting a tmpfs is not permitted here ({done.stderr.strip()})")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=True)


def _used_blocks(directory) -> int:
    stat = os.statvfs(directory)
    return stat.f_blocks - stat.f_bfree


def test_a_full_file_system_is_an_oserror_and_leaves_nothing(tmp_path):
    with tmpfs(tmp_path / "small", "size=1m") as small:
        before = _used_blocks(small)
        with pytest.raises(OSError) as info:
            xarray_rumi.write(small / "scene.rumi", NOISE, tile_size=256)
        assert info.value.errno == errno.ENOSPC
        assert os.listdir(small) == []
        assert _used_blocks(small) == before  # the anonymous staging file was freed, not leaked


def test_a_full_file_system_keeps_the_old_file(tmp_path):
    with tmpfs(tmp_path / "small", "size=1m") as small:
        old = small / "scene.rumi"
        old.write_bytes(b"the previous version")
        with pytest.raises(OSError, match="No space left"):
            xarray_rumi.write(old, NOISE, tile_size=256)
        assert os.listdir(small) == ["scene.rumi"]
        assert old.read_bytes() == b"the previous version"


def test_a_read_only_file_system_is_an_oserror_and_leaves_nothing(tmp_path):
    with tmpfs(tmp_path / "ro", "ro,size=1m") as read_only:
        with pytest.raises(OSError) as info:
            xarray_rumi.write(read_only / "scene.rumi", NOISE[:, :64, :64], tile_size=32)
        assert info.value.errno == errno.EROFS
        assert os.listdir(read_only) == []


AS_NOBODY = textwrap.dedent("""
    import os, shutil, sys, tempfile
    import numpy as np
    import xarray_rumi
    # One write as root first: every module it needs is loaded while the interpreter's files are readable.
    warm = tempfile.mkdtemp()
    xarray_rumi.write(os.path.join(warm, "w.rumi"), np.zeros((1, 64, 64), "uint8"), tile_size=32)
    shutil.rmtree(warm)
    os.setgid(65534); os.setuid(65534)
    try:
        xarray_rumi.write(sys.argv[1], np.zeros((1, 64, 64), "uint8"), tile_size=32)
    except PermissionError as exc:
        print("PermissionError", exc.filename)
""")


def test_permission_denied_is_a_permission_error_and_leaves_nothing(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to run the writer as another user (root itself bypasses permissions)")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o755)  # root's, not writable by others
    os.chmod(tmp_path, 0o755)
    target = locked / "scene.rumi"
    done = subprocess.run([sys.executable, "-c", AS_NOBODY, str(target)], capture_output=True, text=True,
                          timeout=120, cwd="/")
    if done.returncode and "Permission denied" in done.stderr and "PermissionError" not in done.stdout:
        pytest.skip(f"the interpreter cannot run as nobody here: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["PermissionError", str(locked)]  # names the directory it could not write
    assert os.listdir(locked) == []


def test_a_missing_target_directory_is_a_clear_error_and_creates_nothing(tmp_path):
    target = tmp_path / "no" / "such" / "dir" / "scene.rumi"
    with pytest.raises(FileNotFoundError) as info:
        xarray_rumi.write(target, NOISE[:, :64, :64], tile_size=32)
    assert info.value.filename == str(target.parent)
    assert os.listdir(tmp_path) == []  # no directory made, nothing staged beside it
