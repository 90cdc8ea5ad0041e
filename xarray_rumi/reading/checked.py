"""The (file, blob) pairs a process has checked, each in the version of the file checked: a rewrite is checked again."""

from __future__ import annotations

import hashlib
import threading
from collections import Counter, OrderedDict

from ..format.blob import Header
from ..format.geo import Georeferencing
from ..io.source import ByteSource
from ..runtime.fork import in_forked_child


#: Bytes of a pair's digest (:func:`pair_digest`), the first of its keys.
PAIR_SIZE = 16


class CheckedBlobs:
    """The (file, blob) pairs this process has checked, oldest forgotten past ``max_entries``; thread-safe."""

    def __init__(self, max_entries: int = 4096):
        self.max_entries = max_entries
        self._checked: OrderedDict[bytes, None] = OrderedDict()
        self._pairs: Counter[bytes] = Counter()  # keys held per pair digest
        self._after_fork()

    def __contains__(self, key: bytes) -> bool:
        with self._lock:
            return key in self._checked

    def __len__(self) -> int:
        return len(self._checked)

    def has_pair(self, digest: bytes) -> bool:
        """Whether pair ``digest`` was checked in any version of its file."""
        with self._lock:
            return self._pairs[digest] > 0

    def add(self, key: bytes) -> None:
        with self._lock:
            if key not in self._checked:
                self._pairs[key[:PAIR_SIZE]] += 1
            self._checked[key] = None
            self._checked.move_to_end(key)
            while len(self._checked) > self.max_entries:
                pair = self._checked.popitem(last=False)[0][:PAIR_SIZE]
                self._pairs[pair] -= 1
                if not self._pairs[pair]:
                    del self._pairs[pair]

    def clear(self) -> None:
        """Forget every pair: each is checked again on its next read."""
        with self._lock:
            self._checked.clear()
            self._pairs.clear()

    def lock_for(self, key: bytes) -> threading.Lock:
        with self._lock:
            return self._checking.setdefault(key, threading.Lock())

    def release(self, key: bytes, lock: threading.Lock) -> None:
        with self._lock:
            if self._checking.get(key) is lock:
                del self._checking[key]
        lock.release()

    def _after_fork(self) -> None:
        # A lock held by another thread at fork time would never be released in the child.
        self._lock = threading.Lock()
        self._checking: dict[bytes, threading.Lock] = {}


checked_blobs = CheckedBlobs()
in_forked_child(checked_blobs._after_fork)


def pair_digest(source: ByteSource, header: Header, claimed: Georeferencing | None = None) -> bytes:
    """A digest of the address (storage options too: another endpoint, another file), the blob, and the
    georeferencing a caller ``claimed``: a pair checked with a claim is checked for that claim only."""
    options = repr(sorted(getattr(source, "storage_options", {}).items()))
    parts = [source.url.encode(), options.encode(), header.to_bytes()]
    if claimed is not None:
        parts += [claimed.model_transformation(), claimed.geo_keys()]
    return hashlib.blake2b(b"\0".join(parts), digest_size=16).digest()


def version_key(digest: bytes, source: ByteSource) -> bytes:
    """The key of pair ``digest`` in the version ``source`` keeps to; the digest first, for ``has_pair``."""
    identity = getattr(source, "identity", None)
    return digest + hashlib.blake2b(identity.key() if identity is not None else b"unknown", digest_size=16).digest()


def blob_key(source: ByteSource, header: Header) -> bytes:
    """The key of a (file, blob) pair in :data:`checked_blobs`: the address, the blob and the file's version."""
    return version_key(pair_digest(source, header), source)


__all__ = ["CheckedBlobs", "blob_key", "checked_blobs", "pair_digest", "version_key"]
