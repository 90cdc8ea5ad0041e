"""frames/_geozl_into.py: geozl's C decoder on caller buffers, only where its private names were checked.

What ``decode_frame(..., out=)`` makes of it (in place where the layout
allows, through a copy elsewhere, the same values either way) is in
``tests/frames/test_codec.py``.
"""

from __future__ import annotations

import pathlib

import geozl
import numpy as np
import pytest

from xarray_rumi.frames import _geozl_into
from xarray_rumi.frames.codec import encode_frame

VALUES = np.random.default_rng(0).integers(0, 4000, (1, 64, 48), dtype=np.uint16)


@pytest.fixture
def decoder():
    found = _geozl_into.into_decoder()
    assert found is not None, f"geozl {geozl.__version__}: no decoder into caller memory"
    return found


def test_unchecked_geozl_versions_get_no_private_decoder():
    assert _geozl_into.into_decoder("0.20.0") is None
    assert _geozl_into.into_decoder("1.19.0") is None
    assert _geozl_into.into_decoder(geozl.__version__) is not None


def test_the_private_names_are_used_in_one_module_only():
    package = pathlib.Path(_geozl_into.__file__).parents[1]
    users = sorted(str(path.relative_to(package)) for path in package.rglob("*.py")
                   if "geozl._" in path.read_text())
    assert users == ["frames/_geozl_into.py"]


def test_a_frame_decodes_into_the_callers_buffer(decoder):
    payload = np.frombuffer(encode_frame(VALUES, "delta_1d>zstd"), np.uint8)
    assert decoder.declared_size(payload) == VALUES.nbytes
    target = np.zeros(VALUES.nbytes, np.uint8)
    assert decoder.decompress(payload, target, verify=True) == VALUES.nbytes
    np.testing.assert_array_equal(target.view(np.uint16).reshape(VALUES.shape), VALUES)


def test_an_unreadable_frame_declares_nothing_and_fails_with_openzls_reason(decoder):
    payload = np.frombuffer(encode_frame(VALUES, "delta_1d>zstd"), np.uint8)
    assert decoder.declared_size(np.zeros(3, np.uint8)) == 0
    with pytest.raises(RuntimeError, match="ZL error code"):
        decoder.decompress(payload[:20].copy(), np.zeros(VALUES.nbytes, np.uint8), verify=True)
