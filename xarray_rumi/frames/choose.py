"""Choosing how to compress frames: lossless recipes, chosen by measuring."""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from dataclasses import dataclass

import geozl
import numpy as np
import openzl.ext

from ..format.grid import FrameGrid, FrameUnit
from ..runtime.threads import share_work
from .codec import PORTABLE_RECIPES, as_planes
from .recipes import FALLBACK, INTERBAND, Recipes, _encode, parse_recipe

logger = logging.getLogger(__name__)

# The rounds of choosing and their thresholds: docs/writing.md, *Choosing compression*.
SAMPLE_FRAMES = 3
QUICK_WINDOW = 40
REFERENCE_BACKENDS = ("transpose>zstd", "zstd")
PREDICTORS = 2
QUICK_MIN_BYTES = 1024  # quick windows whose best frame is smaller are mostly frame header
SHORTLIST = 4
TRIAL_WINDOW = 128
CONTENDERS = 2
PORTABLE_CONTENDERS = 3
PROFILE_WINDOW = 256
_UNPINNED_CODECS = ("pivco", "sparse")  # they need an OpenZL frame format newer than the pinned one
SMALL_IMAGE_BYTES = 4 * 2**20
SLOW_ZSTD_LEVEL = 16  # the first of zstd's slow strategies, btultra
SLOW_LEVEL_GAIN = 0.97
CELL_MAX_BANDS = 4
CELL_GAIN = 0.97  # one band decodes alone from a tile frame, worth keeping for less


def _at_slow_level(candidate: str, itemsize: int) -> str:
    """The candidate's predictor with the zstd backend for ``itemsize``-byte elements, at the slow level."""
    backend = "transpose>zstd" if itemsize > 1 else "zstd"
    recipe = parse_recipe(candidate)
    return f"{recipe.predictor}>{backend}:{SLOW_ZSTD_LEVEL}{INTERBAND if recipe.interband else ''}"


