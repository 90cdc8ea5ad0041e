"""Decoding a frame into caller memory: the one place that uses geozl's private names."""

from __future__ import annotations

import numpy as np

# geozl major.minor releases checked: a signature changed under one name would write wrong memory.
CHECKED_VERSIONS = ("0.19",)

_FUNCTIONS = ("geozl_2d_frame_dsize_c", "geozl_2d_decompress_c")


class IntoDecoder:
    """geozl's C decoder, called on caller buffers (``uint8`` arrays)."""

    def __init__(self, library, ffi):
        self._library, self._ffi = library, ffi

    def declared_size(self, payload: np.ndarray) -> int:
        """The decoded length a frame declares, 0 if it is unreadable."""
        return int(self._library.geozl_2d_frame_dsize_c(self._ffi.from_buffer(payload), payload.size))

    def decompress(self, payload: np.ndarray, target: np.ndarray, verify: bool) -> int:
        """Decode ``payload`` into ``target``: the length written, or ``RuntimeError`` with OpenZL's reason."""
        written = self._ffi.new("size_t*")
        error = self._ffi.new("char[]", 256)
        # cffi releases the GIL around the call, as geozl.decompress does.
        code = self._library.geozl_2d_decompress_c(
            self._ffi.from_buffer(payload), payload.size, self._ffi.from_buffer(target), target.size, written,
            int(bool(verify)), error, len(error))
        if code != 0:
            raise RuntimeError(f"{self._ffi.string(error).decode('utf-8', 'replace')} (ZL error code {code})")
        return int(written[0])


def into_decoder(version: str | None = None) -> IntoDecoder | None:
    """The decoder into caller memory, or ``None`` where this geozl (``version``: the installed one) is not checked.

    >>> into_decoder("0.99.0") is None
    True
    """
    try:
        import geozl

        version = geozl.__version__ if version is None else version
        if ".".join(version.split(".")[:2]) not in CHECKED_VERSIONS:
            return None
        from geozl._2d import _load_lib_full
        from geozl._ffi import ffi

        library = _load_lib_full()
        if not all(hasattr(library, name) for name in _FUNCTIONS):
            return None
        return IntoDecoder(library, ffi)
    except (ImportError, OSError, AttributeError):
        return None


__all__ = ["CHECKED_VERSIONS", "IntoDecoder", "into_decoder"]
