"""Staging: a file appears whole or not at all, write-back and releases run in the background."""

from __future__ import annotations

import os
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