def lossy_error(compression: str):
    """The error bound of a ``"lossy:<error>"`` compression, else ``None``; ``ValueError`` for one not above 0.

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


def _ranked(sizes: dict[str, int]) -> list[str]:
    """The candidates of ``sizes``, smallest first, simplest first among equals."""
    return sorted(sizes, key=lambda g: (sizes[g], *_simplicity(g)))


def _central_window(stored: np.ndarray, size: int = PROFILE_WINDOW) -> np.ndarray:
    h, w = stored.shape[1:3]
    return stored[:, _centred(slice(0, h), size), _centred(slice(0, w), size)]


def _quick_raster(samples: list[np.ndarray]) -> np.ndarray:
    """The quick windows of the samples as one raster of planes (edge samples smaller than the first left out)."""
    windows = [as_planes(_central_window(s, QUICK_WINDOW)) for s in samples]
    return np.concatenate([w for w in windows if w.shape == windows[0].shape])


@functools.cache
def _graph_names(storage: str, error) -> tuple[str, ...]:
    """Every GeoZL graph for elements of ``storage`` at the pinned version."""
    ramp = (np.arange(256) % 61).astype(storage).reshape(1, 16, 16)
    rows = geozl.profile(ramp, prior=None, reps=1, planes=1, error=error)
    return tuple(sorted((row["graph"] for row in rows if not any(c in row["graph"] for c in _UNPINNED_CODECS)),
                        key=_simplicity))


def _distinct_best(sizes: dict[str, int], count: int, *, by=None) -> list[str]:
    """The ``count`` smallest, simplest first, one graph per size (or per ``by(graph)``)."""
    kept, seen = [], set()
    for graph in _ranked(sizes):
        key = by(graph) if by else sizes[graph]
        if key not in seen:
            seen.add(key)
            kept.append(graph)
        if len(kept) == count:
            break
    return kept


def _fixed(compression) -> Recipes | None:
    """The recipes of a ``compression`` that needs no measuring, else ``None``."""
    if isinstance(compression, openzl.ext.Compressor):
        # Compressors hold native state; their serialised form travels to Dask workers.
        return Recipes(None, compressor=compression.serialize())
    if compression in ("auto", "portable") or lossy_error(compression) is not None:
        return None
    if not isinstance(compression, str) or ">" not in compression:
        raise ValueError("compression must be 'auto', 'portable', 'lossy:<error>' or a GeoZL recipe such as "
                         f"'planar>zigzag>zstd', got {compression!r}")
    parse_recipe(compression)  # refused now, not at the first frame
    return Recipes(compression)


@dataclass(frozen=True)
class _Choice:
    recipes: Recipes
    size: float  # bytes of the profile windows (inf where none applied)
    lengths: dict  # {candidate: [length on each profile window]}


def _choose_each(sample_sets: list[list[np.ndarray]], compression, workers: int, across_only=()) -> list[_Choice]:
    """One :class:`_Choice` per list of sample frames, all measured together on one pool."""
    error = lossy_error(compression)
    measure = functools.partial(encoded_sizes, encode=functools.partial(_encode, error=error), workers=workers)
    trial_windows = [_central_window(samples[len(samples) // 2], TRIAL_WINDOW) for samples in sample_sets]
    if compression == "portable":
        shortlists = [PORTABLE_RECIPES] * len(sample_sets)  # those that do not apply measure as None
        contenders = PORTABLE_CONTENDERS
    else:
        shortlists = _shortlists(sample_sets, trial_windows, compression, error, measure, across_only)
        contenders = CONTENDERS
    trials = _measure_all(measure, trial_windows, shortlists)
    finals = [_ranked(sizes)[:contenders] for sizes in trials]
    windows = [[_central_window(s) for s in samples] for samples in sample_sets]
    sizes = iter(measure([(w, c) for ws, final in zip(windows, finals) for c in final for w in ws]))
    chosen = []
    for ws, final in zip(windows, finals):
        lengths = {c: [next(sizes) for _ in ws] for c in final}
        totals = {c: sum(ls) for c, ls in lengths.items() if None not in ls}
        ranked = _ranked(totals)
        size = totals[ranked[0]] if ranked else math.inf
        chosen.append(_Choice(Recipes(ranked[0] if ranked else FALLBACK, error), size, lengths))
    return chosen


def _slower(chosen: list[_Choice], sample_sets, workers: int) -> list[_Choice]:
    """The choices with each winner's predictor at zstd's slow level where that pays."""
    middle = [len(samples) // 2 for samples in sample_sets]
    slow = [_at_slow_level(c.recipes.recipe, samples[0].dtype.itemsize)
            for c, samples in zip(chosen, sample_sets)]
    jobs = [(_central_window(samples[m]), candidate) for samples, m, candidate in zip(sample_sets, middle, slow)]
    sizes = encoded_sizes(jobs, _encode, workers)
    faster = []
    for choice, m, candidate, size in zip(chosen, middle, slow, sizes):
        before = choice.lengths.get(choice.recipes.recipe, [None] * (m + 1))[m]
        if size is not None and before is not None and size <= SLOW_LEVEL_GAIN * before:
            choice = _Choice(Recipes(candidate, choice.recipes.error), choice.size * size / before, choice.lengths)
        faster.append(choice)
    return faster


def _predictor(candidate: str) -> tuple[str, bool]:
    """``(predictor, interband)`` of a candidate."""
    recipe = parse_recipe(candidate)
    return recipe.predictor, recipe.interband


def _shortlists(sample_sets, trial_windows, compression, error, measure,
                across_only=()) -> list[list[str]]:
    """Per sample list, the graphs worth trying on the trial window."""
    try:
        names = [_graph_names(samples[0].dtype.str, error) for samples in sample_sets]
    except ValueError as exc:  # an error bound GeoZL does not understand
        raise ValueError(f"compression {compression!r}: {exc}") from None
    across = [[g + INTERBAND for g in graphs] if samples[0].shape[0] > 1 else [] for graphs, samples in
              zip(names, sample_sets)]
    candidates = [others if i in across_only else list(graphs) + others
                  for i, (graphs, others) in enumerate(zip(names, across))]
    rasters = [_quick_raster(samples) for samples in sample_sets]
    ranked = _measure_all(measure, rasters, [_references(cs) for cs in candidates])
    empty = [not sizes or (min(sizes.values()) < QUICK_MIN_BYTES and trial.size > raster.size)
             for sizes, trial, raster in zip(ranked, trial_windows, rasters)]
    best = [set(map(_predictor, _distinct_best(sizes, PREDICTORS + (samples[0].dtype.itemsize == 1), by=_predictor)))
            for sizes, samples in zip(ranked, sample_sets)]
    more = [[] if skip else [c for c in cs if c not in sizes and _predictor(c) in top]
            for cs, sizes, top, skip in zip(candidates, ranked, best, empty)]
    for sizes, extra in zip(ranked, _measure_all(measure, rasters, more)):
        sizes.update(extra)
    if any(empty):
        retry = [i for i, skip in enumerate(empty) if skip]
        again = _measure_all(measure, [trial_windows[i] for i in retry], [candidates[i] for i in retry])
        for i, sizes in zip(retry, again):
            ranked[i] = sizes
    return [_distinct_best(sizes, SHORTLIST) for sizes in ranked]


def _references(candidates: list[str]) -> list[str]:
    """Each predictor with the first of ``REFERENCE_BACKENDS`` it has."""
    backends: dict[str, dict[str, str]] = {}
    for c in candidates:
        backends.setdefault(_predictor(c), {})[parse_recipe(c).backend] = c
    return [next(found[b] for b in REFERENCE_BACKENDS if b in found)
            for found in backends.values() if any(b in found for b in REFERENCE_BACKENDS)]


def encoded_sizes(jobs: list[tuple[np.ndarray, str]], encode, workers: int) -> list[int | None]:
    """The frame length of each ``(stored, candidate)`` job encoded with ``encode`` on this thread and ``workers - 1``
    idle cores; ``None`` where the candidate does not apply (``encode`` raises ``RuntimeError``).

    >>> encoded_sizes([(np.zeros(64), 2), (np.zeros(64), 4)], lambda stored, n: bytes(stored.size // n), workers=2)
    [32, 16]
    """
    sizes: list[int | None] = [None] * len(jobs)

    def measure(i: int) -> None:
        stored, candidate = jobs[i]
        try:
            sizes[i] = len(encode(stored, candidate))
        except RuntimeError:  # the recipe does not apply, or not at the pinned version
            pass

    # one batch: the jobs need no fetching, so every piece is ready at once
    share_work([range(len(jobs))], lambda batch: [functools.partial(measure, i) for i in batch],
               threads=max(1, workers), at_most=len(jobs))
    return sizes


def _measure_all(measure, rasters, candidates) -> list[dict[str, int]]:
    """``{candidate: size}`` of each raster's candidates that apply."""
    jobs = [(raster, c) for raster, cs in zip(rasters, candidates) for c in cs]
    sizes = iter(measure(jobs))
    return [{c: size for c in cs if (size := next(sizes)) is not None} for cs in candidates]


def spread_indices(frame_count: int) -> list[int]:
    """``SAMPLE_FRAMES`` frames spread evenly over the image, first and last included.

    >>> spread_indices(10)
    [0, 4, 9]
    """
    return np.unique(np.linspace(0, frame_count - 1, min(SAMPLE_FRAMES, frame_count)).astype(int)).tolist()


def sample_frames(grid, compression) -> list[int]:
    """The frame indices :func:`plan_frames` asks ``frame_at`` for, in order (none when nothing is chosen).

    >>> grid = FrameGrid(96, 32, 32, 32, 2)
    >>> sample_frames(grid, "auto"), sample_frames(grid, "id>zstd")
    ([0, 2, 4, 1, 3, 5], [])
    """
    if _fixed(compression) is not None:
        return []
    slots = grid.frames_per_position
    return [p * slots + slot for slot in range(slots) for p in spread_indices(grid.positions)]


def profile_window(frame_window: tuple[slice, slice, slice]) -> tuple[slice, slice, slice]:
    """The central profile window of a frame (``grid.frame_window(k)``): the part that choosing measures."""
    bands, rows, cols = frame_window
    return bands, _centred(rows, PROFILE_WINDOW), _centred(cols, PROFILE_WINDOW)


def _centred(extent: slice, size: int) -> slice:
    start = extent.start + max(0, (extent.stop - extent.start - size) // 2)
    return slice(start, min(extent.stop, start + size))


def plan_frames(grid: FrameGrid, frame_at, compression, *, workers: int = 1,
                may_use_cells: bool = False) -> tuple[FrameGrid, tuple[Recipes, ...]]:
    """``(grid, recipes)``: the recipes per band slot (one per band, or one for cell frames), and with
    ``may_use_cells`` the frame unit chosen.

    >>> grid = FrameGrid(128, 128, 64, 64, 3)
    >>> texture = np.random.default_rng(0).integers(0, 200, (128, 128), dtype=np.uint8)
    >>> rgb = np.stack([texture + 10 * band for band in range(3)])
    >>> chosen, _ = plan_frames(grid, lambda k: rgb[grid.frame_window(k)], "auto", may_use_cells=True)
    >>> chosen.frame_unit, plan_frames(grid, lambda k: rgb[grid.frame_window(k)], "auto")[0].frame_unit
    (<FrameUnit.CELL: 1>, <FrameUnit.TILE: 0>)
    """
    slots = grid.frames_per_position
    fixed = _fixed(compression)
    if fixed is not None:
        return grid, (fixed,) * slots
    frames = iter(sample_frames(grid, compression))
    positions = spread_indices(grid.positions)
    sample_sets = [[_central_window(frame_at(next(frames))) for _ in positions] for _ in range(slots)]
    cells = (may_use_cells and compression == "auto" and grid.frame_unit is FrameUnit.TILE
             and 1 < grid.samples_per_pixel <= CELL_MAX_BANDS)
    if cells:
        sample_sets.append([np.concatenate(windows) for windows in zip(*sample_sets)])
    # cells that predict each band alone are the tile frames' candidates, with one shared backend
    choices = _choose_each(sample_sets, compression, workers, across_only={slots} if cells else ())
    if cells:
        tiles, cell = sum(c.size for c in choices[:-1]), choices[-1].size
        logger.debug("frame unit: cell frames %s bytes against tile frames %s bytes on the samples", cell, tiles)
        nearly_empty = tiles < QUICK_MIN_BYTES * slots * len(positions)
        if math.isfinite(cell) and cell <= CELL_GAIN * tiles and not nearly_empty:
            grid = dataclasses.replace(grid, frame_unit=FrameUnit.CELL)
            choices, sample_sets = choices[-1:], sample_sets[-1:]
        else:
            choices, sample_sets = choices[:-1], sample_sets[:-1]
    pixel_bytes = sum(samples[0][:, 0, 0].nbytes for samples in sample_sets)  # of storage elements, every band
    if compression == "auto" and pixel_bytes * grid.image_length * grid.image_width <= SMALL_IMAGE_BYTES:
        choices = _slower(choices, sample_sets, workers)  # for the chosen frame unit only: it costs
    chosen = tuple(c.recipes for c in choices)
    for slot, recipes in enumerate(chosen):  # measured choices only: a caller's OpenZL graph returned above
        logger.debug("compression %r, band slot %d of %d: recipe %s, error bound %r", compression, slot,
                     len(chosen), recipes.recipe, recipes.error)
    return grid, chosen
