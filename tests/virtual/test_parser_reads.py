"""The VirtualiZarr parser reads its file as every other face does: retried, and a cut file named alike."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("virtualizarr")

import obstore  # noqa: E402
from flaky_server import FlakyProxy  # noqa: E402
from obspec_utils.registry import ObjectStoreRegistry  # noqa: E402
from obstore.store import HTTPStore  # noqa: E402
from servers import RangeServer  # noqa: E402

import xarray_rumi  # noqa: E402
from xarray_rumi import RetryPolicy, RumiFormatError  # noqa: E402
from xarray_rumi.format.blob import Header  # noqa: E402
from xarray_rumi.virtual.parser import RumiParser  # noqa: E402

VALUES = np.arange(2 * 40 * 48, dtype=np.uint16).reshape(2, 40, 48)
GEO = {"crs": 32618, "transform": (30.0, 0.0, 500000.0, 0.0, -30.0, 4000000.0)}


def _local() -> ObjectStoreRegistry:
    return ObjectStoreRegistry({"file://": obstore.store.LocalStore()})


@pytest.mark.parametrize("cut", ["inside-the-ifd", "inside-the-external-values", "inside-a-frame"])
@pytest.mark.parametrize("with_blob", [True, False])
def test_a_cut_file_is_refused_naming_the_rule_the_opener_names(tmp_path, cut, with_blob):
    path = tmp_path / "scene.rumi"
    blob = xarray_rumi.write(path, VALUES, tile_size=16, write_header=False, **GEO)
    header = Header.from_bytes(blob)
    keep = {"inside-the-ifd": 100, "inside-the-external-values": header.base_frame_offset - 50,
            "inside-a-frame": header.offset(5) + 3}[cut]
    os.truncate(path, keep)
    kwargs = {"header": blob} if with_blob else {}
    with pytest.raises(RumiFormatError) as opened:
        xarray_rumi.open_image(path, **kwargs)
    with pytest.raises(RumiFormatError) as parsed:   # an obstore panic (a BaseException) before
        RumiParser(**kwargs)(f"file://{path}", _local())
    assert parsed.value.rule == opened.value.rule in ("file-profile.truncated", "frames.truncated")


def _over_http(proxy) -> ObjectStoreRegistry:
    # the store's own retries off, so that the attempts counted are the policy's
    store = HTTPStore.from_url(proxy.url, client_options={"allow_http": True}, retry_config={"max_retries": 0})
    return ObjectStoreRegistry({proxy.url: store})


def test_the_parsers_reads_are_retried_under_its_policy(tmp_path):
    blob = xarray_rumi.write(tmp_path / "a.rumi", VALUES, tile_size=16, **GEO)
    with RangeServer(str(tmp_path)) as origin:
        with FlakyProxy(origin.url, ["503", "drop"]) as proxy:
            parser = RumiParser(header=blob, retry=RetryPolicy(attempts=3, backoff=0.001))
            parser(f"{proxy.url}/a.rumi", _over_http(proxy))   # the blob's check and the georeferencing
        assert proxy.faults_injected == ["503", "drop"]
        with FlakyProxy(origin.url, always="503") as proxy:   # and given up as every read gives up
            parser = RumiParser(header=blob, retry=RetryPolicy(attempts=2, backoff=0.001))
            with pytest.raises(OSError, match="after 2 attempts"):
                parser(f"{proxy.url}/a.rumi", _over_http(proxy))
        assert proxy.faults_injected == ["503", "503"]
