"""`rumi demo` works after a plain install and writes where it is told; `rumi refs` and `rumi convert` name the
extra they need, in both forms (from an index, from a clone).

Each command runs in a fresh interpreter where the optional modules are not
found, as when their extra is not installed: every finder on ``sys.meta_path``
is wrapped so that it finds nothing of them, so ``import zarr`` raises the
ModuleNotFoundError Python raises for a missing module and
``importlib.util.find_spec("zarr")`` (how xarray probes its backends) is None.
Their installed metadata stays visible, so xarray may warn that the rasterio
engine (rioxarray's entry point) failed to load; a plain install has neither.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import xarray_rumi
from xarray_rumi.cli import demo_raster, install_hint

#: The modules of the optional extras ([zarr] and [geo]).
ZARR_EXTRA = ("zarr", "numcodecs", "kerchunk", "virtualizarr", "obstore")
GEO_EXTRA = ("rasterio", "rioxarray", "tqdm")

#: ``python -c WITHOUT MODULES ARGS...``: ``rumi ARGS...`` with MODULES (comma-separated) not installed.
#: The last line of stderr names the missing modules that were looked for.
WITHOUT = """
import sys
missing, asked = set(sys.argv[1].split(",")), set()
assert not missing & {name.partition(".")[0] for name in sys.modules}, "imported before they could be hidden"

class Hiding:
    def __init__(self, finder):
        self.finder = finder
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in missing:
            asked.add(name.partition(".")[0])
            return None
        return self.finder.find_spec(name, path, target)
    def __getattr__(self, attribute):
        return getattr(self.finder, attribute)

sys.meta_path[:] = [Hiding(finder) for finder in sys.meta_path]
from xarray_rumi.cli import main
try:
    status = main(sys.argv[2:])
finally:
    print("looked for:", ",".join(sorted(asked)), file=sys.stderr)
sys.exit(status)
"""


def rumi_without(modules, *args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT, ",".join(modules), *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def looked_for(done: subprocess.CompletedProcess) -> set[str]:
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("looked for:"), done.stderr
    return set(filter(None, last.removeprefix("looked for:").strip().split(",")))


def test_demo_writes_validates_and_reads_back_without_any_extra(tmp_path):
    done = rumi_without(ZARR_EXTRA + GEO_EXTRA, "demo", tmp_path / "kept", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    out = done.stdout
    path = tmp_path / "kept" / "demo.rumi"
    blob = (tmp_path / "kept" / "demo.rumi.header").read_bytes()
    xarray_rumi.validate(path, blob)
    assert np.array_equal(xarray_rumi.open_image(path, blob).read(), demo_raster())
    assert "read back identical to what was written" in out
    assert "CRS EPSG:32633" in out and "48 chunks of (1, 256, 256)" in out
    assert f"{len(blob)} bytes locate all frames" in out
    assert f"wrote     {path}: " in out and f"kept      both in {tmp_path / 'kept'}" in out


def test_demo_writes_into_the_current_directory_and_leaves_nothing_elsewhere(tmp_path):
    """What the README does next (`rumi quicklook demo.rumi ...`) finds the demo's files where it runs."""
    here, temporary = tmp_path / "here", tmp_path / "tmp"
    here.mkdir(), temporary.mkdir()
    done = subprocess.run([sys.executable, "-m", "xarray_rumi.cli", "demo"], cwd=here, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "TMPDIR": str(temporary)})
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in here.iterdir()) == ["demo.rumi", "demo.rumi.header"]
    assert list(temporary.iterdir()) == []
    assert "wrote     ./demo.rumi: " in done.stdout and f"kept      both in {here}" in done.stdout
    xarray_rumi.validate(here / "demo.rumi", (here / "demo.rumi.header").read_bytes())


@pytest.mark.parametrize("missing", ["zarr", "numcodecs"])
def test_refs_without_the_zarr_extra_says_what_to_install(tmp_path, missing):
    path, _, _ = _written(tmp_path)
    done = rumi_without([missing], "refs", path, "-o", tmp_path / "refs.json", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert looked_for(done) == {missing}
    assert f"rumi refs: needs {missing}, which is not installed: {install_hint('zarr')}" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "refs.json").exists()


def test_help_names_the_extra_of_a_command_that_cannot_load(tmp_path):
    done = rumi_without(["zarr"], "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert " ".join(f"(needs: {install_hint('zarr')})".split()) in " ".join(done.stdout.split())
    for command in ("info", "validate", "header", "convert", "refs", "demo"):
        assert command in done.stdout


@pytest.mark.parametrize("missing", GEO_EXTRA)
def test_convert_without_the_geo_extra_says_what_to_install(tmp_path, missing):
    tifffile = pytest.importorskip("tifffile")
    source = tmp_path / "in.tif"
    tifffile.imwrite(source, np.arange(32 * 32, dtype=np.uint16).reshape(32, 32))
    done = rumi_without([missing], "convert", source, tmp_path / "out.rumi", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert missing in looked_for(done)
    assert f"rumi convert: needs {missing}, which is not installed: {install_hint('geo')}" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "out.rumi").exists()


def test_the_commands_run_with_their_extras(tmp_path):
    """The same runs with nothing refused succeed: what failed above was the missing module alone."""
    tifffile = pytest.importorskip("tifffile")
    path, _, _ = _written(tmp_path)
    refs = rumi_without(["nothing"], "refs", path, "-o", tmp_path / "refs.json", cwd=tmp_path)
    assert refs.returncode == 0, refs.stderr
    assert (tmp_path / "refs.json").exists()
    source = tmp_path / "in.tif"
    tifffile.imwrite(source, np.arange(32 * 32, dtype=np.uint16).reshape(32, 32))
    convert = rumi_without(["nothing"], "convert", source, tmp_path / "out.rumi", cwd=tmp_path)
    assert convert.returncode == 0, convert.stderr
    assert np.array_equal(xarray_rumi.open_image(tmp_path / "out.rumi").read()[0], tifffile.imread(source))


def _written(tmp_path):
    path = tmp_path / "scene.rumi"
    blob = xarray_rumi.write(path, np.arange(2 * 40 * 48, dtype=np.uint16).reshape(2, 40, 48), tile_size=16)
    return path, blob, None
