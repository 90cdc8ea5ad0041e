"""Choosing how to compress frames: lossless recipes, chosen by measuring.

Every rumi frame is self-contained, so the writer may pick a recipe per frame.
``"auto"`` measures every GeoZL/OpenZL graph on small windows of a few sample
frames, lets the few best compete on larger windows of the same samples, and
encodes the frames with the winner; ``"portable"`` lets the graphs that use
only OpenZL's built-in codecs compete the same way.  Ties go to the simpler
(faster) recipe, deterministically, so the same data always gives the same
bytes.  ``"lossy:<error>"`` is the only way to lose information: it chooses
as ``auto`` does among GeoZL's quantising graphs, and the error bound lives
in each frame, the one place the spec allows.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

import geozl
import numpy as np
import openzl.ext

from .codec import FORMAT_VERSION, PORTABLE_RECIPES, PROCESS_CACHE, ThreadCache, applicable, encode_frame
from .measure import Measurer

logger = logging.getLogger(__name__)

#: How many of the best sample-frame recipes each frame chooses among (each costs one encode).
FINALISTS = 1
SAMPLE_FRAMES = 3
#: The quick pass sees this many rows x columns at the centre of each sample, stacked as planes.
QUICK_WINDOW = 40
#: The backend the quick pass first tries with every predictor, the first of these it has:
#: general-purpose LZ, which ranks predictors by how small and regular their residuals are
#: (on byte planes where the elements have several bytes: faster, and as telling).
REFERENCE_BACKENDS = ("transpose>zstd", "zstd")
#: The best predictors by their reference, tried with every other backend too; one more for
#: one-byte elements, whose only reference (plain zstd) ranks predictors less surely.
PREDICTORS = 2
#: Quick windows whose best frame is smaller than this are nearly empty (mostly frame header, as
#: in flat or few-valued regions): they cannot rank graphs, so the trial window ranks them all.
QUICK_MIN_BYTES = 1024
#: How many graphs, distinct in size on the quick windows, go on to the trial window.
SHORTLIST = 4
#: The shortlist is tried on this many rows x columns at the centre of the middle sample.
TRIAL_WINDOW = 128
#: How many of the shortlist, best on the trial window, compete on the profile windows.
CONTENDERS = 2
#: The same for ``"portable"``, whose five recipes are its shortlist.
PORTABLE_CONTENDERS = 3
#: The contenders compete on this many rows x columns at the centre of each sample.
PROFILE_WINDOW = 256
#: Terminal codecs that need an OpenZL frame format newer than the pinned one.
_UNPINNED_CODECS = ("pivco", "sparse")
#: Always applicable, always at the pinned version: the last resort for any frame.
FALLBACK = "id>zstd"


@dataclass(frozen=True)
class Recipes:
    """The recipes a frame may be encoded with, best first.

    Each candidate is a GeoZL recipe, optionally ending in ``"@interband"``:
    a cell frame then predicts each band from the previous one.

    >>> import numpy as np
    >>> r = Recipes(("id>zstd",))
    >>> len(r.encode(np.zeros((1, 8, 8), np.uint8))) > 0
    True
    """

    candidates: tuple[str, ...]
    error: float | str | None = None  # a GeoZL error bound: lossy; None: lossless
    compressor: bytes | None = None  # a serialised openzl.ext.Compressor, used instead of candidates

    def encode(self, stored: np.ndarray, cache: ThreadCache | None = None) -> bytes:
        """The smallest frame among the candidates (the first on a tie); graphs are kept in ``cache``."""
        if self.compressor is not None:
            return _encode_with_compressor(stored, self.compressor, cache or PROCESS_CACHE)
        best = None
        for candidate in self.candidates:
            try:
                frame = _encode(stored, candidate, self.error, cache)
            except RuntimeError:  # the recipe does not apply to this frame
                continue
            if best is None or len(frame) < len(best):
                best = frame
        return best if best is not None else encode_frame(stored, FALLBACK, cache=cache)


INTERBAND = "@interband"


def _encode(stored: np.ndarray, candidate: str, error=None, cache: ThreadCache | None = None) -> bytes:
    recipe, _, geometry = candidate.partition("@")
    return encode_frame(stored, recipe, interband=bool(geometry), error=error, cache=cache)


def _encode_with_compressor(stored: np.ndarray, serialized: bytes, cache: ThreadCache) -> bytes:
    """One frame through a caller's OpenZL graph, at the pinned format version, with checksums."""
    cctx, _ = cache.get(("openzl", serialized), lambda: _compression_context(serialized))
    values = np.require(stored, requirements=("C", "A")).reshape(-1)
    frame = cctx.compress([openzl.ext.Input(openzl.ext.Type.Numeric, values)])
    if frame[0] != 0xC0 + FORMAT_VERSION:
        raise RuntimeError(f"the OpenZL graph wrote format version {frame[0] - 0xC0}, not the pinned {FORMAT_VERSION}")
    return frame


