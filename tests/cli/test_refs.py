"""``rumi refs``: JSON and Parquet references written through fsspec, whole or not at all, Cubes built through
VirtualiZarr.

Everything is read back as a user would, with xarray's defaults (no
``mask_and_scale=False``, no ``consolidated=False``): zeros are real values
and must not come back as NaN.
"""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("virtualizarr")
pytest.importorskip("fastparquet")   # what fsspec reads Parquet references with

import xarray_rumi  # noqa: E402
from xarray_rumi.cli import main  # noqa: E402
from xarray_rumi.format.blob import Header  # noqa: E402
from xarray_rumi.reading.open import FIRST_READ  # noqa: E402
from xarray_rumi.cli import refs as rumi_refs  # noqa: E402
from xarray_rumi.cli.refs import write_references  # noqa: E402
from xarray_rumi.virtual.kerchunk import cube_references, references  # noqa: E402

UTM = dict(crs=32633, transform=(10.0, 0.0, 500000.0, 0.0, -10.0, 6000000.0))

# kerchunk writes Parquet references through fsspec, whose default engine pandas 3.1 deprecates
pytestmark = pytest.mark.filterwarnings("ignore:The .fastparquet. engine is deprecated")


def open_refs(out, remote_protocol="file", **options) -> xr.Dataset:
    """The documented read: ``fo`` is the JSON file or the Parquet directory; nothing else but where the frames are."""
    with warnings.catch_warnings():
        # fsspec reads Parquet references with fastparquet, which pandas 3.1 deprecates
        warnings.filterwarnings("ignore", message=".*fastparquet.*")
        warnings.filterwarnings("error", message=".*consolidated metadata.*")   # the references carry it
        return xr.open_dataset("reference://", engine="zarr", backend_kwargs={"storage_options": {
            "fo": out, "remote_protocol": remote_protocol, **options}}).load()


def cube_files(directory, size=1000, tile=256, bands=2):
    """Three grid-aligned files of constant data, the first all zeros.

    1000 x 1000 in 256 px tiles: right-edge (256, 232) and bottom-edge
    (232, 256) frames hold the same number of samples, and constant data
    compresses them to the same length, so only the references tell them apart.
    """
    paths, stack = [], []
    for n in range(3):
        data = np.full((bands, size, size), n * 7, np.uint16)
        paths.append(str(directory / f"t{n}.rumi"))
        xarray_rumi.write(paths[-1], data, tile_size=tile, **UTM)   # writes t{n}.rumi.header beside it
        stack.append(data)
    return paths, np.stack(stack)


def assert_cube(ds, expected, sources, first):
    assert ds.band_data.dims == ("time", "band", "y", "x")
    np.testing.assert_array_equal(ds.band_data.values, expected)
    assert ds.band_data.dtype == expected.dtype   # not float: nothing masked
    assert ds.band_data.attrs["rumi_sources"] == sources
    assert int(ds.spatial_ref) == 0
    engine = xr.open_dataset(first, engine="rumi")
    assert ds.spatial_ref.attrs == engine.spatial_ref.attrs
    for name in ("band", "x", "y"):
        np.testing.assert_array_equal(ds[name].values, engine[name].values)


@pytest.mark.parametrize("name", ["cube.json", "cube.parq"])
def test_cube_through_virtualizarr_reads_back_with_xarray_defaults(tmp_path, name):
    paths, expected = cube_files(tmp_path)
    out = tmp_path / name
    assert main(["refs", *paths, "--cube", "time", "-o", str(out)]) == 0
    assert out.is_dir() == name.endswith(".parq")
    ds = open_refs(str(out))
    assert_cube(ds, expected, paths, paths[0])
    # the dependency-light path (xarray_rumi.virtual.kerchunk.cube_references) shows the same Cube
    own = open_refs(cube_references(paths, "time"))
    xr.testing.assert_identical(ds, own)


def test_cube_references_carry_null_fill_values(tmp_path):
    paths, _ = cube_files(tmp_path, size=70, tile=32, bands=1)
    out = tmp_path / "cube.json"
    assert main(["refs", *paths, "--cube", "time", "-o", str(out)]) == 0
    refs = json.loads(out.read_text())["refs"]
    for name in ("band_data", "spatial_ref", "x", "y", "band"):
        assert json.loads(refs[f"{name}/.zarray"])["fill_value"] is None, name
        assert "_FillValue" not in json.loads(refs[f"{name}/.zattrs"]), name
    assert refs["spatial_ref/0"] == "base64:AAAAAAAAAAA="   # int64 0, under the key zarr asks for
    assert "spatial_ref/" not in refs
    assert ".zmetadata" in refs


