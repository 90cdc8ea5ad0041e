"""The (file, blob) pairs a process has checked against their files, each in the version of the file checked.

Checking a blob costs one small read of the file's IFD head; remembering the
pairs checked makes every later read of them in this process free.  A pair
is named with the version of the file it was checked in (its size and
modification time, device and inode locally; its ETag remotely), so a file
rewritten in place since is checked again.  Bounded and thread-safe; reset
in a forked child, whose inherited locks may be held.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from ..format.blob import Header
from ..io.source import ByteSource
from ..runtime.fork import in_forked_child


class CheckedBlobs:
    """The (file, blob) pairs this process has checked against the file: bounded, thread-safe.

    Oldest entries go first once ``max_entries`` are held; a pair forgotten is
    only checked again.  :meth:`lock_for` gives the threads reading one pair
    one lock, so one of them checks while the others wait for its verdict.

    >>> checked = CheckedBlobs(max_entries=2)
    >>> for key in (b"a", b"b", b"c"):
    ...     checked.add(key)
    >>> b"a" in checked, b"c" in checked, len(checked)
    (False, True, 2)
    >>> checked.clear(); len(checked)
    0
    """

    def __init__(self, max_entries: int = 4096):
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._checked: OrderedDict[bytes, None] = OrderedDict()
        self._checking: dict[bytes, threading.Lock] = {}

    def __contains__(self, key: bytes) -> bool:
        with self._lock:
            return key in self._checked

    def __len__(self) -> int:
        return len(self._checked)

    def add(self, key: bytes) -> None:
        with self._lock:
            self._checked[key] = None
            self._checked.move_to_end(key)
            while len(self._checked) > self.max_entries:
                self._checked.popitem(last=False)

    def clear(self) -> None:
        """Forget every pair: each is checked again on its next read (as in a new process)."""
        with self._lock:
            self._checked.clear()

    def lock_for(self, key: bytes) -> threading.Lock:
        """The lock a thread holds while it checks ``key``."""
        with self._lock:
            return self._checking.setdefault(key, threading.Lock())

    def release(self, key: bytes, lock: threading.Lock) -> None:
        """Release ``lock`` after checking ``key``; threads waiting on it then see the verdict."""
        with self._lock:
            if self._checking.get(key) is lock:
                del self._checking[key]
        lock.release()

    def _after_fork(self) -> None:
        # A lock held by another thread at fork time would never be released in the child.
        self._lock = threading.Lock()
        self._checking = {}


#: The (file, blob) pairs this process has checked: what makes later reads of them free.
checked_blobs = CheckedBlobs()
in_forked_child(checked_blobs._after_fork)


def pair_digest(source: ByteSource, header: Header) -> bytes:
    """A digest of the address and the blob: what names the pair whatever version of the file it is read in."""
    # another endpoint may hold another file under the same URL
    options = repr(sorted(getattr(source, "storage_options", {}).items()))
    return hashlib.blake2b(b"\0".join([source.url.encode(), options.encode(), header.to_bytes()]),
                           digest_size=16).digest()


def version_key(digest: bytes, source: ByteSource) -> bytes:
    """The key of pair ``digest`` in the version of the file ``source`` keeps to.

    The version (size and modification time, device and inode locally; the
    ETag remotely) is part of the key, so a file rewritten or replaced since
    its blob was checked is checked again.
    """
    identity = getattr(source, "identity", None)
    return hashlib.blake2b(digest + (identity.key() if identity is not None else b"unknown"), digest_size=16).digest()


def blob_key(source: ByteSource, header: Header) -> bytes:
    """What names a (file, blob) pair in :data:`checked_blobs`: the address, the blob and the file's version.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> header = Header.from_bytes(xarray_rumi.write(path, np.zeros((4, 4), "uint8"), tile_size=2))
    >>> source = ByteSource(path); _ = source.pin()
    >>> rewritten = ByteSource(path)
    >>> _ = xarray_rumi.write(path, np.ones((4, 4), "uint8"), tile_size=2); _ = rewritten.pin()
    >>> blob_key(source, header) == blob_key(rewritten, header)
    False
    """
    return version_key(pair_digest(source, header), source)


__all__ = ["CheckedBlobs", "blob_key", "checked_blobs", "pair_digest", "version_key"]
