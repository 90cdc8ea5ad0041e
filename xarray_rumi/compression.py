"""Choosing how to compress frames: lossless recipes, chosen by measuring.

Every rumi frame is self-contained, so the writer may pick a recipe per frame.
``"auto"`` profiles a few sample frames against every GeoZL/OpenZL graph,
keeps the few best, and lets each frame take the smallest of those;
``"portable"`` does the same among graphs that use only OpenZL's built-in
codecs.  Ties go to the simpler (faster) recipe, deterministically, so the
same data always gives the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import geozl
import numpy as np

from .io.frames import PORTABLE_RECIPES, applicable, encode_frame

#: How many of the best sample-frame recipes each frame chooses among.
FINALISTS = 2
SAMPLE_FRAMES = 3
#: Profiling runs every graph, so it sees at most this many rows x columns of a sample.
PROFILE_WINDOW = 256
#: Terminal codecs that need an OpenZL frame format newer than the pinned one.
_UNPINNED_CODECS = ("pivco", "sparse")
#: Always applicable, always at the pinned version: the last resort for any frame.
FALLBACK = "id>zstd"


@dataclass(frozen=True)
class Recipes:
    """The recipes a frame may be encoded with, best first.

    >>> import numpy as np
    >>> r = Recipes(("id>zstd",))
    >>> len(r.encode(np.zeros((1, 8, 8), np.uint8))) > 0
    True
    """

    candidates: tuple[str, ...]

    def encode(self, stored: np.ndarray) -> bytes:
        """The smallest frame among the candidates (the first on a tie)."""
        best = None
        for recipe in self.candidates:
            try:
                frame = encode_frame(stored, recipe)
            except RuntimeError:  # the recipe does not apply to this frame
                continue
            if best is None or len(frame) < len(best):
                best = frame
        return best if best is not None else encode_frame(stored, FALLBACK)


def _simplicity(recipe: str) -> tuple[int, str]:
    # Fewer stages decode faster; the name breaks the remaining ties stably.
    return (recipe.count(">"), recipe)


def _as_raster(stored: np.ndarray) -> np.ndarray:
    bands, h = stored.shape[:2]
    return np.ascontiguousarray(stored).reshape(bands, h, -1)


def _central_window(stored: np.ndarray) -> np.ndarray:
    h, w = stored.shape[1:3]
    y0, x0 = max(0, (h - PROFILE_WINDOW) // 2), max(0, (w - PROFILE_WINDOW) // 2)
    return stored[:, y0:y0 + PROFILE_WINDOW, x0:x0 + PROFILE_WINDOW]


def choose(samples: list[np.ndarray], compression: str) -> Recipes:
    """The :class:`Recipes` for ``compression`` given sample frames of storage elements.

    ``compression`` is ``"auto"``, ``"portable"`` or a GeoZL recipe string
    such as ``"planar>zigzag>zstd"`` (used for every frame as given).

    >>> import numpy as np
    >>> ramp = np.tile(np.arange(64, dtype=np.uint16), (1, 64, 1))
    >>> choose([ramp], "portable").candidates[0] in PORTABLE_RECIPES
    True
    """
    if compression not in ("auto", "portable"):
        if not isinstance(compression, str) or ">" not in compression:
            raise ValueError(
                "compression must be 'auto', 'portable' or a GeoZL recipe such as 'planar>zigzag>zstd', "
                f"got {compression!r}"
            )
        return Recipes((compression,))
    storage = samples[0].dtype
    totals: dict[str, int] = {}
    if compression == "portable":
        for recipe in PORTABLE_RECIPES:
            if applicable(recipe, storage):
                totals[recipe] = sum(len(encode_frame(s, recipe)) for s in samples)
    else:
        applied: dict[str, int] = {}
        for sample in samples:
            raster = _as_raster(_central_window(sample))
            for row in geozl.profile(raster, prior=None, reps=1, planes=raster.shape[0]):
                totals[row["graph"]] = totals.get(row["graph"], 0) + row["bytes"]
                applied[row["graph"]] = applied.get(row["graph"], 0) + 1
        # a graph that does not apply to every sample, or needs a newer
        # OpenZL format than the pinned one, is no candidate
        totals = {
            g: t for g, t in totals.items()
            if applied[g] == len(samples) and not any(codec in g for codec in _UNPINNED_CODECS)
        }
    ranked = sorted(totals, key=lambda g: (totals[g], *_simplicity(g)))
    finalists = []
    for recipe in ranked:
        try:
            for sample in samples:
                encode_frame(sample, recipe)  # refuses a frame not at the pinned version
        except RuntimeError:
            continue
        finalists.append(recipe)
        if len(finalists) == FINALISTS:
            break
    return Recipes(tuple(finalists) or (FALLBACK,))


def sample_indices(frame_count: int, count: int = SAMPLE_FRAMES) -> list[int]:
    """Frames spread evenly over the image, first and last included."""
    return np.unique(np.linspace(0, frame_count - 1, min(count, frame_count)).astype(int)).tolist()


def plan(grid, frame_at, compression: str) -> tuple[Recipes, ...]:
    """Recipes per band slot: one per band for tile frames, one for cell frames.

    Bands differ (an alpha band is not a red band), and a tile frame holds a
    single band, so each band gets recipes measured on its own frames.
    ``frame_at(k)`` returns the storage elements of frame ``k``.
    """
    slots = grid.frames_per_position
    positions = sample_indices(grid.positions)
    return tuple(
        choose([frame_at(p * slots + slot) for p in positions], compression) for slot in range(slots)
    )
