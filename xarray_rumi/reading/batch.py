"""Many windows of one size across many images in one call: a training batch (docs/backend.md, "Over HTTP")."""

from __future__ import annotations

import functools
import operator
import threading

import numpy as np

from ..format.grid import FrameUnit
from ..runtime.scratch import FRAME, scratch
from ..runtime.threads import computing_threads, share_work
from .buffers import result_array
from .checked import pair_digest

#: Remote images whose frames are fetched at once: one round trip for a batch of 64 chips from as many images.
REMOTE_FETCHES_AT_ONCE = 64


def read_windows(pairs, bands=None, *, out: np.ndarray | None = None) -> np.ndarray:
    """``(N, B, height, width)`` pixels of N ``(image, window)`` pairs, windows ``(row, col, height, width)``.

    Windows share one size and lie inside their images, which share one sample type, else ``ValueError``.
    ``bands`` count from 1 (default: all); ``out`` (of the result's shape and dtype) receives the pixels.

    >>> import numpy as np, tempfile, os, xarray_rumi
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob = xarray_rumi.write(path, np.arange(2 * 8 * 8, dtype="uint8").reshape(2, 8, 8), tile_size=4)
    >>> image = xarray_rumi.open_image(path, header=blob)
    >>> chips = read_windows([(image, (0, 0, 2, 2)), (image, (5, 3, 2, 2))], bands=[2])
    >>> chips.shape, chips[1, 0].tolist()
    ((2, 1, 2, 2), [[107, 108], [115, 116]])
    """
    pairs = list(pairs)
    if not pairs:
        raise ValueError("read_windows needs at least one (image, window) pair: the batch's size comes from them")
    images, slots = _group_by_image(pairs)
    windows = _checked_windows([window for _, window in pairs], [image for image, _ in pairs])
    band_indices = _checked_bands(bands, images)
    dtype = _one_dtype(images)
    height, width = int(windows[0, 2]), int(windows[0, 3])
    shape = (len(pairs), band_indices.size, height, width)
    out = _checked_out(out, shape, dtype)
    # no more decoding than cores, so the event loop receiving remote bytes keeps its share of the CPU
    decoders = threading.Semaphore(computing_threads())
    plans = [_ImagePlan(image, windows[members], members, band_indices, out, decoders) for image, members in
             zip(images, slots)]
    share_work(_decode_batches(plans), _prepared, threads=_threads(plans),
               at_most=sum(plan.frames.size for plan in plans))
    return out


def _group_by_image(pairs) -> tuple[list, list[np.ndarray]]:
    """The distinct images (equal ones once: one file, one blob) and, for each, its pairs' positions."""
    keys: dict[int, bytes] = {}
    groups: dict[bytes, tuple] = {}
    for slot, pair in enumerate(pairs):
        try:
            image, _ = pair
        except (TypeError, ValueError):
            raise ValueError(f"pair {slot} is {pair!r}, not an (image, window) pair") from None
        if id(image) not in keys:
            # not the file's version: asking it may take a request
            keys[id(image)] = pair_digest(image.source, image.header)
        groups.setdefault(keys[id(image)], (image, []))[1].append(slot)
    return [image for image, _ in groups.values()], [np.asarray(slots, np.int64) for _, slots in groups.values()]


def _checked_windows(windows, images) -> np.ndarray:
    for i, window in enumerate(windows):
        try:
            if len([operator.index(v) for v in window]) == 4:
                continue
        except TypeError:
            pass
        raise ValueError(f"window {i} is {window!r}, not four integers (row, col, height, width)")
    array = np.asarray(windows, dtype=np.int64).reshape(-1, 4)
    rows, cols, heights, widths = array.T
    if heights[0] < 1 or widths[0] < 1:
        raise ValueError(f"window 0 is {tuple(array[0].tolist())}: a window is at least 1 x 1 px")
    other = np.flatnonzero((heights != heights[0]) | (widths != widths[0]))
    if other.size:
        i = int(other[0])
        raise ValueError(f"window {i} is {heights[i]} x {widths[i]} px, window 0 is {heights[0]} x {widths[0]} px: "
                         "the windows of a batch have one size")
    lengths = np.array([image.grid.image_length for image in images])
    image_widths = np.array([image.grid.image_width for image in images])
    outside = np.flatnonzero((rows < 0) | (cols < 0) | (rows + heights > lengths) | (cols + widths > image_widths))
    if outside.size:
        i = int(outside[0])
        raise ValueError(f"window {i} {tuple(array[i].tolist())} (row, col, height, width) lies outside "
                         f"{images[i].source.url}, which is {lengths[i]} rows x {image_widths[i]} columns")
    return array


