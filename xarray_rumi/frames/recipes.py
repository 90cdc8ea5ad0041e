"""What a frame is encoded with: :class:`Recipes`, and recipe strings turned into frames."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import geozl
import geozl.lossless
import numpy as np
import openzl.ext

from ..runtime.heap import keep_heap_top
from .codec import FORMAT_VERSION, PROCESS_CACHE, ThreadCache, as_planes, encode_frame

FALLBACK = "id>zstd"  # applies to any frame, at the pinned version


@dataclass(frozen=True)
class Recipes:
    """What the frames of one band slot are encoded with: a recipe (lossy with an ``error`` bound), or a caller's
    serialised OpenZL graph (``compressor``).

    >>> stored = np.zeros((1, 8, 8), np.uint8)   # transpose does not apply to one-byte elements
    >>> Recipes("id>transpose>zstd").encode(stored) == Recipes(FALLBACK).encode(stored)
    True
    """

    recipe: str | None
    error: float | str | None = None
    compressor: bytes | None = None

    def encode(self, stored: np.ndarray, cache: ThreadCache | None = None) -> bytes:
        """One frame of ``stored``, in ``FALLBACK`` where the recipe does not apply; graphs kept in ``cache``."""
        if self.compressor is not None:
            return _encode_with_compressor(stored, self.compressor, cache or PROCESS_CACHE)
        try:
            return _encode(stored, self.recipe, self.error, cache)
        except RuntimeError:
            return encode_frame(stored, FALLBACK, cache=cache)


INTERBAND = "@interband"


class ParsedRecipe(NamedTuple):
    graph: str
    predictor: str  # "planar>zigzag" of "planar>zigzag>transpose>zstd"
    backend: str
    level: int | None
    interband: bool


def parse_recipe(recipe: str) -> ParsedRecipe:
    """A recipe ``"<predictor>><backend>[:<level>][@interband]"`` taken apart; ``ValueError`` for a bad level, or a
    level on a graph that does not end in zstd.

    >>> parse_recipe("planar>zigzag>transpose>zstd:16@interband")[1:]
    ('planar>zigzag', 'transpose>zstd', 16, True)
    """
    body, at, _ = recipe.partition("@")
    graph, colon, level = body.partition(":")
    if colon and not (level.isdigit() and 1 <= int(level) <= 22):
        raise ValueError(f"a zstd level is 1 to 22, got {level!r} in {recipe!r}")
    stages = graph.split(">")
    cut = 2 if len(stages) > 2 and stages[1] == "zigzag" else 1
    parsed = ParsedRecipe(graph, ">".join(stages[:cut]), ">".join(stages[cut:]), int(level) if colon else None, bool(at))
    if colon:
        _check_at_level(parsed)
    return parsed


def _encode(stored: np.ndarray, candidate: str, error=None, cache: ThreadCache | None = None) -> bytes:
    recipe = parse_recipe(candidate)
    if recipe.level is not None:
        return _encode_at_level(stored, recipe, cache or PROCESS_CACHE)
    return encode_frame(stored, recipe.graph, interband=recipe.interband, error=error, cache=cache)


def _encode_with_compressor(stored: np.ndarray, serialized: bytes, cache: ThreadCache) -> bytes:
    def build():
        compressor = openzl.ext.Compressor()
        compressor.deserialize(serialized)
        return _compression_context(compressor)

    return _compress(cache.get(("openzl", serialized), build)[0], np.require(stored, requirements=("C", "A")))


def _compression_context(compressor):
    """``(context, compressor)``: the context refers to the compressor, so both are kept alive."""
    cctx = openzl.ext.CCtx()
    cctx.ref_compressor(compressor)
    # parameters otherwise reset after each frame, and the context then refuses the next one
    cctx.set_parameter(openzl.ext.CParam.StickyParameters, 1)
    cctx.set_parameter(openzl.ext.CParam.FormatVersion, FORMAT_VERSION)
    cctx.set_parameter(openzl.ext.CParam.ContentChecksum, 1)
    return cctx, compressor


def _compress(cctx, values: np.ndarray) -> bytes:
    frame = cctx.compress([openzl.ext.Input(openzl.ext.Type.Numeric, values.reshape(-1))])
    if frame[0] != 0xC0 + FORMAT_VERSION:
        raise RuntimeError(f"the OpenZL graph wrote format version {frame[0] - 0xC0}, not the pinned {FORMAT_VERSION}")
    return frame


# The codecs GeoZL's own graphs write, so every reader decodes them.
_FUSED_PREDICTORS = {"planar>zigzag": geozl.lossless.PlanarZigzag, "med>zigzag": geozl.lossless.MedZigzag}
_PREDICTORS = {"planar": geozl.lossless.Planar, "med": geozl.lossless.Med, "delta_w": geozl.lossless.DeltaW,
               "delta_n": geozl.lossless.DeltaN, "average": geozl.lossless.Average,
               "wp_static": geozl.lossless.WpStatic}
_ZSTD_BACKENDS = ("zstd", "transpose>zstd")


def _encode_at_level(stored: np.ndarray, recipe: ParsedRecipe, cache: ThreadCache) -> bytes:
    """One frame of a GeoZL graph ending in zstd, rebuilt from OpenZL's nodes to run zstd at ``level``."""
    keep_heap_top()
    raster = as_planes(stored, recipe.interband)
    planes, width = raster.shape[0], raster.shape[-1]
    key = ("zstd-level", recipe.graph, recipe.level, width, planes)
    cctx, _ = cache.get(key, lambda: _compression_context(_graph_at_level(recipe, width, planes)))
    return _compress(cctx, raster)


def _graph_at_level(recipe: ParsedRecipe, width: int, planes: int):
    compressor = openzl.ext.Compressor()
    nodes = openzl.ext.nodes
    predictor = recipe.predictor
    zstd = openzl.ext.graphs.Zstd(compression_level=recipe.level)(compressor)
    if recipe.backend == "zstd":
        graph = nodes.ConvertNumToSerialLE()(compressor, zstd)
    else:  # one zstd stream per byte of the elements
        graph = nodes.ConvertNumToStructLE()(compressor, nodes.TransposeSplit()(compressor, zstd))
    if predictor == "delta_1d":
        graph = nodes.DeltaInt()(compressor, graph)
    elif predictor in _FUSED_PREDICTORS:
        graph = _FUSED_PREDICTORS[predictor](width, planes)(compressor, graph)
    elif predictor != "id":
        name = predictor.split(">")[0]
        # delta_w looks only along a row, which planes of whole rows do not change
        node = _PREDICTORS[name](width, 1 if name == "delta_w" else planes)
        graph = node(compressor, nodes.Zigzag()(compressor, graph))
    compressor.select_starting_graph(graph)
    return compressor


def _check_at_level(recipe: ParsedRecipe) -> None:
    predictors = {"id", "delta_1d", *_FUSED_PREDICTORS} | {f"{name}>zigzag" for name in _PREDICTORS}
    if recipe.backend not in _ZSTD_BACKENDS or recipe.predictor not in predictors:
        raise ValueError(f"only a GeoZL graph ending in zstd runs at another zstd level, not {recipe.graph!r}")


__all__ = ["FALLBACK", "INTERBAND", "ParsedRecipe", "Recipes", "parse_recipe"]
