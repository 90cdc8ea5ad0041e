"""What verifying OpenZL's checksums costs when decoding frames.

Run from the repository root::

    python ci/benchmarks/checksum.py              # a few seconds on 2 cores
    python ci/benchmarks/checksum.py --tile 1024 --repeats 9

Frames of three kinds of 512 x 512 data (smooth terrain, terrain plus noise,
pure noise; uint16) are encoded as ``xarray_rumi.write`` encodes them
(``compression="auto"`` recipes and ``"portable"``), then decoded with
``xarray_rumi.frames.codec.decode_frame(..., verify=True)`` (the default: both
checksums) and ``verify=False``, interleaved on every repeat so machine noise
hits both alike.  Printed: decoded MB/s (best of ``--repeats``) and the ratio.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from xarray_rumi.frames.choose import plan_frames
from xarray_rumi.format.dtypes import sample_type_from_name
from xarray_rumi.format.grid import FrameGrid
from xarray_rumi.frames.codec import decode_frame

SAMPLE = sample_type_from_name("uint16")


def rasters(tile: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:tile, 0:tile] / tile
    terrain = (2000 + 800 * np.sin(3 * x) * np.cos(2 * y) + 300 * x * y).astype(np.uint16)
    noisy = (terrain + rng.integers(0, 64, terrain.shape)).astype(np.uint16)
    noise = rng.integers(0, 65535, terrain.shape, dtype=np.uint16)
    return {"terrain": terrain, "terrain+noise": noisy, "noise": noise}


def encoded(array: np.ndarray, compression: str) -> bytes:
    grid = FrameGrid(array.shape[1], array.shape[0], array.shape[1], array.shape[0], 1)
    stored = SAMPLE.encode(array[None])
    recipes = plan_frames(grid, lambda k: stored, compression)[1]
    return recipes[0].encode(stored)


def best_mbps(frame: bytes, shape, verify: bool, frames: int) -> float:
    started = time.perf_counter()
    for _ in range(frames):
        decode_frame(frame, SAMPLE, shape, verify=verify)
    return frames * int(np.prod(shape)) * SAMPLE.bytes_per_sample / (time.perf_counter() - started) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tile", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--frames", type=int, default=20, help="decodes per timing")
    args = parser.parse_args()
    print(f"{'data':<15}{'compression':<13}{'ratio':>7}{'verify MB/s':>13}{'no-verify MB/s':>16}{'cost':>8}")
    for name, array in rasters(args.tile).items():
        for compression in ("auto", "portable"):
            frame = encoded(array, compression)
            shape = (1, *array.shape)
            assert np.array_equal(decode_frame(frame, SAMPLE, shape)[0], array)
            best = {True: 0.0, False: 0.0}
            for _ in range(args.repeats):
                for verify in (True, False):
                    best[verify] = max(best[verify], best_mbps(frame, shape, verify, args.frames))
            cost = best[False] / best[True] - 1
            print(f"{name:<15}{compression:<13}{array.nbytes / len(frame):>7.2f}{best[True]:>13.0f}"
                  f"{best[False]:>16.0f}{cost:>+8.1%}")
    print("cost: extra decode time with verification, (no-verify MB/s / verify MB/s) - 1")


if __name__ == "__main__":
    main()