def _checked_bands(bands, images) -> np.ndarray:
    counts = {image.grid.samples_per_pixel for image in images}
    if bands is None:
        if len(counts) > 1:
            raise ValueError(f"the images have {sorted(counts)} bands: name the bands to read with bands=")
        return np.arange(counts.pop(), dtype=np.int64)
    try:
        numbers = [operator.index(b) for b in bands]
    except TypeError:
        raise ValueError(f"bands={bands!r}: band numbers are integers counted from 1") from None
    fewest = min(counts)
    outside = [b for b in numbers if not 1 <= b <= fewest]
    if not numbers or outside:
        raise ValueError(f"bands={bands!r}: band numbers count from 1 to {fewest}, the bands every image has"
                         + (f" ({outside} are not)" if outside else ""))
    if len(set(numbers)) != len(numbers):
        raise ValueError(f"bands={bands!r} names a band twice")
    return np.asarray(numbers, dtype=np.int64) - 1


def _one_dtype(images) -> np.dtype:
    dtypes = {image.sample_type.dtype for image in images}
    if len(dtypes) > 1:
        raise ValueError(f"the images read as {sorted(map(str, dtypes))}: a batch's images share one sample type")
    return dtypes.pop()


def _checked_out(out, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if out is None:
        return result_array(shape, dtype)
    if not isinstance(out, np.ndarray):
        raise ValueError(f"out= is a {type(out).__name__}, not a numpy array (np.from_dlpack or .numpy() gives one)")
    if out.shape != shape or out.dtype != dtype:
        raise ValueError(f"out= is {out.shape} {out.dtype}; this batch is {shape} {dtype}")
    if not out.flags.writeable:
        raise ValueError("out= is read-only")
    return out


class _ImagePlan:
    """One image's distinct frames and their placements (columns of lists): ``bounds[i]:bounds[i + 1]`` place
    ``frames[i]``, ``whole[i]`` (or -1) holds it whole; ``out_band`` is ``None`` for cells (``frame_bands`` picks)."""

    def __init__(self, image, windows: np.ndarray, slots: np.ndarray, band_indices: np.ndarray, out: np.ndarray,
                 decoders: threading.Semaphore):
        self.image, self.out, self.decoders = image, out, decoders
        grid = image.grid
        rows, cols, height, width = windows[:, 0], windows[:, 1], int(windows[0, 2]), int(windows[0, 3])
        y_index, y_valid, ys = _axis_spans(rows, height, grid.tile_length, grid.image_length)
        x_index, x_valid, xs = _axis_spans(cols, width, grid.tile_width, grid.image_width)
        window, iy, ix = np.nonzero(y_valid[:, :, None] & x_valid[:, None, :])
        y, x = ys[:, window, iy], xs[:, window, ix]
        position = y_index[window, iy] * grid.tiles_across + x_index[window, ix]
        whole = (y[2] == 0) & (y[3] == y[4]) & (x[2] == 0) & (x[3] == x[4])
        columns = [slots[window], *y, *x]
        if grid.frame_unit is FrameUnit.CELL:
            frames, out_band = position, None
            every_band = np.array_equal(band_indices, np.arange(grid.samples_per_pixel))
            whole &= every_band
            self.frame_bands = slice(None) if every_band else band_indices
        else:
            bands = band_indices.size
            frames = (position[:, None] * grid.samples_per_pixel + band_indices[None, :]).reshape(-1)
            out_band = np.tile(np.arange(bands), position.size)
            columns, whole = [np.repeat(c, bands) for c in columns], np.repeat(whole, bands)
            self.frame_bands = slice(None)
        order = np.argsort(frames, kind="stable")
        self.frames, first = np.unique(frames[order], return_index=True)
        self.bounds = [*first.tolist(), frames.size]
        whole = whole[order]
        first_whole = np.minimum.reduceat(np.where(whole, np.arange(whole.size), whole.size), first)
        self.whole = np.where(first_whole < np.append(first[1:], whole.size), first_whole, -1).tolist()
        (self.slot, self.out_y0, self.out_y1, self.in_y0, self.in_y1, heights,
         self.out_x0, self.out_x1, self.in_x0, self.in_x1, widths) = [c[order].tolist() for c in columns]
        self.out_band = None if out_band is None else out_band[order].tolist()
        self.shapes = [(grid.bands_per_frame, heights[j], widths[j]) for j in first.tolist()]


def _axis_spans(starts: np.ndarray, length: int, tile: int, extent: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Along one axis, for each window and each frame row (or column) it may touch: which, whether it does, and
    its part: ``(out_start, out_stop, in_start, in_stop, frame size)`` stacked."""
    first = starts // tile
    count = (starts + length - 1) // tile - first + 1
    index = first[:, None] + np.arange(int(count.max()))[None, :]
    frame_start = index * tile
    size = np.minimum(tile, extent - frame_start)
    low = np.maximum(frame_start, starts[:, None])
    high = np.minimum(frame_start + size, starts[:, None] + length)
    parts = np.stack([low - starts[:, None], high - starts[:, None], low - frame_start, high - frame_start, size])
    return index, np.arange(index.shape[1])[None, :] < count[:, None], parts


def _threads(plans: list[_ImagePlan]) -> int | None:
    """One thread a remote image (up to a bound), so every image's requests go out at once."""
    remote = sum(not plan.image.source.is_local for plan in plans)
    return max(computing_threads(), min(remote, REMOTE_FETCHES_AT_ONCE)) if remote else None


def _decode_batches(plans: list[_ImagePlan]):
    """``(plan, part, starts, stops)``: each remote image's frames whole (first), local ones a few MiB at a time."""
    for plan in sorted(plans, key=lambda plan: plan.image.source.is_local):
        if plan.image.source.is_local:
            yield from ((plan, *batch) for batch in plan.image.batches(plan.frames))
        else:
            yield plan, slice(0, plan.frames.size), *plan.image.header.ranges(plan.frames)


def _prepared(batch) -> list:
    plan, part, starts, stops = batch
    first, frames = part.start, plan.frames[part].tolist()

    def place(j: int, payload) -> None:
        with plan.decoders:
            _decode_frame(plan, first + j, frames[j], payload)

    rest = plan.image.fetch_as_ready(starts, stops, place)
    return [functools.partial(place, j, payload) for j, payload in rest]


def _decode_frame(plan: _ImagePlan, i: int, index: int, payload) -> None:
    """Decode ``plan.frames[i]`` into its placements, straight into the result where one holds it whole."""
    out, slot, band = plan.out, plan.slot, plan.out_band
    y0, y1, fy0, fy1 = plan.out_y0, plan.out_y1, plan.in_y0, plan.in_y1
    x0, x1, fx0, fx1 = plan.out_x0, plan.out_x1, plan.in_x0, plan.in_x1

    def target(j: int) -> np.ndarray:
        bands = slice(None) if band is None else slice(band[j], band[j] + 1)
        return out[slot[j], bands, y0[j]:y1[j], x0[j]:x1[j]]

    whole = plan.whole[i]
    decoded = plan.image.decode(index, payload, out=target(whole) if whole >= 0 else
                                scratch(FRAME, plan.shapes[i], out.dtype))
    for j in range(plan.bounds[i], plan.bounds[i + 1]):
        if j != whole:
            target(j)[...] = decoded[plan.frame_bands, fy0[j]:fy1[j], fx0[j]:fx1[j]]


__all__ = ["REMOTE_FETCHES_AT_ONCE", "read_windows"]
