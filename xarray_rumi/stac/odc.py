"""odc-stac's reader driver for rumi files (the ``odc`` extra, imported here only; docs/stac.md)."""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field

from odc.loader import RioDriver

from .odc_read import ChunkPixels, ChunkRequest, blob_header, read_chunk, refuse_unloadable_dtype
from .read import STAC_HEADER, ItemImage, is_stac_geoparquet, item_images, read_stac_geoparquet, stac_item_dicts


class RumiDriver(RioDriver):
    """odc-loader driver for rumi assets (odc's GeoTIFF driver for the others); picklable.

    Give odc-stac's ``stac_cfg`` here: odc passes its own only to the parser this driver replaces.

    >>> import numpy as np, tempfile, os, odc.stac, xarray_rumi, xarray_rumi.stac
    >>> path = os.path.join(tempfile.mkdtemp(), "scene.rumi")
    >>> blob = xarray_rumi.write(path, np.arange(64 * 64, dtype="uint16").reshape(64, 64), tile_size=32,
    ...                          crs=32633, transform=(10, 0, 500000, 0, -10, 5000000))
    >>> item = xarray_rumi.stac.item(path, blob, datetime="2024-05-01T10:00:00Z")
    >>> ds = odc.stac.load([item], driver=RumiDriver(), chunks={})
    >>> int(ds["data"][0, 1, 2]), ds["data"].dtype.name
    (66, 'uint16')
    """

    def __init__(self, stac_cfg: dict | None = None) -> None:
        self.stac_cfg = dict(stac_cfg or {})
        super().__init__(md_parser=RumiMDParser(self.stac_cfg), dask_reader=RumiDaskReader(self))

    def __repr__(self) -> str:
        return f"RumiDriver(stac_cfg={self.stac_cfg!r})" if self.stac_cfg else "RumiDriver()"

    def new_load(self, geobox, *, chunks=None) -> RumiLoad:
        return RumiLoad(super().new_load(geobox, chunks=chunks))

    def finalise_load(self, load_state: RumiLoad):
        return super().finalise_load(load_state.rio)

    def restore_env(self, env: dict, load_state: RumiLoad):
        return super().restore_env(env, load_state.rio)

    def open(self, src, ctx):
        return RumiReader(src) if isinstance(src.driver_data, ItemImage) else super().open(src, ctx)


@dataclass(frozen=True)
class RumiMDParser:
    """odc's metadata parser, with each rumi asset's band count and type from its blob."""

    stac_cfg: dict = field(default_factory=dict)

    def extract(self, md):
        from odc.loader.types import RasterBandMetadata, norm_nodata
        from odc.stac import extract_collection_metadata

        group = extract_collection_metadata(md, self.stac_cfg).meta
        bands = dict(group.bands)
        for name, asset in md.assets.items():
            if STAC_HEADER not in asset.extra_fields:
                continue
            header = blob_header(base64.b64decode(asset.extra_fields[STAC_HEADER]))
            dtype = header.sample_type.dtype
            described = asset.extra_fields.get("raster:bands") or []
            bands = {key: band for key, band in bands.items() if key[0] != name}
            for index in range(1, header.grid.samples_per_pixel + 1):
                # odc's own reading of the asset: raster:bands, or stac_cfg's (one band when it names the asset)
                odc_band = group.bands.get((name, index)) or group.bands.get((name, 1))
                if odc_band is None:  # odc skipped the asset (not an image media type): its raster:bands, read here
                    own = described[index - 1] if index <= len(described) else {}
                    odc_band = RasterBandMetadata(nodata=norm_nodata(own.get("nodata")), units=own.get("unit", "1"))
                bands[(name, index)] = RasterBandMetadata(str(dtype), odc_band.nodata, odc_band.units)
        return group.patch(bands=bands)

    def driver_data(self, md, band_key):
        asset = md.assets.get(band_key[0])
        if asset is None or STAC_HEADER not in asset.extra_fields:
            return None
        fields = {**asset.extra_fields, "href": asset.href}
        return item_images({"id": md.id, "properties": md.properties, "assets": {band_key[0]: fields}})[0]


@dataclass
class RumiLoad:
    """odc's GeoTIFF load state, and the bands asked so far per rumi file and configuration."""

    rio: object
    asked: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RumiReader:
    """One band of one rumi asset onto an output chunk (odc's ``RasterReader``, without Dask)."""

    src: object

    def read(self, cfg, dst_geobox, *, dst=None, selection=None):
        band = _band_index(self.src)
        request = ChunkRequest(self.src.uri, self.src.driver_data, (band,), cfg, _nodata(self.src))
        return read_chunk(request, dst_geobox).band(band, dst)


