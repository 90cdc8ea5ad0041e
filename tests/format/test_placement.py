"""format/placement.py: the tag numbers written once, and the writer's own check that survives ``python -O``."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from xarray_rumi.format import ifd, placement


def test_the_ifd_uses_the_placement_tag_numbers():
    assert [tag for tag, _, _, _ in ifd.FIXED_TAGS] == [
        placement.IMAGE_WIDTH, placement.IMAGE_LENGTH, placement.BITS_PER_SAMPLE, placement.SAMPLES_PER_PIXEL,
        placement.TILE_WIDTH, placement.TILE_LENGTH, placement.TILE_OFFSETS, placement.TILE_BYTE_COUNTS,
        placement.SAMPLE_FORMAT, placement.MODEL_TRANSFORMATION, placement.GEO_KEY_DIRECTORY,
    ] == [256, 257, 258, 277, 322, 323, 324, 325, 339, 34264, 34735]
    assert ifd.TILE_OFFSETS is placement.TILE_OFFSETS
    assert set(placement.external_sizes(5, 3)) <= set(ifd.TAG_NAMES)


def test_a_prefix_that_disagrees_with_the_placement_is_an_internal_error_even_under_python_O():
    # An assert would vanish under -O and the frames would be written where no reader looks.
    script = textwrap.dedent("""
        from xarray_rumi.format import ifd
        from xarray_rumi.format.dtypes import sample_type_from_name
        from xarray_rumi.format.geo import Georeferencing
        from xarray_rumi.format.grid import FrameGrid
        ifd.base_frame_offset = lambda grid: 413   # one byte more than the IFD writer makes
        try:
            ifd.build_prefix(FrameGrid(1, 1, 1, 1, 1), sample_type_from_name("uint8"), Georeferencing(), [30])
        except RuntimeError as exc:
            print(exc)
    """)
    out = subprocess.run([sys.executable, "-O", "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ("internal error: the IFD writer made 412 bytes before the frames, "
                           "placement.base_frame_offset says 413")
