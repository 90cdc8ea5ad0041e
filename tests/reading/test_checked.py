"""reading/checked.py: the (file, blob) pairs a process has checked, bounded and named by a digest.

When a blob is checked, and what a failed check says, is in
``tests/format/test_head.py``; what the check costs in requests, in
``tests/reading/test_image_requests.py``.
"""

from __future__ import annotations

import threading

import numpy as np

import xarray_rumi
from xarray_rumi.format.blob import Header
from xarray_rumi.io.source import ByteSource
from xarray_rumi.reading.checked import CheckedBlobs, blob_key


def test_the_cache_of_checked_blobs_is_bounded_and_forgets_the_oldest():
    checked = CheckedBlobs(max_entries=3)
    for key in [b"a", b"b", b"c", b"a", b"d"]:
        checked.add(key)
    assert len(checked) == 3 and b"b" not in checked and all(k in checked for k in (b"a", b"c", b"d"))
    checked.clear()
    assert len(checked) == 0 and b"a" not in checked


def test_a_pair_is_named_by_its_address_its_storage_options_and_its_blob(tmp_path):
    blobs = [Header.from_bytes(xarray_rumi.write(tmp_path / f"{i}.rumi", np.zeros((1, 8, 8 + i), "uint8")))
             for i in range(2)]
    here = ByteSource.of(str(tmp_path / "0.rumi"))
    assert blob_key(here, blobs[0]) == blob_key(ByteSource.of(str(tmp_path / "0.rumi")), blobs[0])
    assert blob_key(here, blobs[0]) != blob_key(here, blobs[1])
    assert blob_key(here, blobs[0]) != blob_key(ByteSource.of(str(tmp_path / "1.rumi")), blobs[0])
    url = "http://127.0.0.1:9/0.rumi"   # nothing is read: the key is a digest of what names the pair
    elsewhere = ByteSource.of(url, {"headers": {"Host": "other"}})
    assert blob_key(ByteSource.of(url), blobs[0]) != blob_key(elsewhere, blobs[0])


def test_threads_checking_one_pair_share_one_lock_until_it_is_released():
    checked = CheckedBlobs()
    lock = checked.lock_for(b"pair")
    assert checked.lock_for(b"pair") is lock and checked.lock_for(b"other") is not lock
    lock.acquire()
    waiting = threading.Thread(target=lambda: checked.lock_for(b"pair").acquire(timeout=30) and None)
    waiting.start()
    checked.add(b"pair")   # the verdict, then the lock
    checked.release(b"pair", lock)
    waiting.join(timeout=30)
    assert not waiting.is_alive() and b"pair" in checked
    assert checked.lock_for(b"pair") is not lock   # released: a later check takes a new one