@dataclass(frozen=True)
class RumiDaskReader:
    """odc's ``DaskRasterReader``: a rumi file's bands share one task per chunk, so each frame decodes once."""

    driver: RumiDriver
    env: dict | None = None
    load: RumiLoad | None = None
    src: object = None
    cfg: object = None
    layer_name: str = ""

    def open(self, src, cfg, ctx, *, layer_name: str, idx: int) -> RumiDaskReader:
        if isinstance(src.driver_data, ItemImage):
            # refused while the load is built, not in every task
            refuse_unloadable_dtype(src.uri, blob_header(src.driver_data.blob).sample_type.dtype, cfg)
        env = self.env if self.env is not None else self.driver.capture_env()
        return RumiDaskReader(self.driver, env, ctx, src, cfg, layer_name)

    def read(self, dst_geobox, *, selection=None, idx: tuple[int, ...]):
        from dask import delayed
        from dask.base import tokenize

        key = (self.layer_name, *idx)
        src, cfg = self.src, self.cfg
        if not isinstance(src.driver_data, ItemImage):
            return delayed(_read_other, pure=True, traverse=False)(
                src, self.load, cfg, dst_geobox, self.driver, self.env, selection, dask_key_name=key)
        band, nodata = _band_index(src), _nodata(src)
        group = tokenize(src.uri, src.driver_data, nodata, *(getattr(cfg, name) for name in SHARED_CFG))
        bands = self.load.asked.setdefault(group, set())
        bands.add(band)
        request = ChunkRequest(src.uri, src.driver_data, bands, cfg, nodata)
        chunk = delayed(read_chunk, pure=True, traverse=False)(
            request, dst_geobox, dask_key_name=f"rumi-chunk-{tokenize(group, dst_geobox)}")
        return delayed(ChunkPixels.band, pure=True, traverse=False)(chunk, band, dask_key_name=key)


#: What of odc's load configuration a file's bands must share to be put on a chunk together.
SHARED_CFG = ("dtype", "fill_value", "src_nodata_fallback", "src_nodata_override", "resampling", "fail_on_error")


def _read_other(src, load, cfg, dst_geobox, driver, env, selection):
    with driver.restore_env(env, load) as local_ctx:
        return driver.open(src, local_ctx).read(cfg, dst_geobox, selection=selection)


def load(items, bands=None, **kwargs):
    """``odc.stac.load`` with :class:`RumiDriver`; ``items`` as :func:`pystac_items` takes them.

    >>> import numpy as np, tempfile, os, xarray_rumi, xarray_rumi.stac
    >>> path = os.path.join(tempfile.mkdtemp(), "scene.rumi")
    >>> blob = xarray_rumi.write(path, np.ones((2, 64, 64), "uint8"), tile_size=32, crs=32633,
    ...                          transform=(10, 0, 500000, 0, -10, 5000000))
    >>> items = [xarray_rumi.stac.item(path, blob, datetime="2024-05-01T10:00:00Z").to_dict()]
    >>> ds = load(items, crs="EPSG:3857", resolution=20, chunks={"x": 512, "y": 512})
    >>> sorted(ds.data_vars), ds.odc.crs.epsg
    (['data.1', 'data.2'], 3857)
    """
    import odc.stac

    if kwargs.pop("driver", None) is not None:
        raise TypeError("xarray_rumi.stac.load reads with the rumi driver; call odc.stac.load(driver=...) for another")
    return odc.stac.load(pystac_items(items), bands, driver=RumiDriver(kwargs.get("stac_cfg")), **kwargs)


def pystac_items(items):
    """pystac Items, lazily, from Items, their dicts, a FeatureCollection dict, or a stac-geoparquet path."""
    import pystac

    if isinstance(items, (str, bytes, os.PathLike)):
        path = os.fsdecode(items)
        try:
            geoparquet = is_stac_geoparquet(path)
        except ValueError as error:  # pyarrow's ArrowInvalid: not Parquet at all
            raise ValueError(f"{path!r} is not a stac-geoparquet file ({error}); xarray_rumi.stac.load takes STAC "
                             "Items, their dicts, a FeatureCollection dict, or a stac-geoparquet file's path") from None
        if not geoparquet:
            raise ValueError(f"{path!r} is not a stac-geoparquet file (its Parquet metadata does not say so: a rumi "
                             "catalog opens with xarray_rumi.open_catalog)")
        items = read_stac_geoparquet(path)
    elif isinstance(items, dict) or (hasattr(items, "to_dict") and hasattr(items, "assets")):  # one Item
        items = [items]
    return (pystac.Item.from_dict(item) if isinstance(item, dict) else item
            for given in items for item in (stac_item_dicts(given) if isinstance(given, dict) else [given]))


def _band_index(src) -> int:
    if src.band < 1:
        raise ValueError(f"{src.uri}: loading a rumi asset's bands as one variable with extra dims is not supported; "
                         "load them as one variable per band (the default)")
    return src.band - 1


def _nodata(src):
    return src.meta.nodata if src.meta is not None else None
