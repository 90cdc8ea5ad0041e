"""The (file, blob) pairs a process has checked against their files.

Checking a blob costs one small read of the file's IFD head; remembering the
pairs checked makes every later read of them in this process free.  Bounded
and thread-safe; reset in a forked child, whose inherited locks may be held.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict

from ..format.blob import Header
from ..io.source import ByteSource


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
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=checked_blobs._after_fork)


def blob_key(source: ByteSource, header: Header) -> bytes:
    """What names a (file, blob) pair in :data:`checked_blobs`: a digest of the address and the blob."""
    # another endpoint may hold another file under the same URL
    options = repr(sorted(getattr(source, "storage_options", {}).items()))
    return hashlib.blake2b(b"\0".join([source.url.encode(), options.encode(), header.to_bytes()]),
                           digest_size=16).digest()


__all__ = ["CheckedBlobs", "blob_key", "checked_blobs"]
