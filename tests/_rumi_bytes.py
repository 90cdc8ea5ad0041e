"""Byte surgery on rumi files for the format tests.

Each rejection test takes a valid file written by :func:`xarray_rumi.write`,
breaks exactly one rule by patching bytes with ``struct``, and checks that the
rule is named.  These helpers read and rewrite the 11-entry IFD table.
"""

from __future__ import annotations

import pathlib
import struct

import numpy as np

import xarray_rumi

IFD_AT = 16
ENTRY = struct.Struct("<HHQ8s")  # tag, type, count, inline value or offset


def entry_at(index: int) -> int:
    """Byte position of IFD entry ``index``."""
    return IFD_AT + 8 + ENTRY.size * index


def entries(data: bytes) -> list[list]:
    """The IFD entries as ``[tag, type, count, field]`` lists."""
    return [list(ENTRY.unpack_from(data, entry_at(i))) for i in range(11)]


def with_entries(data: bytes, table: list[list]) -> bytes:
    """``data`` with the 11 entries replaced by ``table``."""
    out = bytearray(data)
    for i, (tag, type_code, count, field) in enumerate(table):
        ENTRY.pack_into(out, entry_at(i), tag, type_code, count, field)
    return bytes(out)


def entry_index(data: bytes, tag: int) -> int:
    return [e[0] for e in entries(data)].index(tag)


def patch_entry(data: bytes, which: int, **changes) -> bytes:
    """Change the entry of tag ``which``: keywords ``tag``, ``type``, ``count``, ``field``."""
    table = entries(data)
    row = table[entry_index(data, which)]
    for i, name in enumerate(("tag", "type", "count", "field")):
        if name in changes:
            row[i] = changes[name]
    return with_entries(data, table)


def value_offset(data: bytes, tag: int) -> int:
    """Where ``tag``'s value bytes are: inside its entry, or out of line."""
    tag_, type_code, count, field = entries(data)[entry_index(data, tag)]
    size = {3: 2, 4: 4, 12: 8, 16: 8}[type_code] * count
    if size <= 8:
        return entry_at(entry_index(data, tag)) + 12
    return struct.unpack("<Q", field)[0]


def put(data: bytes, at: int, fmt: str, *values) -> bytes:
    """``data`` with ``struct.pack(fmt, *values)`` written at byte ``at``."""
    out = bytearray(data)
    struct.pack_into(fmt, out, at, *values)
    return bytes(out)


def tile_offsets(data: bytes) -> np.ndarray:
    count = entries(data)[entry_index(data, 324)][2]
    return np.frombuffer(data, "<u8", count=count, offset=value_offset(data, 324)).astype(np.int64)


def tile_byte_counts(data: bytes) -> np.ndarray:
    count = entries(data)[entry_index(data, 325)][2]
    return np.frombuffer(data, "<u4", count=count, offset=value_offset(data, 325)).astype(np.int64)


def make(tmp_path: pathlib.Path, array, name: str = "f.rumi", **kwargs) -> tuple[pathlib.Path, bytes, bytes]:
    """Write ``array`` (portable compression unless given); return ``(path, blob, file bytes)``."""
    kwargs.setdefault("compression", "portable")
    kwargs.setdefault("write_header", False)
    path = tmp_path / name
    blob = xarray_rumi.write(path, array, **kwargs)
    return path, blob, path.read_bytes()


def save(tmp_path: pathlib.Path, data: bytes, name: str = "broken.rumi") -> pathlib.Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def ramp(shape, dtype="uint16") -> np.ndarray:
    """Deterministic, compressible data whose frames differ in size."""
    rng = np.random.default_rng(sum(shape))
    values = np.arange(int(np.prod(shape))).reshape(shape) % 251 + rng.integers(0, 4, shape)
    return values.astype(dtype)


def representable(t, shape, rng) -> np.ndarray:
    """Values of sample type ``t`` drawn from every bit pattern it may hold (NaN payloads included)."""
    shape = tuple(np.atleast_1d(shape))
    count = int(np.prod(shape))
    if t.components == 2:
        if t.storage.kind == "i":
            info = np.iinfo(t.storage)
            parts = rng.integers(info.min, info.max, (count, 2), endpoint=True).astype(t.storage)
        else:
            width = 8 * t.storage.itemsize
            parts = rng.integers(0, (1 << width) - 1, (count, 2), dtype=np.uint64, endpoint=True)
            parts = parts.astype(f"u{t.storage.itemsize}").view(t.storage)
        out = np.empty(count, t.dtype)
        out.real, out.imag = parts[:, 0], parts[:, 1]
        return out.reshape(shape)
    patterns = rng.integers(0, (1 << t.bits_per_sample) - 1, count, dtype=np.uint64, endpoint=True)
    return patterns.astype(f"u{t.storage.itemsize}").view(t.dtype).reshape(shape)
