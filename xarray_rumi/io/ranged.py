"""Ranged GETs that also say which version of the file answered (``Content-Range`` total, ``ETag``): no HEAD first.

fsspec's ``cat_file`` keeps response headers to itself, so the request is made here as fsspec and s3fs make it.
"""

from __future__ import annotations

import re
import sys

from .versions import FileIdentity

#: ``Content-Range: bytes 0-99/1234`` or, answering a range past the end, ``bytes */1234``.
_CONTENT_RANGE = re.compile(r"bytes\s+(?:\d+-\d+|\*)/(\d+)")


def reports_versions(fs) -> bool:
    """Whether answers from ``fs`` state the file's version (fsspec's HTTP, our single-try S3)."""
    return _http_class(fs) or type(fs).__name__ == "SingleTryS3FileSystem"


class ReportingFileSystem:
    """``fs`` as the read engine calls it (``_cat_file`` on ``fs.loop``), keeping the version each answer stated."""

    async_impl = True

    def __init__(self, fs) -> None:
        self.fs, self.loop = fs, fs.loop
        self._get = _get_http if _http_class(fs) else get_s3
        self._answered: list[tuple[int, int, FileIdentity | None]] = []  # (start, stop, stated)

    async def _cat_file(self, path: str, start: int, end: int, **options) -> bytes:
        """Bytes ``[start, end)`` (past the end: ``b""``)."""
        body, stated = await self._get(self.fs, path, start, end, options)
        self._answered.append((start, end, stated))
        return body

    def stated(self, start: int, stop: int) -> FileIdentity | None:
        """The version stated by the answer holding ``[start, stop)``, if any."""
        for a, b, identity in self._answered:
            if a <= start and stop <= b and stop > start:
                return identity
        return None


def _identity_stated(content_range: str | None, etag: str | None, version_id: str | None = None) -> FileIdentity | None:
    """The file's version a response states; ``None`` when it states no size."""
    found = _CONTENT_RANGE.fullmatch((content_range or "").strip())
    if found is None:
        return None
    return FileIdentity(int(found.group(1)), etag=etag, version_id=version_id if version_id != "null" else None)


def _http_class(fs) -> bool:
    http = sys.modules.get("fsspec.implementations.http")
    return http is not None and isinstance(fs, http.HTTPFileSystem)


async def _get_http(fs, url: str, start: int, stop: int, options: dict):
    # fsspec's HTTPFileSystem._cat_file, keeping the response's headers.
    kw = {**fs.kwargs, **options}
    kw["headers"] = {**kw.get("headers", {}), "Range": f"bytes={start}-{stop - 1}"}
    session = await fs.set_session()
    async with session.get(fs.encode_url(url), **kw) as response:
        body = await response.read()
        identity = _identity_stated(response.headers.get("Content-Range"), response.headers.get("ETag"))
        if response.status == 416 and identity is not None:
            return b"", identity
        fs._raise_not_found_for_status(response, url)
    return body, identity


async def get_s3(fs, path: str, start: int, stop: int, options: dict, *, version_id: str | None = None):
    """One ranged ``get_object`` as s3fs makes it, with ``If-Match`` if ``options`` say: ``(bytes, FileIdentity)``."""
    from s3fs.core import version_id_kw

    bucket, key, version = fs.split_path(path)
    params = {"Bucket": bucket, "Key": key, "Range": f"bytes={start}-{stop - 1}",
              **version_id_kw(version_id or version)}
    if options.get("if_match"):
        params["IfMatch"] = options["if_match"]
    response = await fs._call_s3("get_object", **params)
    try:
        body = await response["Body"].read()
    finally:
        response["Body"].close()
    return body, _identity_stated(response.get("ContentRange"), response.get("ETag"), response.get("VersionId"))


__all__ = ["ReportingFileSystem", "reports_versions"]
