"""format/layout.py: the tag numbers written once, and the writer's own check that survives ``python -O``."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from xarray_rumi.format import ifd, layout


def test_the_ifd_uses_the_layouts_tag_numbers():
    assert [tag for tag, _, _ in ifd.FIXED_TAGS] == [
        layout.IMAGE_WIDTH, layout.IMAGE_LENGTH, layout.BITS_PER_SAMPLE, layout.SAMPLES_PER_PIXEL,
        layout.TILE_WIDTH, layout.TILE_LENGTH, layout.TILE_OFFSETS, layout.TILE_BYTE_COUNTS,
        layout.SAMPLE_FORMAT, layout.MODEL_TRANSFORMATION, layout.GEO_KEY_DIRECTORY,
    ] == [256, 257, 258, 277, 322, 323, 324, 325, 339, 34264, 34735]
    assert ifd.TILE_OFFSETS is layout.TILE_OFFSETS
    assert set(layout.external_sizes(5, 3)) <= set(ifd.TAG_NAMES)


def test_a_prefix_that_disagrees_with_the_layout_is_an_internal_error_even_under_python_O():
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
                           "layout.base_frame_offset says 413")
