"""The rules every command follows (cli/shared.py), tested command by command.

- outputs: ``-o/--output`` in every command that writes; positional arguments are inputs (``convert IN OUT``
  as well, the guide's form);
- the blob: ``--header``, else ``FILE.header`` when it exists, else rebuilt from the IFD;
- ``--storage-options`` for every FILE, blob and output that is a URL.
"""

from __future__ import annotations

import json
import os

import fsspec
import numpy as np
import pytest
from cli_runs import needs, run
from fsspec.implementations.local import LocalFileSystem

import xarray_rumi
from xarray_rumi.cli import main
from xarray_rumi.writing import staging

#: Each command that reads one rumi file, with the options that keep it from writing beside the file.
READERS = {
    "info": [], "validate": [], "quicklook": ["-o", "-"], "stac": ["-o", "-"], "refs": ["-o", "-"],
}


# -- the blob beside a file --------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", READERS)
def test_every_reader_reads_the_blob_beside_the_file(capsysbinary, scene, command):
    needs(command)
    path, blob = scene, (scene.parent / "a.rumi.header").read_bytes()
    (path.parent / "a.rumi.header").write_bytes(b"EVOL" + blob[4:])  # damaged: read, it is refused
    assert main([command, str(path), *READERS[command]]) == 1
    assert b"blob.magic: expected 0x45564F4C" in b"".join(capsysbinary.readouterr())
    (path.parent / "a.rumi.header").unlink()  # none beside: rebuilt from the IFD
    assert main([command, str(path), *READERS[command]]) == 0


@pytest.mark.parametrize("command", ["info", "validate", "quicklook"])
def test_header_wins_over_the_blob_beside(capsysbinary, scene, command):
    path, blob = scene, (scene.parent / "a.rumi.header").read_bytes()
    (path.parent / "a.rumi.header").write_bytes(b"EVOL" + blob[4:])
    given = path.parent / "given.header"
    given.write_bytes(blob)
    assert main([command, str(path), "--header", str(given), *READERS[command]]) == 0


def test_validate_says_which_blob_it_checked(capsys, scene):
    path = scene
    status, out, _ = run(capsys, "validate", path)
    assert status == 0 and out == f"{path}: valid rumi 0.1.0, and so is its blob {path}.header\n"
    os.remove(f"{path}.header")
    assert run(capsys, "validate", path)[1] == f"{path}: valid rumi 0.1.0\n"


def test_header_rebuilds_the_blob_without_reading_the_one_beside(capsys, scene):
    path, blob = scene, (scene.parent / "a.rumi.header").read_bytes()
    (path.parent / "a.rumi.header").write_bytes(b"EVOL" + blob[4:])
    assert run(capsys, "header", path)[0] == 0
    assert (path.parent / "a.rumi.header").read_bytes() == blob


# -- outputs -------------------------------------------------------------------------------------------------------


