"""docs/cookbook.md runs: every ```python block, in order, in one namespace.

``base_url`` is a Range HTTP server for the working directory on 127.0.0.1,
so the Items' assets are URLs and the Cube and the chips read their pixels
over HTTP.  The page runs once for the module; the tests after the first
check what it made: the chips and batches of both start methods are the
files' pixels, a worker reads nothing before its first chip and then only the
frames each chip touches, and a batch asks for each frame it touches once.
"""

from __future__ import annotations

import multiprocessing
import pickle
import sys
from collections import Counter

import numpy as np
import pytest
from doc_blocks import python_blocks, run_blocks

import xarray_rumi
from xarray_rumi.format.head import ifd_head_ranges
from xarray_rumi.io.engine import plan_requests

PAGE = "docs/cookbook.md"
#: The first line of the block that is a module of its own (the chips Dataset), written beside the script.
MODULE = "# rumi_chips.py\n"
CHIP = 256


def test_doc_blocks_exist():
    blocks = python_blocks(PAGE)
    assert len(blocks) >= 8
    text = "\n".join(blocks)
    for needed in ("xarray_rumi.write", "xarray_rumi.stac.item", "open_cube(", ".median(", "quicklook",
                   "xbatcher.BatchGenerator", "__getitem__", '"fork"', '"spawn"', "read_windows", "__getitems__",
                   "np.from_dlpack", 'sampling="grid"', "convert_items("):
        assert needed in text, needed
    assert sum(block.startswith(MODULE) for block in blocks) == 1


@pytest.fixture(scope="module")
def cookbook(tmp_path_factory):
    """The page run once over HTTP: ``(namespace, server, directory, what the run saw)``."""
    pytest.importorskip("pystac")
    pytest.importorskip("xbatcher")
    from servers import RangeServer

    root = tmp_path_factory.mktemp("cookbook")
    seen = {}

    with pytest.MonkeyPatch.context() as patch, RangeServer(str(root)) as server:
        patch.chdir(root)  # the server serves root: files written here are online
        # rumi_chips.py is importable as beside a script; spawned workers inherit the path
        patch.syspath_prepend(str(root))

        def before(block):
            if block.startswith(MODULE):
                (root / "rumi_chips.py").write_text(block)
            if "open_cube" in block:
                server.requests.clear()

        def after(block):
            if "open_cube" in block:  # every block that opens a Cube (with Dask, then without)
                seen.setdefault("requests to open the Cube", []).extend(server.requests)

        namespace = {"base_url": server.url}
        run_blocks(PAGE, namespace, before_each=before, after_each=after)
        seen["pixel requests"] = server.get_requests()
        try:
            yield namespace, server, root, seen
        finally:
            sys.modules.pop("rumi_chips", None)


