"""Checking a file (and optionally its blob) against every rule of rumi 0.1.0."""

from __future__ import annotations

import numpy as np

from ..errors import RumiFormatError
from ..format.head import check_blob_against_file
from ..format.limits import DEFAULT_LIMITS, Limits
from ..frames.codec import frame_version
from ..io.source import ByteSource
from .image import RumiImage
from .open import load_header, read_ifd

#: Compressed bytes fetched together: frames only checked, not placed, are held no longer than their check.
READ_BATCH = 32 * 1024 * 1024


def validate(path, header=None, *, storage_options=None, limits: Limits = DEFAULT_LIMITS) -> None:
    """Raise :class:`RumiFormatError` naming the first rule ``path`` (every frame decoded) or ``header`` breaks.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob = xarray_rumi.write(path, np.zeros((2, 50, 50), "int16"), tile_size=32)
    >>> validate(path, blob)   # returns None when the file complies
    """
    source = ByteSource.of(path, storage_options)
    _, file_header, size = read_ifd(source, limits)
    if header is not None:
        check_blob_against_file(load_header(header, storage_options, limits), file_header)
    if size != file_header.frames_end:
        rule = "frames.truncated" if size < file_header.frames_end else "frames.trailing-bytes"
        raise RumiFormatError(rule, f"the frames end at byte {file_header.frames_end}, but the file is {size} bytes")
    _check_frames(source, file_header)


def _check_frames(source: ByteSource, header) -> None:
    image = RumiImage(source, header)  # the file's own header: nothing to check it against
    pinned = None
    for part, starts, stops in image.batches(np.arange(header.frame_count), READ_BATCH):
        for k, payload in zip(range(part.start, part.stop), image.fetch(starts, stops)):
            try:
                version = frame_version(payload)
            except RumiFormatError as exc:
                raise RumiFormatError(exc.rule, f"frame {k} of {source.url}: {exc.detail}") from None
            if pinned is None:
                pinned = version
            elif version != pinned:
                raise RumiFormatError("frames.format-version", f"frame {k} of {source.url} uses OpenZL format "
                                      f"version {version}, but frame 0 uses {pinned}; all frames must share one "
                                      "pinned version")
            image.decode(k, payload)
