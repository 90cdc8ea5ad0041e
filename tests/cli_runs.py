"""What the CLI tests share: running ``rumi`` in-process (the exit status, stdout and stderr, never a traceback),
a small georeferenced file, and skipping a command whose extra is not installed."""

from __future__ import annotations

import numpy as np
import pytest

import xarray_rumi
from xarray_rumi.cli import main

#: The module each command that needs an extra cannot run without.
EXTRA_MODULES = {"stac": "pystac", "refs": "kerchunk"}


def run(capsys, *argv) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return status, out, err


def write_scene(directory, name: str = "a.rumi"):
    """A 2-band 40 x 48 uint16 file in UTM 33N at ``directory/name``, its blob beside it: the path."""
    path = directory / name
    xarray_rumi.write(path, np.arange(2 * 40 * 48, dtype=np.uint16).reshape(2, 40, 48), tile_size=16,
                      crs=32633, transform=(10, 0, 500000, 0, -10, 5000000))
    return path


def needs(command: str) -> None:
    if command in EXTRA_MODULES:
        pytest.importorskip(EXTRA_MODULES[command])
