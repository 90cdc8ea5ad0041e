"""Coverage-guided fuzzing of the rumi read path with atheris (libFuzzer).

Run from the repository root (see ci/fuzz/README.md)::

    python ci/fuzz/fuzz_read.py ci/fuzz/corpus -max_total_time=60 -rss_limit_mb=1024 -timeout=10

An input is ``mode, file index, payload``.  The harness holds a few small
reference rasters (written at start-up, deterministically) and, by ``mode``:

0. reads ``payload`` as a damaged copy of reference file ``index``, through
   that file's sound blob (``xr.open_dataset`` and ``open_image().read()``);
1. reads ``payload`` as a file with no blob (the IFD path);
2. reads the sound reference file through ``payload`` as its blob;
3. decodes ``payload`` as a frame with the Zarr codec (``OpenZLCodec``).

Any outcome other than the exact reference values, ``RumiFormatError`` or
``OSError`` is a finding: the harness raises and libFuzzer saves the input.
The one documented exception (see docs/reliability.md) is a blob that names
another sample type of the same width, which reinterprets the same bytes.
"""

from __future__ import annotations

import os
import sys
import tempfile

import atheris

import numpy as np
import xarray as xr

# Coverage feedback from this project's code only: instrumenting numpy, pandas and
# xarray too costs minutes at start-up and steers the fuzzer into their code.
with atheris.instrument_imports(include=["xarray_rumi"]):
    import xarray_rumi
    from xarray_rumi import RumiFormatError
    from xarray_rumi.virtual.codec import OpenZLCodec
    from xarray_rumi.format.blob import Header
    from xarray_rumi.format.dtypes import sample_type_for_dtype

MODES = 4


def reference_rasters():
    """The rasters the inputs are damaged copies of: small, every frame unit, three sample types."""
    rng = np.random.default_rng(0)
    return [
        (rng.integers(0, 5000, (2, 20, 24)).astype(np.uint16), dict(tile_size=16)),
        ((rng.standard_normal((3, 9, 9)) * 100).astype(np.float32), dict(tile_size=8, frame_unit="cell")),
        (rng.integers(-100, 100, (1, 17, 5)).astype(np.int8), dict(tile_size=(8, 4), compression="portable")),
    ]


ROOT = tempfile.mkdtemp(prefix="rumi-fuzz-")
REFERENCES = []  # (file bytes, blob, values)
for i, (values, options) in enumerate(reference_rasters()):
    path = os.path.join(ROOT, f"ref{i}.rumi")
    blob = xarray_rumi.write(path, values, write_header=False, **options)
    with open(path, "rb") as f:
        REFERENCES.append((f.read(), blob, values))
WORK = os.path.join(ROOT, "input.rumi")


def seeds():
    """``(name, input)`` pairs: each mode on each reference, undamaged."""
    for index, (data, blob, _) in enumerate(REFERENCES):
        header = Header.from_bytes(blob)
        frame = data[header.offset(0): header.offset(1)]
        for mode, payload in enumerate((data, data, blob, frame)):
            yield f"mode{mode}-ref{index}", bytes([mode, index]) + payload


def _check(values: np.ndarray, expected: np.ndarray, *, blob: bytes | None = None, good_blob: bytes | None = None):
    if values.shape == expected.shape and values.dtype == expected.dtype and np.array_equal(values, expected, equal_nan=True):
        return
    if blob is not None and values.dtype != expected.dtype and values.tobytes() == expected.tobytes():
        bad, good = Header.from_bytes(blob), Header.from_bytes(good_blob)
        if (bad.grid, bad.packed) == (good.grid, good.packed):
            return  # the documented same-width sample type reinterpretation
    raise AssertionError(f"wrong values returned without an error (shape {values.shape}, dtype {values.dtype})")


def _read_all(path, header):
    yield xr.open_dataset(path, engine="rumi", header=header).band_data.values
    yield xarray_rumi.open_image(path, header).read()


def test_one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    mode, index, payload = data[0] % MODES, data[1] % len(REFERENCES), data[2:]
    original, blob, expected = REFERENCES[index]
    try:
        if mode in (0, 1):
            with open(WORK, "wb") as f:
                f.write(payload)
            for values in _read_all(WORK, blob if mode == 0 else None):
                _check(values, expected)
        elif mode == 2:
            with open(WORK, "wb") as f:
                f.write(original)
            for values in _read_all(WORK, payload):
                _check(values, expected, blob=payload, good_blob=blob)
        else:
            grid = Header.from_bytes(blob).grid
            codec = OpenZLCodec(sample_type=sample_type_for_dtype(expected.dtype).name,
                                chunk_shape=[grid.bands_per_frame, grid.tile_length, grid.tile_width],
                                image_shape=[grid.image_length, grid.image_width])
            codec.decode(payload)  # any chunk, exact or refused: no reference to compare a damaged frame with
    except (RumiFormatError, OSError):
        pass


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--write-seeds":
        corpus = sys.argv[2]
        os.makedirs(corpus, exist_ok=True)
        for name, payload in seeds():
            with open(os.path.join(corpus, name), "wb") as f:
                f.write(payload)
        return
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
