"""What the command tests share: a small georeferenced file (``written``: path, blob, data), and ``scene``
(:func:`cli_runs.write_scene`'s path)."""

from __future__ import annotations

import pytest
from _rumi_bytes import make, ramp
from cli_runs import write_scene


@pytest.fixture
def written(tmp_path):
    return make(tmp_path, ramp((3, 40, 50)), tile_size=16, crs=32618, transform=(30, 0, 500000, 0, -30, 4000000))


@pytest.fixture
def scene(tmp_path):
    return write_scene(tmp_path)