def test_rotated_cube_inlines_its_2d_coordinates(tmp_path):
    rotated = dict(crs=4326, transform=(0.001, 0.0002, 10.0, 0.0003, -0.001, 50.0))
    paths = []
    for n in range(3):
        paths.append(str(tmp_path / f"r{n}.rumi"))
        xarray_rumi.write(paths[-1], np.full((1, 20, 30), n, np.uint8), tile_size=16, **rotated)
    out = tmp_path / "cube.json"
    assert main(["refs", *paths, "--cube", "time", "-o", str(out)]) == 0
    assert "memory://" not in out.read_text()   # the parser's in-memory coordinate store stays in memory
    ds = open_refs(str(out))
    engine = xr.open_dataset(paths[0], engine="rumi")
    np.testing.assert_array_equal(ds.xc.values, engine.xc.values)
    np.testing.assert_array_equal(ds.band_data.values, np.arange(3, dtype=np.uint8)[:, None, None, None]
                                  * np.ones((1, 1, 20, 30), np.uint8))


def test_misaligned_files_are_refused_before_anything_is_written(tmp_path, capsys):
    a, b = str(tmp_path / "a.rumi"), str(tmp_path / "b.rumi")
    xarray_rumi.write(a, np.zeros((1, 32, 32), "uint8"), tile_size=16, **UTM)
    xarray_rumi.write(b, np.zeros((1, 32, 32), "uint8"), tile_size=16, crs=32633,
                      transform=(10.0, 0.0, 500010.0, 0.0, -10.0, 6000000.0))
    out = tmp_path / "cube.json"
    assert main(["refs", a, b, "--cube", "time", "-o", str(out)]) == 1   # refused input, as --help says
    assert capsys.readouterr().err.startswith("rumi refs: cannot stack into a Cube: image 1")
    assert not out.exists()
    assert main(["refs", a, a, "--cube", "band", "-o", str(out)]) == 2   # a usage error
    assert "the stacking dimension must be new" in capsys.readouterr().err


def test_single_files_as_parquet(tmp_path):
    data = np.zeros((2, 70, 70), np.int16)   # zeros: masked to NaN if a fill value were written
    data[1, 5:40, 3:66] = -4
    path = str(tmp_path / "a.rumi")
    xarray_rumi.write(path, data, tile_size=32, **UTM)
    assert main(["refs", path, "--format", "parquet"]) == 0
    np.testing.assert_array_equal(open_refs(path + ".parq").band_data.values, data)
    assert main(["refs", path, "-o", str(tmp_path / "named.parquet")]) == 0
    np.testing.assert_array_equal(open_refs(str(tmp_path / "named.parquet")).band_data.values, data)
    second = str(tmp_path / "b.rumi")
    xarray_rumi.write(second, data[::-1], tile_size=32, **UTM)
    assert main(["refs", path, second, "--format", "parquet", "-o", str(tmp_path / "many")]) == 0
    assert sorted(os.listdir(tmp_path / "many")) == ["a.rumi.parq", "b.rumi.parq"]
    np.testing.assert_array_equal(open_refs(str(tmp_path / "many" / "b.rumi.parq")).band_data.values, data[::-1])


def test_every_option_says_its_default():
    import argparse
    import re

    subparsers = argparse.ArgumentParser().add_subparsers()
    rumi_refs.add_command(subparsers)
    text = subparsers.choices["refs"].format_help().split("options:", 1)[1]
    blocks = re.split(r"\n(?=  -)", text.strip("\n"))   # one block per option, its help text included
    options = {re.search(r"--[\w-]+", block).group(): " ".join(block.split()) for block in blocks}
    assert set(options) == {"--help", "--output", "--format", "--cube", "--storage-options"}
    for option, help_text in options.items():
        assert option == "--help" or "(default:" in help_text, option