def _compression_context(serialized: bytes):
    """``(context, compressor)`` for a serialised OpenZL graph: the context refers to the compressor, keep both alive."""
    compressor = openzl.ext.Compressor()
    compressor.deserialize(serialized)
    cctx = openzl.ext.CCtx()
    cctx.ref_compressor(compressor)
    # parameters otherwise reset after each frame, and the context then refuses the next one
    cctx.set_parameter(openzl.ext.CParam.StickyParameters, 1)
    cctx.set_parameter(openzl.ext.CParam.FormatVersion, FORMAT_VERSION)
    cctx.set_parameter(openzl.ext.CParam.ContentChecksum, 1)
    return cctx, compressor


def lossy_error(compression: str):
    """The error bound of a ``"lossy:<error>"`` compression, else ``None``.

    >>> lossy_error("lossy:0.5"), lossy_error("lossy:1%"), lossy_error("auto")
    (0.5, '1%', None)
    """
    if not isinstance(compression, str) or not compression.startswith("lossy:"):
        return None
    spec = compression[len("lossy:"):]
    try:
        value = float(spec)
    except ValueError:
        return spec
    if not value > 0:
        raise ValueError(f"a lossy error bound must be greater than zero, got {spec!r}")
    return value


def _simplicity(recipe: str) -> tuple[int, str]:
    # Fewer stages decode faster; the name breaks the remaining ties stably.
    return (recipe.count(">"), recipe)


def _as_raster(stored: np.ndarray) -> np.ndarray:
    bands, h = stored.shape[:2]
    return np.ascontiguousarray(stored).reshape(bands, h, -1)