def test_every_writer_takes_dash_o(capsys, tmp_path, scene):
    pytest.importorskip("pystac")
    pytest.importorskip("kerchunk")
    path, blob = scene, (scene.parent / "a.rumi.header").read_bytes()
    out = tmp_path / "out"
    out.mkdir()
    assert run(capsys, "header", path, "-o", out / "h.header")[0] == 0
    assert run(capsys, "quicklook", path, "-o", out / "q.png")[0] == 0
    assert run(capsys, "refs", path, "-o", out / "r.json")[0] == 0
    assert run(capsys, "stac", path, "-o", out / "s.json")[0] == 0
    assert run(capsys, "demo", "-o", out / "demo")[0] == 0
    assert (out / "h.header").read_bytes() == blob
    assert (out / "q.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((out / "r.json").read_text())["version"] == 1
    assert json.loads((out / "s.json").read_text())["type"] == "Feature"
    assert sorted(p.name for p in (out / "demo").iterdir()) == ["demo.rumi", "demo.rumi.header"]


def test_quicklook_writes_beside_the_file_by_default(capsys, scene):
    path = scene
    assert run(capsys, "quicklook", path)[0] == 0
    assert (path.parent / "a.rumi.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("argv", [["quicklook", "{file}", "{dir}/q.png"], ["demo", "{dir}/demo"]])
def test_an_output_given_as_a_positional_argument_is_a_usage_error(capsys, tmp_path, scene, argv):
    with pytest.raises(SystemExit) as exit_:
        main([a.format(file=scene, dir=tmp_path) for a in argv])
    assert exit_.value.code == 2 and "unrecognized arguments" in capsys.readouterr().err
    assert not (tmp_path / "q.png").exists() and not (tmp_path / "demo").exists()


@pytest.fixture
def tif(tmp_path):
    rasterio = pytest.importorskip("rasterio")
    pytest.importorskip("tqdm")
    source = tmp_path / "in.tif"
    with rasterio.open(source, "w", driver="GTiff", width=32, height=32, count=1, dtype="uint16") as dst:
        dst.write(np.arange(32 * 32, dtype=np.uint16).reshape(1, 32, 32))
    return source


def test_convert_takes_its_output_as_the_last_argument_or_dash_o(capsys, tmp_path, tif):
    assert run(capsys, "convert", tif, tmp_path / "positional.rumi", "--tile-size", 16)[0] == 0
    assert run(capsys, "convert", tif, "-o", tmp_path / "option.rumi", "--tile-size", 16)[0] == 0
    assert (tmp_path / "positional.rumi").read_bytes() == (tmp_path / "option.rumi").read_bytes()
    (tmp_path / "dir").mkdir()
    assert run(capsys, "convert", tif, tif, "-o", tmp_path / "dir")[0] == 1   # both would write dir/in.rumi
    status, _, err = run(capsys, "convert", tif)
    assert status == 2 and err == ("rumi convert: give the output: -o OUT_OR_DIR, or OUT as the last argument "
                                   "(rumi convert in.tif out.rumi)\n")


def test_stac_writes_through_the_staging_writer(capsys, tmp_path, scene, monkeypatch):
    pytest.importorskip("pystac")
    path = scene
    out = tmp_path / "items.json"
    out.write_text("previous")
    real_replace = os.replace

    def full_disk(source, target, *args, **kwargs):
        if os.fspath(target) == str(out):
            raise OSError(28, "No space left on device")
        return real_replace(source, target, *args, **kwargs)

    monkeypatch.setattr(staging.os, "replace", full_disk)
    status, _, err = run(capsys, "stac", path, "-o", out)
    assert status == 1 and err.startswith(f"rumi stac: cannot write {out}: ")
    assert out.read_text() == "previous" and sorted(p.name for p in tmp_path.iterdir()) == [
        "a.rumi", "a.rumi.header", "items.json"]


# -- --storage-options -------------------------------------------------------------------------------------------


class GuardedFileSystem(LocalFileSystem):
    """Local files behind a URL scheme whose file system opens only with ``token="secret"``."""

    protocol = ("rumitest",)

    def __init__(self, *args, token=None, **kwargs):
        if token != "secret":
            raise PermissionError("rumitest needs token='secret'")
        super().__init__(*args, **kwargs)

    @classmethod
    def _strip_protocol(cls, path):
        return super()._strip_protocol(path.removeprefix("rumitest://"))

    def unstrip_protocol(self, name):
        return "rumitest://" + name


OPTIONS = ["--storage-options", '{"token": "secret"}']


@pytest.fixture
def guarded():
    fsspec.register_implementation("rumitest", GuardedFileSystem, clobber=True)
    return lambda path: f"rumitest://{path}"


@pytest.mark.parametrize("command", [*READERS, "header"])
def test_every_reader_gives_its_storage_options_to_the_file_and_its_blob(capsysbinary, scene, guarded, command):
    needs(command)
    path = scene
    extra = ["-o", "-"] if command == "header" else READERS[command]
    assert main([command, guarded(path), *extra, *OPTIONS]) == 0
    capsysbinary.readouterr()
    assert main([command, guarded(path), *extra]) == 1
    assert f"rumi {command}: cannot read rumitest://{path}: rumitest needs token='secret'".encode() in \
        b"".join(capsysbinary.readouterr())   # validate's verdict, refusals included, is its standard output


def test_validate_reads_the_remote_blob_beside_with_the_options(capsys, scene, guarded):
    path = scene
    status, out, _ = run(capsys, "validate", guarded(path), *OPTIONS)
    assert status == 0 and out.endswith(f"its blob rumitest://{path}.header\n")


@pytest.mark.parametrize("command", ["header", "quicklook", "stac", "refs"])
def test_every_writer_gives_its_storage_options_to_a_url_output(capsys, tmp_path, scene, guarded, command):
    needs(command)
    path = scene
    out = tmp_path / f"out.{command}"
    assert run(capsys, command, path, "-o", guarded(out), *OPTIONS)[0] == 0 and out.exists()
    out.unlink()
    status, _, err = run(capsys, command, path, "-o", guarded(out))
    assert status == 1 and "rumitest needs token='secret'" in err and not out.exists()


def test_convert_gives_its_storage_options_to_a_url_output(capsys, tmp_path, tif, guarded):
    out = tmp_path / "out.rumi"
    assert run(capsys, "convert", tif, "-o", guarded(out), "--tile-size", 16, *OPTIONS)[0] == 0
    assert xarray_rumi.open_image(out).read().shape == (1, 32, 32)


# -- error prefixes: the file is named once ----------------------------------------------------------------------


@pytest.mark.parametrize("command", ["refs", "stac", "info"])
def test_a_refusal_that_names_the_file_is_not_prefixed_with_it_again(capsys, scene, command):
    needs(command)
    path = scene
    path.write_bytes(path.read_bytes()[:-5])  # the blob beside it says the frames end 5 bytes later
    status, _, err = run(capsys, command, path, *(["-o", "-"] if command != "info" else []))
    assert status == 1
    assert err.startswith(f"rumi {command}: frames.truncated: {path} is ")
    assert err.count(str(path)) == 1


def test_a_refusal_that_does_not_name_the_file_is_prefixed_with_it(capsys, tmp_path, scene):
    pytest.importorskip("pystac")
    path = scene
    other = tmp_path / "b.rumi"
    other.write_bytes(b"\x3f\xa0" + bytes(300))
    status, _, err = run(capsys, "stac", path, other)
    assert status == 1 and err == (f"rumi stac: {other}: file-profile.little-endian: not a rumi file: it does not "
                                   "begin with a TIFF header (II, got b'?\\xa0')\n")


@pytest.mark.parametrize("command", ["info", "validate", "header", "quicklook", "stac", "refs", "convert"])
@pytest.mark.parametrize("text, said", [("[1]", "must be a JSON object, got '[1]'"), ("{", "not JSON: ")])
def test_storage_options_that_are_not_a_json_object_are_a_usage_error(capsys, command, text, said):
    needs(command)
    with pytest.raises(SystemExit) as exit_:
        main([command, *(["in.tif", "out.rumi"] if command == "convert" else ["a.rumi"]), "--storage-options", text])
    assert exit_.value.code == 2
    assert f"rumi {command}: error: argument --storage-options: {said}" in capsys.readouterr().err


def test_two_inputs_of_one_name_are_refused_before_anything_is_written(tmp_path):
    from xarray_rumi.cli.convert import target_paths
    from xarray_rumi.cli.shared import Refused

    with pytest.raises(Refused, match="two inputs would write the same output name"):
        target_paths([str(tmp_path / "a" / "in.tif"), str(tmp_path / "b" / "in.tif")], str(tmp_path) + os.sep)
    assert target_paths(["a/x.tif", "b/y.tif"], "out/") == [os.path.join("out/", n) for n in ("x.rumi", "y.rumi")]


def test_an_output_under_a_file_names_the_file_that_is_not_a_folder(capsys, tmp_path, scene):
    (tmp_path / "plain").write_text("not a folder")
    status, _, err = run(capsys, "quicklook", scene, "-o", tmp_path / "plain" / "q.png")
    assert status == 1 and f"{tmp_path / 'plain'} is not a folder" in err
