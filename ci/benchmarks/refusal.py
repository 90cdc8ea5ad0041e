"""What refusing a blob that claims an absurd image costs, beside refusing a small claim.

Run from the repository root::

    python ci/benchmarks/refusal.py              # a few seconds
    python ci/benchmarks/refusal.py --repeats 51

A 28-byte blob can claim 10**19 samples; it must be refused from its fields
alone, before anything proportional to the claim is done.  The tests check
this by counting the Python steps (tests/format/test_blob.py,
tests/reliability/test_integrity.py); this prints the times.  Each huge claim
is timed beside the same kind of claim scaled down to just over a smaller
``Limits``, through ``Header.from_bytes`` and through ``xr.open_dataset``
(``georeferencing=False``: nothing is read, the file is empty), cases
interleaved on every repeat.  A ratio near 1 means the size claimed costs
nothing.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import tempfile

import xarray as xr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _report, run as a script or not

from _report import interleaved, text_table, time_row  # noqa: E402

from xarray_rumi import Limits, RumiFormatError  # noqa: E402
from xarray_rumi.format.blob import Header  # noqa: E402


def claim(width: int, length: int, tile: int, bands: int = 1, bits: int = 8, fmt: int = 1) -> bytes:
    return struct.pack("<IHIIHHHBBBIB", 0x45564F4C, 1, width, length, tile, tile, bands, bits, fmt, 0, 1, 0)


#: (case, huge claim, the same kind of claim scaled down, the Limits that refuse the small one)
CLAIMS = [
    ("1.8e19 samples, 4.3e9 frames", claim(2**32 - 1, 2**32 - 1, 65535), claim(100, 100, 1), Limits(max_frames=1000)),
    ("1.8e19 one-pixel frames", claim(2**32 - 1, 2**32 - 1, 1), claim(100, 100, 1), Limits(max_frames=1000)),
    ("2.2 PB frames", claim(65535, 65535, 65535, bands=65535, bits=64, fmt=3),
     claim(64, 64, 64, bands=3, bits=64, fmt=3), Limits(max_frame_bytes=1024)),
]


def refusing(open_blob, blob: bytes, limits: Limits):
    def run() -> None:
        try:
            open_blob(blob, limits)
        except RumiFormatError:
            return
        raise AssertionError("the claim was not refused")

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    path = os.path.join(tempfile.mkdtemp(prefix="rumi-refusal-"), "claim.rumi")
    open(path, "wb").close()
    openers = {
        "Header.from_bytes": lambda blob, limits: Header.from_bytes(blob, limits),
        "xr.open_dataset": lambda blob, limits: xr.open_dataset(path, engine="rumi", header=blob,
                                                                 georeferencing=False, limits=limits),
    }
    rows = []
    for opener, open_blob in openers.items():
        for case, huge, small, limits in CLAIMS:
            cases = {"small": refusing(open_blob, small, limits), "huge": refusing(open_blob, huge, Limits())}
            # Many refusals per timing: one takes microseconds, below the clock's useful resolution.
            times = interleaved({name: lambda run=run: [run() for _ in range(200)] for name, run in cases.items()},
                                args.repeats)
            rows.append(time_row(f"{opener}: {case}", times["huge"] / 200, "same claim, scaled down",
                                 times["small"] / 200, note=f"scaled down: {times['small'] / 200 * 1e6:.1f} us"))
    print(text_table(rows))
    print("value: one refusal; ratio: the huge claim's time over the scaled-down claim's (1 = the size costs nothing)")


if __name__ == "__main__":
    main()
