"""format/limits.py: the bounds on what a file or blob may claim, as docs/limits.md gives them.

Each bound refusing a claim is tested where it is checked: ``tests/format/test_blob.py``
(the blob), ``tests/reliability/test_integrity.py`` (files), ``tests/properties/test_format_fuzz.py``.
"""

from __future__ import annotations

import dataclasses

import pytest

import xarray_rumi
from xarray_rumi.format.limits import DEFAULT_LIMITS, Limits

BOUNDS = ("max_frames", "max_frame_bytes", "max_frame_byte_count", "max_image_bytes")


def test_the_defaults_are_the_documented_ones():
    assert dataclasses.astuple(Limits()) == (2**24, 2**30, 2**31 - 1, 2**40)
    assert DEFAULT_LIMITS == Limits() and xarray_rumi.Limits is Limits
    assert [f.name for f in dataclasses.fields(Limits)] == list(BOUNDS)


@pytest.mark.parametrize("bound", BOUNDS)
@pytest.mark.parametrize("value", [0, -1])
def test_a_bound_below_one_is_refused_naming_it(bound, value):
    with pytest.raises(ValueError, match=f"Limits.{bound} must be at least 1"):
        Limits(**{bound: value})
    assert getattr(Limits(**{bound: 1}), bound) == 1


def test_limits_cannot_be_changed_once_made():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_LIMITS.max_frames = 1