def _central_window(stored: np.ndarray, size: int = PROFILE_WINDOW) -> np.ndarray:
    h, w = stored.shape[1:3]
    y0, x0 = max(0, (h - size) // 2), max(0, (w - size) // 2)
    return stored[:, y0:y0 + size, x0:x0 + size]


def _quick_raster(samples: list[np.ndarray]) -> np.ndarray:
    """The quick windows of the samples as one raster of planes (edge samples smaller than the first left out)."""
    windows = [_as_raster(_central_window(s, QUICK_WINDOW)) for s in samples]
    return np.concatenate([w for w in windows if w.shape == windows[0].shape])


@functools.cache
def _graph_names(storage: str, error) -> tuple[str, ...]:
    """Every GeoZL graph for elements of ``storage`` at the pinned version: a property of geozl, not of data."""
    ramp = (np.arange(256) % 61).astype(storage).reshape(1, 16, 16)
    rows = geozl.profile(ramp, prior=None, reps=1, planes=1, error=error)
    return tuple(sorted((row["graph"] for row in rows if not any(c in row["graph"] for c in _UNPINNED_CODECS)),
                        key=_simplicity))


def _distinct_best(sizes: dict[str, int], count: int, *, by=None) -> list[str]:
    """The ``count`` smallest, simplest first on a tie, one graph per size (or per ``by(graph)``).

    Graphs that encode the quick windows to exactly the same length are, as a
    rule, the same encoding under two names (for one-byte samples GeoZL's
    ``field_lz`` and ``zstd`` backends coincide): keeping both would waste
    a place on the shortlist.
    """
    kept, seen = [], set()
    for graph in sorted(sizes, key=lambda g: (sizes[g], *_simplicity(g))):
        key = by(graph) if by else sizes[graph]
        if key not in seen:
            seen.add(key)
            kept.append(graph)
        if len(kept) == count:
            break
    return kept


def _fixed(compression) -> Recipes | None:
    """The recipes of a ``compression`` that needs no measuring, else ``None`` (it is chosen)."""
    if isinstance(compression, openzl.ext.Compressor):
        # Compressors hold native state; their serialised form travels to Dask workers.
        return Recipes((), compressor=compression.serialize())
    if compression in ("auto", "portable") or lossy_error(compression) is not None:
        return None
    if not isinstance(compression, str) or ">" not in compression:
        raise ValueError(
            "compression must be 'auto', 'portable', 'lossy:<error>' or a GeoZL recipe such as "
            f"'planar>zigzag>zstd', got {compression!r}"
        )
    return Recipes((compression,))


def choose(samples: list[np.ndarray], compression: str, *, workers: int = 1) -> Recipes:
    """The :class:`Recipes` for ``compression`` given sample frames of storage elements.

    ``compression`` is ``"auto"``, ``"portable"``, ``"lossy:<error>"``, a
    GeoZL recipe string such as ``"planar>zigzag>zstd"`` (used for every frame
    as given), or an ``openzl.ext.Compressor`` with its starting graph
    selected (every frame goes through that graph, as one numeric stream).
    ``workers`` threads measure.

    >>> import numpy as np
    >>> ramp = np.tile(np.arange(64, dtype=np.uint16), (1, 64, 1))
    >>> choose([ramp], "portable").candidates[0] in PORTABLE_RECIPES
    True
    """
    return _choose_each([samples], compression, workers)[0]


def _choose_each(sample_sets: list[list[np.ndarray]], compression, workers: int) -> list[Recipes]:
    """One :class:`Recipes` per list of sample frames, all measured together on one pool."""
    fixed = _fixed(compression)
    if fixed is not None:
        return [fixed] * len(sample_sets)
    error = lossy_error(compression)
    trial_windows = [_central_window(samples[len(samples) // 2], TRIAL_WINDOW) for samples in sample_sets]
    measurer = Measurer(workers, functools.partial(_encode, error=error))
    if compression == "portable":
        shortlists = [[r for r in PORTABLE_RECIPES if applicable(r, samples[0].dtype)] for samples in sample_sets]
        contenders = PORTABLE_CONTENDERS
    else:
        shortlists = _shortlists(sample_sets, trial_windows, compression, error, measurer)
        contenders = CONTENDERS
    # the shortlist on the middle sample's trial window, the best of it on every profile window
    trials = _measure_all(measurer, trial_windows, shortlists)
    finals = [sorted(sizes, key=lambda g: (sizes[g], *_simplicity(g)))[:contenders] for sizes in trials]
    windows = [[_central_window(s) for s in samples] for samples in sample_sets]
    sizes = iter(measurer.sizes([(w, c) for ws, final in zip(windows, finals) for c in final for w in ws]))
    chosen = []
    for ws, final in zip(windows, finals):
        totals = {}
        for candidate in final:
            lengths = [next(sizes) for _ in ws]
            if None not in lengths:
                totals[candidate] = sum(lengths)
        ranked = sorted(totals, key=lambda g: (totals[g], *_simplicity(g)))
        chosen.append(Recipes(tuple(ranked[:FINALISTS]) or (FALLBACK,), error))
    return chosen


def _predictor(candidate: str) -> str:
    """The part of a GeoZL graph before its backend: ``"med>zigzag"`` of ``"med>zigzag>transpose>zstd"``."""
    recipe, at, geometry = candidate.partition("@")
    stages = recipe.split(">")
    head = stages[:2] if len(stages) > 2 and stages[1] == "zigzag" else stages[:1]
    return ">".join(head) + at + geometry


def _backend(candidate: str) -> str:
    recipe = candidate.partition("@")[0]
    return recipe[len(_predictor(recipe)) + 1:]


def _shortlists(sample_sets, trial_windows, compression, error, measurer: Measurer) -> list[list[str]]:
    """Per sample list, the graphs worth trying on the trial window.

    The quick raster (the samples' quick windows stacked as planes, a few
    thousand pixels) ranks every predictor with its reference backend, then
    the best predictors with every backend.  Where it is nearly empty, every
    graph is ranked on the trial window instead.
    """
    try:
        names = [_graph_names(samples[0].dtype.str, error) for samples in sample_sets]
    except ValueError as exc:  # an error bound GeoZL does not understand
        raise ValueError(f"compression {compression!r}: {exc}") from None
    candidates = [
        list(graphs) + ([g + INTERBAND for g in graphs] if samples[0].shape[0] > 1 else [])  # cell: across bands too
        for graphs, samples in zip(names, sample_sets)
    ]
    rasters = [_quick_raster(samples) for samples in sample_sets]
    ranked = _measure_all(measurer, rasters, [_references(cs) for cs in candidates])
    empty = [not sizes or (min(sizes.values()) < QUICK_MIN_BYTES and trial.size > raster.size)
             for sizes, trial, raster in zip(ranked, trial_windows, rasters)]
    best = [set(map(_predictor, _distinct_best(sizes, PREDICTORS + (samples[0].dtype.itemsize == 1), by=_predictor)))
            for sizes, samples in zip(ranked, sample_sets)]
    more = [[] if skip else [c for c in cs if c not in sizes and _predictor(c) in top]
            for cs, sizes, top, skip in zip(candidates, ranked, best, empty)]
    for sizes, extra in zip(ranked, _measure_all(measurer, rasters, more)):
        sizes.update(extra)
    if any(empty):
        retry = [i for i, skip in enumerate(empty) if skip]
        again = _measure_all(measurer, [trial_windows[i] for i in retry], [candidates[i] for i in retry])
        for i, sizes in zip(retry, again):
            ranked[i] = sizes
    return [_distinct_best(sizes, SHORTLIST) for sizes in ranked]


def _references(candidates: list[str]) -> list[str]:
    """Each predictor with its reference backend (the first of ``REFERENCE_BACKENDS`` it has)."""
    backends: dict[str, dict[str, str]] = {}
    for c in candidates:
        backends.setdefault(_predictor(c), {})[_backend(c)] = c
    return [next(found[b] for b in REFERENCE_BACKENDS if b in found)
            for found in backends.values() if any(b in found for b in REFERENCE_BACKENDS)]


def _measure_all(measurer: Measurer, rasters, candidates) -> list[dict[str, int]]:
    """``{candidate: size}`` of each raster's candidates, those that apply."""
    jobs = [(raster, c) for raster, cs in zip(rasters, candidates) for c in cs]
    sizes = iter(measurer.sizes(jobs))
    return [{c: size for c in cs if (size := next(sizes)) is not None} for cs in candidates]


def sample_indices(frame_count: int, count: int = SAMPLE_FRAMES) -> list[int]:
    """Frames spread evenly over the image, first and last included.

    >>> sample_indices(10), sample_indices(2)
    ([0, 4, 9], [0, 1])
    """
    return np.unique(np.linspace(0, frame_count - 1, min(count, frame_count)).astype(int)).tolist()


def sample_frames(grid, compression) -> list[int]:
    """The frame indices :func:`plan` asks ``frame_at`` for, in order (none when nothing is chosen).

    >>> from xarray_rumi.format.grid import FrameGrid
    >>> grid = FrameGrid(96, 32, 32, 32, 2)  # 3 positions, 2 bands: frames 0..5, band-interleaved
    >>> sample_frames(grid, "auto"), sample_frames(grid, "id>zstd")
    ([0, 2, 4, 1, 3, 5], [])
    """
    if _fixed(compression) is not None:
        return []
    slots = grid.frames_per_position
    return [p * slots + slot for slot in range(slots) for p in sample_indices(grid.positions)]


def profile_window(frame_window: tuple[slice, slice, slice]) -> tuple[slice, slice, slice]:
    """The part of a frame (``grid.frame_window(k)``) that choosing measures: its central profile window.

    >>> profile_window((slice(0, 1), slice(512, 1024), slice(0, 100)))
    (slice(0, 1, None), slice(640, 896, None), slice(0, 100, None))
    """
    bands, rows, cols = frame_window
    return bands, _centred(rows, PROFILE_WINDOW), _centred(cols, PROFILE_WINDOW)


def _centred(extent: slice, size: int) -> slice:
    start = extent.start + max(0, (extent.stop - extent.start - size) // 2)
    return slice(start, min(extent.stop, start + size))


def plan(grid, frame_at, compression: str, *, workers: int = 1) -> tuple[Recipes, ...]:
    """Recipes per band slot: one per band for tile frames, one for cell frames.

    Bands differ (an alpha band is not a red band), and a tile frame holds a
    single band, so each band gets recipes measured on its own frames.
    ``frame_at(k)`` returns the storage elements of frame ``k``, or just of
    its :func:`profile_window` (all that is measured, every smaller window
    being centred in it); ``workers`` threads measure, all band slots at once.
    The choice is logged at DEBUG, one line per band slot.

    >>> from xarray_rumi.format.grid import FrameGrid
    >>> grid = FrameGrid(64, 64, 32, 32, 2)  # two bands of 2 x 2 tile frames
    >>> image = np.zeros((2, 64, 64), np.uint16)
    >>> [r.candidates for r in plan(grid, lambda k: image[grid.frame_window(k)], "id>zstd")]
    [('id>zstd',), ('id>zstd',)]
    """
    slots = grid.frames_per_position
    fixed = _fixed(compression)
    if fixed is not None:
        chosen = (fixed,) * slots
    else:
        frames = iter(sample_frames(grid, compression))
        positions = sample_indices(grid.positions)
        sample_sets = [[_central_window(frame_at(next(frames))) for _ in positions] for _ in range(slots)]
        chosen = tuple(_choose_each(sample_sets, compression, workers))
    if logger.isEnabledFor(logging.DEBUG):
        for slot, recipes in enumerate(chosen):
            logger.debug("compression %s, band slot %d of %d: %s", _describe(compression), slot, slots,
                         _describe_recipes(recipes))
    return chosen


def _describe(compression) -> str:
    return "an OpenZL graph" if isinstance(compression, openzl.ext.Compressor) else repr(compression)


def _describe_recipes(recipes: Recipes) -> str:
    if recipes.compressor is not None:
        return "the caller's OpenZL graph"
    lossy = f", error bound {recipes.error!r}" if recipes.error is not None else ""
    return f"recipes {', '.join(recipes.candidates)}{lossy}"