def test_cookbook_runs(cookbook):
    _, _, root, seen = cookbook
    assert seen["requests to open the Cube"] == [], "opening the Cube from the Items read something"
    assert seen["pixel requests"]  # the pixels came over HTTP
    for name in ("median.png", "last.png"):
        assert (root / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def local_pixels(namespace) -> list[np.ndarray]:
    """Each scene read whole from its file, straight into numpy: what every chip is compared with."""
    return [xarray_rumi.open_image(path, blob).read() for path, blob in zip(namespace["paths"], namespace["blobs"])]


def test_chips_of_both_start_methods_are_the_files_pixels(cookbook):
    namespace = cookbook[0]
    scenes, chips, drawn = local_pixels(namespace), namespace["chips"], namespace["drawn"]
    assert len(drawn["fork"]) == len(drawn["spawn"]) == len(chips) > 0
    assert len({image for image, _, _ in chips.places}) > 1  # chips of several scenes
    for method in ("fork", "spawn"):
        for (image, y, x), got in zip(chips.places, drawn[method]):
            np.testing.assert_array_equal(got, scenes[image][:, y:y + CHIP, x:x + CHIP], err_msg=method)


def test_xbatcher_batches_are_the_scenes_at_one_place(cookbook):
    namespace = cookbook[0]
    scenes, cube, batch = local_pixels(namespace), namespace["cube"], namespace["batch"]
    y0 = int(np.flatnonzero(cube.y.values == batch.y.values[0])[0])
    x0 = int(np.flatnonzero(cube.x.values == batch.x.values[0])[0])
    expected = np.stack([scene[:, y0:y0 + CHIP, x0:x0 + CHIP] for scene in scenes])
    np.testing.assert_array_equal(batch.values, expected)
    assert (y0, x0) != (0, 0)


def test_the_dataset_crosses_to_workers_with_nothing_open(cookbook):
    namespace = cookbook[0]
    chips = namespace["RumiChips"](namespace["collection"], size=CHIP, count=3, seed=2)
    chips[0]  # opens an image here
    assert chips._opened
    copy = pickle.loads(pickle.dumps(chips))
    assert copy._opened == {} and copy.places == chips.places
    np.testing.assert_array_equal(copy[1], chips[1])


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_worker_reads_nothing_before_its_first_chip_then_only_the_frames_each_chip_touches(cookbook, method):
    namespace, server, _, _ = cookbook
    paths, blobs = namespace["paths"], namespace["blobs"]
    images = [xarray_rumi.open_image(path, blob, georeferencing=False) for path, blob in zip(paths, blobs)]
    (head,) = ifd_head_ranges(images[0].grid)  # each worker checks each blob once against its file's head
    module = sys.modules["rumi_chips"]
    chips = module.RumiChips(namespace["collection"], size=CHIP, count=10, seed=3)
    server.requests.clear()
    with multiprocessing.get_context(method).Pool(2, initializer=module.start_worker, initargs=(chips,)) as pool:
        assert pool.map(abs, range(-4, 0)) == [4, 3, 2, 1]  # workers up, dataset received
        assert server.requests == [], "a worker read something before its first chip"
        heads, versions = Counter(), Counter()
        for index, (image, y, x) in enumerate(chips.places):
            server.requests.clear()
            np.testing.assert_array_equal(pool.apply(module.chip, (index,)),
                                          images[image].read(rows=slice(y, y + CHIP), cols=slice(x, x + CHIP)))
            touched = images[image].grid.frames_touching(range(4), range(y, y + CHIP), range(x, x + CHIP))
            starts, stops = images[image].header.ranges(touched)
            file = f"/{paths[image]}"
            versions[file] += sum(r.method == "HEAD" for r in server.requests)  # the version its reads keep to
            asked = sorted((r.method, r.path, r.range) for r in server.requests if r.method != "HEAD")
            # the frames, and the head when this worker checks the blob, in the read engine's merged requests
            checking = any(r[2][0] == head[0] for r in asked)
            heads[file] += checking
            ranges = [*zip(starts.tolist(), stops.tolist()), *([head] if checking else [])]
            planned = plan_requests([a for a, _ in ranges], [b for _, b in ranges])
            assert asked == sorted(("GET", file, (r.start, r.stop)) for r in planned), index
    assert all(count <= 2 for count in heads.values()), heads  # at most once per worker and file
    assert all(count <= 2 for count in versions.values()), versions


def test_grid_places_cover_every_scene_and_are_its_pixels(cookbook):
    namespace = cookbook[0]
    scenes, every = local_pixels(namespace), namespace["every"]
    assert sorted(every.places) == sorted((i, y, x) for i in range(len(scenes)) for y in (0, 256)
                                          for x in (0, 256, 512))
    for index in (0, 7, len(every) - 1):
        image, y, x = every.places[index]
        np.testing.assert_array_equal(every[index], scenes[image][:, y:y + CHIP, x:x + CHIP])


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_batch_in_a_worker_is_one_read_asking_each_touched_frame_once(cookbook, method):
    namespace, server, _, _ = cookbook
    scenes, paths, blobs = local_pixels(namespace), namespace["paths"], namespace["blobs"]
    images = [xarray_rumi.open_image(path, blob, georeferencing=False) for path, blob in zip(paths, blobs)]
    module = sys.modules["rumi_chips"]
    chips = module.RumiChips(namespace["collection"], size=CHIP, count=12, seed=4)
    chips.places[1] = (chips.places[0][0], chips.places[0][1] + 8, chips.places[0][2] + 8)  # two chips overlap
    with multiprocessing.get_context(method).Pool(1, initializer=module.start_worker, initargs=(chips,)) as pool:
        pool.apply(module.read_batch, (range(len(chips)),))  # the worker checks its blobs against the files
        server.requests.clear()
        got = pool.apply(module.read_batch, (range(len(chips)),))
    assert got.shape == (len(chips), 4, CHIP, CHIP)
    wanted = set()
    for (image, y, x), chip in zip(chips.places, got):
        np.testing.assert_array_equal(chip, scenes[image][:, y:y + CHIP, x:x + CHIP])
        touched = images[image].grid.frames_touching(range(4), range(y, y + CHIP), range(x, x + CHIP))
        wanted.update((f"/{paths[image]}", images[image].frame_range(k)) for k in touched.tolist())
    asked = [(r.path, r.range) for r in server.get_requests()]
    for path, (start, stop) in wanted:  # in exactly one request (a read engine may merge neighbours)
        assert sum(p == path and a <= start and stop <= b for p, (a, b) in asked) == 1, (path, start)
    assert len(asked) <= len(wanted)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_batches_of_local_files_in_workers_are_the_files_pixels(cookbook, method):
    namespace, _, root, _ = cookbook
    scenes, paths, blobs = local_pixels(namespace), namespace["paths"], namespace["blobs"]
    items = [namespace["xarray_rumi"].stac.item(str(root / path), blob, href=str(root / path),
                                                datetime="2024-05-01T10:00:00Z") for path, blob in zip(paths, blobs)]
    module = sys.modules["rumi_chips"]
    chips = module.RumiChips(items, size=CHIP, count=10, seed=5)
    with multiprocessing.get_context(method).Pool(2, initializer=module.start_worker, initargs=(chips,)) as pool:
        got = np.concatenate(pool.map(module.read_batch, [range(0, 5), range(5, 10)]))
    for (image, y, x), chip in zip(chips.places, got):
        np.testing.assert_array_equal(chip, scenes[image][:, y:y + CHIP, x:x + CHIP])
