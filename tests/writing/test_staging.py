"""Staging: a file, or a directory of files, appears whole or not at all; write-back and releases run in the background."""

from __future__ import annotations

import os
import pathlib
import threading

import pytest

from xarray_rumi.io.source import ByteSource
from xarray_rumi.writing import staging


def test_a_failure_inside_the_block_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "scene.rumi"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="midway"):
        with staging.staged(ByteSource.of(str(target))) as f:
            f.write(b"new, half written")
            raise RuntimeError("midway")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["scene.rumi"]


def test_the_replaced_file_is_released_on_the_background_thread(tmp_path, monkeypatch):
    closers = []
    real_close = os.close

    def noted(fd):
        closers.append(threading.current_thread().name)
        real_close(fd)

    target = tmp_path / "scene.rumi"
    target.write_bytes(b"old")
    monkeypatch.setattr(staging.os, "close", noted)
    staging.write_small(ByteSource.of(str(target)), b"new")
    staging.in_background(lambda: None).result()  # the release was queued before this
    assert target.read_bytes() == b"new"
    assert any(name.startswith("rumi-background") for name in closers), closers


def test_write_back_hands_the_file_to_the_disk_every_few_mib(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr(staging, "WRITEBACK_BYTES", 10)
    monkeypatch.setattr(os, "fdatasync", lambda fd: synced.append(threading.current_thread().name))
    with open(tmp_path / "f", "wb") as f, staging.Writeback(f) as writeback:
        for _ in range(5):
            writeback.wrote(f.write(b"0123456789"))
            staging.in_background(lambda: None).result()  # let each flush finish, so the next one starts
    assert len(synced) == 5 and all(name.startswith("rumi-background") for name in synced)


def test_a_failed_flush_is_raised_by_the_writer(tmp_path, monkeypatch):
    monkeypatch.setattr(staging, "WRITEBACK_BYTES", 1)

    def failing(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing)
    with pytest.raises(OSError, match="Input/output error"):
        with open(tmp_path / "f", "wb") as f, staging.Writeback(f) as writeback:
            writeback.wrote(f.write(b"x"))
            staging.in_background(lambda: None).result()  # the flush has run (and failed)


def _directory(path) -> dict:
    return {name: (path / name).read_bytes() for name in sorted(os.listdir(path))}


def test_a_staged_directory_replaces_the_previous_one_whole(tmp_path):
    target = tmp_path / "refs.parq"
    target.mkdir()
    (target / "old.0").write_bytes(b"old")
    with staging.staged_directory(ByteSource.of(str(target))) as built:
        (pathlib.Path(built) / "new.0").write_bytes(b"new")
        assert _directory(target) == {"old.0": b"old"}   # nothing changes before the block ends
    assert _directory(target) == {"new.0": b"new"}   # the old files do not linger among the new
    assert os.listdir(tmp_path) == ["refs.parq"]


@pytest.mark.parametrize("where", ["in the block", "at the rename"])
def test_a_failed_staged_directory_leaves_the_previous_one_and_no_litter(tmp_path, monkeypatch, where):
    target = tmp_path / "refs.parq"
    target.mkdir()
    (target / "old.0").write_bytes(b"old")
    replace = os.replace

    def second_rename_fails(src, dst):   # the first moves the previous directory aside
        if src.endswith("built"):
            raise OSError(28, "No space left on device")
        replace(src, dst)

    monkeypatch.setattr(os, "replace", second_rename_fails)
    with pytest.raises((OSError, RuntimeError)):
        with staging.staged_directory(ByteSource.of(str(target))) as built:
            (pathlib.Path(built) / "new.0").write_bytes(b"new")
            if where == "in the block":
                raise RuntimeError("midway")
    assert _directory(target) == {"old.0": b"old"}
    assert os.listdir(tmp_path) == ["refs.parq"]


def test_a_staged_directory_uploads_the_named_files_last_and_removes_a_failed_upload():
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/staged/refs.parq/stale.0", b"older, larger reference set")
    uploaded = []
    put_file = fs.put_file

    def noted(lpath, rpath, *args, **kwargs):
        uploaded.append(rpath.rsplit("/refs.parq/", 1)[1])
        return put_file(lpath, rpath, *args, **kwargs)

    target = ByteSource.of("memory://staged/refs.parq")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fs, "put_file", noted)
        with staging.staged_directory(target, last=(".zmetadata",)) as built:
            for name in (".zmetadata", "a/refs.0.parq", "z.0"):
                os.makedirs(os.path.dirname(os.path.join(built, name)), exist_ok=True)
                pathlib.Path(built, name).write_bytes(name.encode())
    assert uploaded[-1] == ".zmetadata" and sorted(uploaded) == [".zmetadata", "a/refs.0.parq", "z.0"]
    assert sorted(fs.find("/staged/refs.parq")) == ["/staged/refs.parq/.zmetadata", "/staged/refs.parq/a/refs.0.parq",
                                                    "/staged/refs.parq/z.0"]

    def second_upload_fails(lpath, rpath, *args, **kwargs):
        if len(uploaded) == 4:
            raise OSError("connection reset")
        uploaded.append(rpath)
        return put_file(lpath, rpath, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch, pytest.raises(OSError, match="connection reset"):
        patch.setattr(fs, "put_file", second_upload_fails)
        with staging.staged_directory(target, last=(".zmetadata",)) as built:
            pathlib.Path(built, "a.0").write_bytes(b"a")
            pathlib.Path(built, "b.0").write_bytes(b"b")
    assert not fs.exists("/staged/refs.parq")