def test_rumi_refs_over_http_uses_the_blob_beside_the_file(tmp_path, http_server):
    data = np.random.default_rng(0).integers(0, 1000, (1, 64, 64), endpoint=True).astype(np.uint16)
    xarray_rumi.write(str(tmp_path / "a.rumi"), data, tile_size=32, **UTM)   # also writes a.rumi.header
    out = tmp_path / "a.json"
    http_server.requests.clear()
    assert main(["refs", f"{http_server.url}/a.rumi", "-o", str(out)]) == 0
    file_reads = [r.range for r in http_server.get_requests() if r.path == "/a.rumi"]
    # the blob located every frame: the file's first bytes (IFD head and georeferencing; FIRST_READ,
    # here the whole small file) come in one request, sent while the blob is fetched
    header = xarray_rumi.header_from_file(str(tmp_path / "a.rumi"))
    assert file_reads == [(0, min(FIRST_READ, (tmp_path / "a.rumi").stat().st_size))]
    assert Header.from_bytes(header).base_frame_offset <= file_reads[0][1]
    ds = open_refs(str(out), remote_protocol="http", remote_options={"asynchronous": True})
    np.testing.assert_array_equal(ds.band_data.values, data)


def test_rumi_refs_command(tmp_path, capsys):
    import argparse

    paths = []
    for n in range(2):
        paths.append(str(tmp_path / f"s{n}.rumi"))
        data = np.random.default_rng(n).integers(0, 255, (1, 40, 40), endpoint=True).astype(np.uint8)
        xarray_rumi.write(paths[-1], data, tile_size=16, **UTM)
    assert main(["refs", paths[0]]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {paths[0]}.json: 9 frame references, 2 moved"  # random bytes: edges of equal size
    single = json.load(open(paths[0] + ".json"))
    assert single == references(paths[0])
    out_dir = tmp_path / "refs"
    assert main(["refs", *paths, "-o", str(out_dir)]) == 0
    assert sorted(p.name for p in out_dir.iterdir()) == ["s0.rumi.json", "s1.rumi.json"]
    cube = tmp_path / "cube.json"
    assert main(["refs", *paths, "--cube", "time", "-o", str(cube)]) == 0
    ds = open_refs(str(cube))
    assert ds.sizes["time"] == 2
    # add_command is what the rumi parser picks up; it sets run= and takes the Namespace
    parser = argparse.ArgumentParser()
    rumi_refs.add_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["refs", paths[0], "--cube", "t"])
    with pytest.raises(ValueError, match="--cube needs -o"):  # a usage error: main() says it, exit status 2
        args.run(args)
    assert main(["refs", paths[0], "--cube", "t"]) == 2
    assert "rumi refs: --cube needs -o OUT" in capsys.readouterr().err


# -- nothing half-written ----------------------------------------------------------


def _listing(directory):
    return sorted(os.listdir(directory))


@pytest.mark.parametrize("name", ["a.json", "a.parq"])
def test_a_failure_leaves_the_previous_output_and_no_litter(tmp_path, monkeypatch, name):
    path = str(tmp_path / "a.rumi")
    data = np.arange(2 * 40 * 40, dtype=np.uint16).reshape(2, 40, 40)
    xarray_rumi.write(path, data, tile_size=16, **UTM)
    out = str(tmp_path / name)
    assert main(["refs", path, "-o", out]) == 0
    before = _listing(tmp_path)
    import kerchunk.df as kerchunk_df

    def half_then_fail(refs, url, **kwargs):   # writes some record files, then dies
        os.makedirs(os.path.join(url, "band_data"))
        open(os.path.join(url, "band_data", "refs.0.parq"), "wb").write(b"partial")
        raise OSError("disk full")

    def fail_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(kerchunk_df, "refs_to_dataframe", half_then_fail)
    monkeypatch.setattr(os, "replace", fail_replace)   # the JSON's rename over the previous output
    assert main(["refs", str(tmp_path / "a.rumi"), "-o", out]) == 1
    monkeypatch.undo()
    assert _listing(tmp_path) == before   # no temporary file or staging directory left
    np.testing.assert_array_equal(open_refs(out).band_data.values, data)   # the previous output, whole


def test_a_new_local_output_that_fails_leaves_nothing(tmp_path, monkeypatch):
    path = str(tmp_path / "a.rumi")
    xarray_rumi.write(path, np.ones((1, 40, 40), np.uint8), tile_size=16)
    before = _listing(tmp_path)

    def fail_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail_replace)   # the last step of both formats
    for out in ("new.json", "new.parq"):
        assert main(["refs", path, "-o", str(tmp_path / out)]) == 1
        assert _listing(tmp_path) == before


