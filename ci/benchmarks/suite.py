"""The performance suite: eight scenarios, each measured side by side in one run.

Run from the repository root::

    python ci/benchmarks/suite.py            # a few minutes on 2 cores; rewrites docs/benchmarks.md
    python ci/benchmarks/suite.py --quick    # ~1-2 minutes, smaller raster, fewer repetitions
    python ci/benchmarks/suite.py --only 1 5 # some scenarios; prints, does not touch the docs

1. full read (2 x 4096 x 4096 uint16, 512 px frames): ``open_dataset(chunks={})``
   on 1 and 2 threads vs the bare fetch+decode loop vs GeoTIFF through rioxarray;
2. random 256 px windows on the lazy backend (no Dask) vs decoding the frames they touch;
3. opening: with a blob (requests and time), without one (local, HTTP), 1,000 from a catalog;
4. a Cube of 200 small images: open, stack, reduce;
5. writing from memory and from Dask, ``auto`` and ``portable``, vs the bare encoder loop;
6. an image of 1,000,000 frames (blob only): lazy open time and memory, graph construction;
7. peak RSS of a full read relative to the result, each read in a fresh process;
8. Dask at scale: a Cube's mean over time (chunks ``{}``, ``auto``, blocks; threads and a
   LocalCluster) vs the bare fetch+decode+sum loop, a full read with ``chunks="auto"``, a Cube
   of 1,000 images of 1 x 10980 x 10980 from blobs (open, graph, memory, task size), peak RSS.

Times are medians of interleaved repetitions (every case once, then again),
so noise from other users of the machine hits all cases alike; only the
ratios are meant to be compared, never absolute times.  Every row names its
anchor and, where the project sets one, its target.  The generated part of
``docs/benchmarks.md`` sits between two markers; the hand-written analysis
around it is kept.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # read.py and the _*.py helpers, whether run as a script or not

import _dask_scenarios  # noqa: E402
import _open_scenarios  # noqa: E402
import _read_scenarios  # noqa: E402
import _write_scenarios  # noqa: E402
from _report import environment, markdown_table, text_table  # noqa: E402

DOCS = os.path.join(HERE, "..", "..", "docs", "benchmarks.md")
BEGIN, END = "<!-- suite.py: generated tables begin -->", "<!-- suite.py: generated tables end -->"

#: (title, sizes for --quick, sizes for the full run)
SIZES = {
    "quick": dict(size=2048, repeats=3, windows=15, catalog=300, cube=50, frames=1_000_000, write_size=2048,
                  dask_images=8, dask_size=1024, dask_cube=200, dask_repeats=3, dask_runs=3),
    "full": dict(size=4096, repeats=7, windows=60, catalog=1000, cube=200, frames=1_000_000, write_size=4096,
                 dask_images=24, dask_size=2048, dask_cube=1000, dask_repeats=3, dask_runs=3),
}
TITLES = {
    1: "1. Full read", 2: "2. Random 256 px windows", 3: "3. Opening", 4: "4. Cube of small images",
    5: "5. Writing", 6: "6. Scale: an image of 1,000,000 frames", 7: "7. Peak memory of a full read",
    8: "8. Dask at scale",
}


def run(scenarios: list[int], sizes: dict, root: str) -> dict[int, tuple[str, list, float]]:
    """Run the chosen scenarios; ``{number: (title, rows, seconds taken)}``."""
    results = {}
    raster = None
    if {1, 2, 3, 7} & set(scenarios):
        raster = _read_scenarios.make(root, bands=2, size=sizes["size"])
    shape = f"2 x {sizes['size']} x {sizes['size']} uint16, 512 px tile frames"
    for number in scenarios:
        start = time.perf_counter()
        if number == 1:
            rows, title = _read_scenarios.full_read(raster, sizes["repeats"]), f"{TITLES[1]} ({shape})"
        elif number == 2:
            rows, title = _read_scenarios.windows(raster, sizes["windows"]), f"{TITLES[2]} ({shape})"
        elif number == 3:
            rows = _open_scenarios.opening(root, raster.rumi, raster.blob, sizes["repeats"], sizes["catalog"])
            title = f"{TITLES[3]} ({shape}; catalog of {sizes['catalog']} images of 2 x 64 x 64)"
        elif number == 4:
            rows, title = _open_scenarios.cube(root, sizes["cube"], sizes["repeats"]), \
                f"{TITLES[4]} ({sizes['cube']} images)"
        elif number == 5:
            values = raster.values if raster is not None and sizes["write_size"] == sizes["size"] else \
                _read_scenarios.make_raster(2, sizes["write_size"])
            rows = _write_scenarios.writing(root, values, sizes["repeats"])
            title = f"{TITLES[5]} (2 x {sizes['write_size']} x {sizes['write_size']} uint16, 512 px frames)"
        elif number == 6:
            rows, title = _open_scenarios.huge(root, sizes["frames"], sizes["repeats"]), TITLES[6]
        elif number == 7:
            rows, title = _read_scenarios.peak_memory(raster, root), f"{TITLES[7]} ({shape})"
        elif number == 8:
            rows = _dask_scenarios.dask_at_scale(root, sizes, raster)
            title = (f"{TITLES[8]} (Cube of {sizes['dask_images']} x 2 x {sizes['dask_size']}^2; one image of "
                     f"{shape}; {sizes['dask_cube']:,} and {10 * sizes['dask_cube']:,} images of 1 x 10980 x 10980 uint16)")
        else:
            raise SystemExit(f"no scenario {number}")
        results[number] = (title, rows, time.perf_counter() - start)
        print(f"\n## {title}  [{results[number][2]:.0f} s]\n{text_table(rows)}", flush=True)
    return results


def write_docs(results: dict, header_lines: list[str]) -> None:
    """Replace the generated part of docs/benchmarks.md, keeping the hand-written rest."""
    generated = [BEGIN, "", *[f"- {line}" for line in header_lines], ""]
    for title, rows, seconds in results.values():
        generated += [f"### {title}", "", markdown_table(rows), ""]
    generated.append(END)
    try:
        with open(DOCS) as f:
            text = f.read()
    except FileNotFoundError:
        text = f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        text = text.rstrip() + f"\n\n{BEGIN}\n{END}\n"
    before, rest = text.split(BEGIN, 1)
    after = rest.split(END, 1)[1]
    with open(DOCS, "w") as f:
        f.write(before + "\n".join(generated) + after)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer repetitions (~2 minutes)")
    parser.add_argument("--only", type=int, nargs="+", choices=sorted(TITLES), help="run these scenarios only")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    mode = "quick" if args.quick else "full"
    sizes = SIZES[mode]
    scenarios = args.only or sorted(TITLES)
    started = time.perf_counter()
    header_lines = [f"run: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
                    f"`suite.py{' --quick' if args.quick else ''}`, median of {sizes['repeats']} interleaved "
                    "repetitions (windows: median over the windows)", *environment()]
    print("\n".join(header_lines))
    with tempfile.TemporaryDirectory(prefix="rumi-suite-") as root:
        results = run(scenarios, sizes, root)
    total = time.perf_counter() - started
    header_lines.append(f"whole run: {total:.0f} s")
    print(f"\nwhole run: {total:.0f} s")
    if not args.no_docs and not args.only:
        write_docs(results, header_lines)
        print(f"wrote {os.path.normpath(DOCS)}")


if __name__ == "__main__":
    main()
