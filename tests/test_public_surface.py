"""The documented surface is the importable one: what docs/ and the README show comes from ``xarray_rumi``.

Pages may import from the package and from its documented public modules
(``xarray_rumi.stac``, ``xarray_rumi.cli``, ``xarray_rumi.errors``) only; the
names they need from inside (``convert``, building a catalog, the warnings of
what a write does not store) are public names of the package.
"""

from __future__ import annotations

import importlib
import pathlib
import re
import warnings

import numpy as np
import pytest
import xarray as xr

import xarray_rumi

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = sorted(ROOT.glob("docs/*.md")) + [ROOT / "README.md"]
PUBLIC_MODULES = {"xarray_rumi", "xarray_rumi.stac", "xarray_rumi.cli", "xarray_rumi.errors"}
_BLOCK = re.compile(r"^```(?:python|pycon|py)\n(.*?)^```", re.S | re.M)
_IMPORT = re.compile(r"^\s*(?:from\s+(xarray_rumi[\w.]*)\s+import|import\s+(xarray_rumi[\w.]*))")
_DOTTED = re.compile(r"(?<![\"'\w])xarray_rumi((?:\.\w+)+)")  # in quotes: a logger's name, not code


def code_lines(page: pathlib.Path):
    """The code of every Python block of ``page``: a doctest's inputs, or the whole block; comments dropped."""
    for block in _BLOCK.findall(page.read_text()):
        lines = block.splitlines()
        if any(line.startswith(">>> ") for line in lines):
            lines = [line[4:] for line in lines if line.startswith((">>> ", "... "))]
        yield from (line.split("  #")[0] for line in lines)


def module_of(dotted: str) -> str:
    """The module a dotted name ``xarray_rumi.a.b.c`` reaches through: the longest importable prefix."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        return name
    return parts[0]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_pages_use_only_the_public_surface(page):
    reached = set()
    for line in code_lines(page):
        if match := _IMPORT.match(line):
            reached.add(match.group(1) or match.group(2))
        reached.update(module_of("xarray_rumi" + tail) for tail in _DOTTED.findall(line))
    assert reached <= PUBLIC_MODULES, f"{page.name} reaches inside the package: {sorted(reached - PUBLIC_MODULES)}"


def test_convert_is_the_function_not_a_module(tmp_path):
    rasterio = pytest.importorskip("rasterio")
    assert callable(xarray_rumi.convert) and "convert" in xarray_rumi.__all__
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("xarray_rumi.convert")
    source = tmp_path / "in.tif"
    pixels = np.arange(512, dtype="uint16").reshape(1, 16, 32)
    with rasterio.open(source, "w", driver="GTiff", width=32, height=16, count=1, dtype="uint16") as dst:
        dst.write(pixels)
    xarray_rumi.convert(str(source), str(tmp_path / "out.rumi"), tile_size=16, drop_georeferencing=True)
    assert (xarray_rumi.open_image(tmp_path / "out.rumi").read() == pixels).all()


def test_build_catalog_writes_what_open_catalog_opens(tmp_path):
    pytest.importorskip("pyarrow")
    paths = [str(tmp_path / f"{i}.rumi") for i in range(2)]
    for i, path in enumerate(paths):
        xarray_rumi.write(path, np.full((1, 32, 32), i, "uint8"), tile_size=16)
    xarray_rumi.build_catalog(paths, tmp_path / "catalog.parquet")
    opened = xarray_rumi.open_catalog(tmp_path / "catalog.parquet")
    assert [int(ds.band_data.values.max()) for ds in opened] == [0, 1]


def test_the_not_stored_warnings_are_the_ones_a_write_raises(tmp_path):
    data = xr.DataArray(np.zeros((1, 16, 16), "int16"), dims=("band", "y", "x"),
                        attrs={"_FillValue": -9999, "scale_factor": 0.5})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        xarray_rumi.write(tmp_path / "a.rumi", data, tile_size=16)
    categories = {w.category for w in caught}
    assert {xarray_rumi.NodataNotStoredWarning, xarray_rumi.ScaleNotStoredWarning} <= categories
    for name in ("NodataNotStoredWarning", "ScaleNotStoredWarning", "BandLabelsNotStoredWarning",
                 "GcpsNotStoredWarning"):
        assert issubclass(getattr(xarray_rumi, name), UserWarning) and name in xarray_rumi.__all__


def test_the_error_type_is_a_value_error_naming_its_rule():
    error = xarray_rumi.RumiFormatError("blob.magic", "got 0x00000000")
    assert isinstance(error, ValueError) and error.rule == "blob.magic" and str(error).startswith("blob.magic: ")