# -- S3 (moto on 127.0.0.1, started and stopped here) --------------------------------


@pytest.fixture
def s3():
    from s3_server import s3_server

    with s3_server("bucket") as options:
        with pytest.MonkeyPatch.context() as env:
            # what obstore (the registry of --cube) and s3fs (without --storage-options) read
            env.setenv("AWS_ENDPOINT_URL", options["endpoint_url"])
            env.setenv("AWS_ALLOW_HTTP", "true")
            yield options


@pytest.mark.parametrize("name", ["cube.json", "cube.parq"])
def test_cube_to_s3(tmp_path, s3, name):
    import s3fs

    paths, expected = cube_files(tmp_path)
    out = f"s3://bucket/refs/{name}"
    assert main(["refs", *paths, "--cube", "time", "-o", out, "--storage-options", json.dumps(s3)]) == 0
    fs = s3fs.S3FileSystem(**s3)
    if name.endswith(".parq"):
        names = sorted(p.removeprefix(f"bucket/refs/{name}/") for p in fs.find(out))
        assert ".zmetadata" in names and "band_data/refs.0.parq" in names
    ds = open_refs(out, target_options=s3)
    assert_cube(ds, expected, paths, paths[0])


def test_cube_of_files_on_s3_to_s3(tmp_path, s3):
    urls, stack = [], []
    for n in range(3):
        data = np.full((1, 100, 100), n, np.uint8)
        urls.append(f"s3://bucket/scenes/t{n}.rumi")
        xarray_rumi.write(urls[-1], data, tile_size=32, storage_options=s3, **UTM)   # and t{n}.rumi.header
        stack.append(data)
    out = "s3://bucket/refs/s3cube.parq"
    assert main(["refs", *urls, "--cube", "time", "-o", out]) == 0   # credentials and endpoint from the environment
    ds = open_refs(out, remote_protocol="s3", target_options=s3, remote_options={**s3, "asynchronous": True})
    np.testing.assert_array_equal(ds.band_data.values, np.stack(stack))
    assert ds.band_data.attrs["rumi_sources"] == urls


def test_a_failed_upload_leaves_nothing_on_s3(tmp_path, s3, monkeypatch):
    import s3fs

    paths, _ = cube_files(tmp_path, size=70, tile=32, bands=1)
    fs = s3fs.S3FileSystem(**s3)   # fsspec caches file systems: the very instance the command writes with
    uploads = []
    put_file = fs.put_file

    def second_upload_fails(lpath, rpath, *args, **kwargs):
        uploads.append(rpath)
        if len(uploads) == 2:
            raise OSError("connection reset")
        return put_file(lpath, rpath, *args, **kwargs)

    def upload_fails(path, *args, **kwargs):
        raise OSError("connection reset")

    monkeypatch.setattr(fs, "put_file", second_upload_fails)
    assert main(["refs", *paths, "--cube", "time", "-o", "s3://bucket/refs/cube.parq",
                 "--storage-options", json.dumps(s3)]) == 1
    assert len(uploads) == 2 and not any(u.endswith(".zmetadata") for u in uploads)
    fs.invalidate_cache()
    assert not fs.exists("bucket/refs/cube.parq")
    monkeypatch.setattr(fs, "open", upload_fails)   # the staged JSON's upload
    assert main(["refs", paths[0], "-o", "s3://bucket/refs/a.json", "--storage-options", json.dumps(s3)]) == 1
    fs.invalidate_cache()
    assert fs.find("bucket/refs") == []


def test_single_file_references_to_s3(tmp_path, s3):
    path = str(tmp_path / "a.rumi")
    data = np.zeros((1, 64, 64), np.uint16)
    xarray_rumi.write(path, data, tile_size=32, **UTM)
    assert main(["refs", path, "-o", "s3://bucket/a.json", "--storage-options", json.dumps(s3)]) == 0
    ds = open_refs("s3://bucket/a.json", target_options=s3)
    np.testing.assert_array_equal(ds.band_data.values, data)
    assert json.loads(__import__("s3fs").S3FileSystem(**s3).cat("bucket/a.json")) == references(path)


