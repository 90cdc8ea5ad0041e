"""``rumi`` in a fresh interpreter where the modules of some extras are not found, as when they are not installed.

Every finder on ``sys.meta_path`` is wrapped so that it finds nothing of
them, so ``import zarr`` raises the ModuleNotFoundError Python raises for a
missing module and ``importlib.util.find_spec("zarr")`` (how xarray probes
its backends) is None.  Their installed metadata stays visible, so xarray
may warn that the rasterio engine (rioxarray's entry point) failed to load;
a plain install has neither.
"""

from __future__ import annotations

import subprocess
import sys

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
    """``rumi ARGS...`` run in ``cwd`` with ``modules`` not installed."""
    return subprocess.run([sys.executable, "-c", WITHOUT, ",".join(modules), *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def looked_for(done: subprocess.CompletedProcess) -> set[str]:
    """The hidden modules the run tried to import."""
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("looked for:"), done.stderr
    return set(filter(None, last.removeprefix("looked for:").strip().split(",")))
