"""Choosing how to compress frames: lossless recipes, chosen by measuring.

Every rumi frame is self-contained, so the writer may pick a recipe per frame.
``"auto"`` profiles a few sample frames against every GeoZL/OpenZL graph,
keeps the few best, and lets each frame take the smallest of those;
``"portable"`` does the same among graphs that use only OpenZL's built-in
codecs.  Ties go to the simpler (faster) recipe, deterministically, so the
same data always gives the same bytes.  ``"lossy:<error>"`` is the only way
to lose information: it chooses as ``auto`` does among GeoZL's quantising
graphs, and the error bound lives in each frame, the one place the spec allows.
"""

from __future__ import annotations

from dataclasses import dataclass

import threading

import geozl
import numpy as np
import openzl.ext

from .io.frames import FORMAT_VERSION, PORTABLE_RECIPES, applicable, encode_frame

#: How many of the best sample-frame recipes each frame chooses among (each costs one encode).
FINALISTS = 1
#: How many of the graphs profiled on one sample go on to compete on all samples.
SHORTLIST = 6
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

    def encode(self, stored: np.ndarray) -> bytes:
        """The smallest frame among the candidates (the first on a tie)."""
        if self.compressor is not None:
            return _encode_with_compressor(stored, self.compressor)
        best = None
        for candidate in self.candidates:
            try:
                frame = _encode(stored, candidate, self.error)
            except RuntimeError:  # the recipe does not apply to this frame
                continue
            if best is None or len(frame) < len(best):
                best = frame
        return best if best is not None else encode_frame(stored, FALLBACK)


INTERBAND = "@interband"


def _encode(stored: np.ndarray, candidate: str, error=None) -> bytes:
    recipe, _, geometry = candidate.partition("@")
    return encode_frame(stored, recipe, interband=bool(geometry), error=error)


_contexts = threading.local()  # compression contexts are not thread-safe: one per thread


def _encode_with_compressor(stored: np.ndarray, serialized: bytes) -> bytes:
    """One frame through a caller's OpenZL graph, at the pinned format version, with checksums."""
    cache = _contexts.__dict__.setdefault("cache", {})
    if serialized not in cache:
        compressor = openzl.ext.Compressor()
        compressor.deserialize(serialized)
        cctx = openzl.ext.CCtx()
        cctx.ref_compressor(compressor)
        # parameters otherwise reset after each frame, and the context then refuses the next one
        cctx.set_parameter(openzl.ext.CParam.StickyParameters, 1)
        cctx.set_parameter(openzl.ext.CParam.FormatVersion, FORMAT_VERSION)
        cctx.set_parameter(openzl.ext.CParam.ContentChecksum, 1)
        cache[serialized] = (cctx, compressor)  # the context refers to the compressor: keep both alive
    cctx, _ = cache[serialized]
    values = np.require(stored, requirements=("C", "A")).reshape(-1)
    frame = cctx.compress([openzl.ext.Input(openzl.ext.Type.Numeric, values)])
    if frame[0] != 0xC0 + FORMAT_VERSION:
        raise RuntimeError(f"the OpenZL graph wrote format version {frame[0] - 0xC0}, not the pinned {FORMAT_VERSION}")
    return frame


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


def _central_window(stored: np.ndarray) -> np.ndarray:
    h, w = stored.shape[1:3]
    y0, x0 = max(0, (h - PROFILE_WINDOW) // 2), max(0, (w - PROFILE_WINDOW) // 2)
    return stored[:, y0:y0 + PROFILE_WINDOW, x0:x0 + PROFILE_WINDOW]


def choose(samples: list[np.ndarray], compression: str) -> Recipes:
    """The :class:`Recipes` for ``compression`` given sample frames of storage elements.

    ``compression`` is ``"auto"``, ``"portable"``, ``"lossy:<error>"``, a
    GeoZL recipe string such as ``"planar>zigzag>zstd"`` (used for every frame
    as given), or an ``openzl.ext.Compressor`` with its starting graph
    selected (every frame goes through that graph, as one numeric stream).

    >>> import numpy as np
    >>> ramp = np.tile(np.arange(64, dtype=np.uint16), (1, 64, 1))
    >>> choose([ramp], "portable").candidates[0] in PORTABLE_RECIPES
    True
    """
    if isinstance(compression, openzl.ext.Compressor):
        # Compressors hold native state; their serialised form travels to Dask workers.
        return Recipes((), compressor=compression.serialize())
    error = lossy_error(compression)
    if compression not in ("auto", "portable") and error is None:
        if not isinstance(compression, str) or ">" not in compression:
            raise ValueError(
                "compression must be 'auto', 'portable', 'lossy:<error>' or a GeoZL recipe such as "
                f"'planar>zigzag>zstd', got {compression!r}"
            )
        return Recipes((compression,))
    windows = [_central_window(s) for s in samples]
    if compression == "portable":
        shortlist = [r for r in PORTABLE_RECIPES if applicable(r, samples[0].dtype)]
    else:
        # Profiling tries every graph: do it once, on the middle sample, then
        # let the best few compete on all samples.
        middle = _as_raster(windows[len(windows) // 2])
        try:
            rows = geozl.profile(middle, prior=None, reps=1, planes=middle.shape[0], error=error)
        except ValueError as exc:  # an error bound GeoZL does not understand
            raise ValueError(f"compression {compression!r}: {exc}") from None
        if middle.shape[0] > 1:  # a cell frame: also predict between bands
            across = middle.reshape(1, middle.shape[0], -1)
            rows += [{**row, "graph": row["graph"] + INTERBAND}
                     for row in geozl.profile(across, prior=None, reps=1, planes=1, error=error)]
        ranked_once = sorted(rows, key=lambda row: (row["bytes"], *_simplicity(row["graph"])))
        shortlist = [row["graph"] for row in ranked_once
                     if not any(codec in row["graph"] for codec in _UNPINNED_CODECS)][:SHORTLIST]
    totals = {}
    for recipe in shortlist:
        try:
            # encode_frame refuses a frame not at the pinned OpenZL version
            totals[recipe] = sum(len(_encode(w, recipe, error)) for w in windows)
        except RuntimeError:
            continue  # the recipe does not apply to these samples
    ranked = sorted(totals, key=lambda g: (totals[g], *_simplicity(g)))
    return Recipes(tuple(ranked[:FINALISTS]) or (FALLBACK,), error)


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