# -- HTTP ------------------------------------------------------------------------------


def test_cube_of_files_over_http(tmp_path, http_server):
    paths, expected = cube_files(tmp_path, size=70, tile=32, bands=1)
    urls = [f"{http_server.url}/{os.path.basename(p)}" for p in paths]
    out = tmp_path / "cube.json"
    assert main(["refs", *urls, "--cube", "time", "-o", str(out)]) == 0
    refs = json.loads(out.read_text())["refs"]
    assert refs["band_data/2.0.0.0"][0] == urls[2]
    ds = open_refs(str(out), remote_protocol="http", remote_options={"asynchronous": True})
    np.testing.assert_array_equal(ds.band_data.values, expected)


def test_write_references_refuses_an_unknown_format(tmp_path):
    with pytest.raises(ValueError, match="json, parquet"):
        write_references({"version": 1, "refs": {}}, str(tmp_path / "x"), format="csv")


def test_cube_is_built_with_what_virtualizarr_users_run(tmp_path, monkeypatch):
    import virtualizarr

    from xarray_rumi import RumiParser

    paths, expected = cube_files(tmp_path, size=70, tile=32, bands=1)
    calls = []
    open_virtual_dataset, concat = virtualizarr.open_virtual_dataset, xr.concat

    def spy_open(url, **kwargs):
        calls.append(("open", url, type(kwargs["parser"])))
        return open_virtual_dataset(url, **kwargs)

    def spy_concat(objs, **kwargs):
        calls.append(("concat", kwargs["dim"], kwargs["coords"], kwargs["compat"]))
        return concat(objs, **kwargs)

    monkeypatch.setattr(virtualizarr, "open_virtual_dataset", spy_open)
    monkeypatch.setattr(xr, "concat", spy_concat)
    assert main(["refs", *paths, "--cube", "time", "-o", str(tmp_path / "cube.json")]) == 0
    assert calls == [("open", f"file://{p}", RumiParser) for p in paths] + [("concat", "time", "minimal", "override")]
    np.testing.assert_array_equal(open_refs(str(tmp_path / "cube.json")).band_data.values, expected)


# -- a remote FILE read with the command's own --storage-options ---------------------------------------------------


@pytest.fixture
def s3_without_environment(monkeypatch):
    """A moto S3 server whose endpoint and credentials are given only as options, never through the environment."""
    from s3_server import s3_server

    with s3_server("bucket") as options:
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
            monkeypatch.delenv(name, raising=False)
        yield options


def test_refs_reads_a_remote_file_and_its_blob_with_its_storage_options(tmp_path, s3_without_environment, capsys):
    options = s3_without_environment
    data = np.arange(64 * 64, dtype=np.uint16).reshape(1, 64, 64)
    xarray_rumi.write("s3://bucket/a.rumi", data, tile_size=32, storage_options=options, **UTM)   # and a.rumi.header
    out = tmp_path / "a.json"
    assert main(["refs", "s3://bucket/a.rumi", "-o", str(out), "--storage-options", json.dumps(options)]) == 0
    assert capsys.readouterr().err == ""
    ds = open_refs(str(out), remote_protocol="s3", remote_options={**options, "asynchronous": True})
    np.testing.assert_array_equal(ds.band_data.values, data)


def test_refs_says_cannot_read_when_storage_fails_looking_for_the_blob(tmp_path, s3_without_environment, capsys):
    options = s3_without_environment
    xarray_rumi.write("s3://bucket/a.rumi", np.zeros((1, 32, 32), np.uint8), tile_size=32, storage_options=options)
    unreachable = {**options, "endpoint_url": "http://127.0.0.1:9"}   # nothing listens on the discard port
    out = tmp_path / "a.json"
    assert main(["refs", "s3://bucket/a.rumi", "-o", str(out), "--storage-options", json.dumps(unreachable)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rumi refs: cannot read s3://bucket/a.rumi: ") and err.count("\n") == 1, err
    assert "a.rumi.header" in err and "EndpointConnectionError" in err
    assert main(["refs", "s3://bucket/a.rumi", "-o", str(out)]) == 1   # no credentials anywhere: one line too
    err = capsys.readouterr().err
    assert err.startswith("rumi refs: cannot read s3://bucket/a.rumi: ") and err.count("\n") == 1, err
    assert not out.exists()
