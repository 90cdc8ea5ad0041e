"""What a user sees of the package: ``dir(xarray_rumi)`` and ``from xarray_rumi import *``.

Some public names load on first use (their modules need the ``zarr`` extra);
they are public all the same, so ``dir()`` (and so tab completion) lists them,
and it does not list what the package's own imports leave behind.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import pytest

import xarray_rumi

LAZY = ("open_cube", "open_catalog", "open_collection", "references", "RumiParser", "build_catalog", "convert")
#: Names the package's imports used to leave in its namespace.
LEAKED = ("version", "PackageNotFoundError", "importlib", "metadata")
#: Short names that reached a module as an attribute only (``import xarray_rumi.catalog`` failed); dropped.
#: (``xarray_rumi.convert`` is the conversion function now: tests/test_public_surface.py.)
DROPPED_ALIASES = ("catalog", "collection")


def test_dir_lists_every_public_name_lazy_ones_included():
    names = dir(xarray_rumi)
    assert set(xarray_rumi.__all__) <= set(names)
    assert set(LAZY) <= set(names)
    assert "stac" in names   # the submodule users reach by its name: xarray_rumi.stac.item(...)


def test_dir_lists_no_imported_helpers_nor_internal_subpackages():
    names = set(dir(xarray_rumi))
    assert not names & set(LEAKED)
    assert not names & {"reading", "format", "frames", "io", "writing", "dataset", "accessor", "errors"}


def test_every_module_dir_lists_imports_by_that_name():
    pytest.importorskip("zarr")   # dir() lists references and RumiParser, which live with the zarr extra
    modules = {name: value for name in dir(xarray_rumi)
               if isinstance(value := getattr(xarray_rumi, name), types.ModuleType)}
    assert modules, "dir(xarray_rumi) lists no submodule"
    for name, module in modules.items():
        assert importlib.import_module(f"xarray_rumi.{name}") is module


@pytest.mark.parametrize("name", DROPPED_ALIASES)
def test_no_module_is_an_attribute_that_cannot_be_imported(name):
    """A module has one name, its own: ``xarray_rumi.dataset.catalog``, not ``xarray_rumi.catalog`` as well."""
    with pytest.raises(AttributeError):
        getattr(xarray_rumi, name)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"xarray_rumi.{name}")


def test_every_name_dir_lists_resolves_after_a_plain_import():
    """In a fresh interpreter, where no other test has imported a submodule for us."""
    pytest.importorskip("zarr")   # references and RumiParser live with the zarr extra
    done = subprocess.run([sys.executable, "-c", "import xarray_rumi\n"
                           "for name in dir(xarray_rumi): getattr(xarray_rumi, name)"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_star_import_gives_the_lazy_names():
    pytest.importorskip("zarr")
    namespace: dict = {}
    exec("from xarray_rumi import *", namespace)
    for name in LAZY:
        assert namespace[name] is getattr(xarray_rumi, name)
    assert not set(namespace) & set(LEAKED)


#: Run in a fresh interpreter where zarr cannot be found, as in an install without the zarr extra.
WITHOUT_ZARR = """
import importlib.abc, sys
class NoZarr(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("zarr", "numcodecs"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoZarr())
"""


@pytest.mark.parametrize("use", ["help(xarray_rumi)", "from xarray_rumi import *", "[getattr(xarray_rumi, n) for n in dir(xarray_rumi)]"])
def test_help_and_star_import_work_without_the_zarr_extra(use):
    # pydoc and import * fetch every name listed; the zarr-only ones are left out of the lists there
    code = WITHOUT_ZARR + "import io, contextlib, xarray_rumi\nwith contextlib.redirect_stdout(io.StringIO()):\n    " + use
    done = subprocess.run([sys.executable, "-c", code + "\nprint(sorted(set(dir(xarray_rumi)) & {'references', 'RumiParser', 'open_cube'}))"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['open_cube']"
