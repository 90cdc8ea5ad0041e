"""Fixtures the writing tests share: each way to write a DataArray, and one process cluster."""

from __future__ import annotations

import logging

import pytest

import xarray_rumi

WAYS_TO_WRITE = {
    "write": lambda path, array, **options: xarray_rumi.write(path, array, **options),
    "to_rumi": lambda path, array, **options: array.rumi.to_rumi(path, **options),
    "dataset": lambda path, array, **options: array.to_dataset(name="band_data").rumi.to_rumi(path, **options),
}


@pytest.fixture(params=list(WAYS_TO_WRITE))
def write_each_way(request):
    """``xarray_rumi.write``, ``DataArray.rumi.to_rumi`` and ``Dataset.rumi.to_rumi``, in turn."""
    return WAYS_TO_WRITE[request.param]


@pytest.fixture(scope="module")
def client():
    """A client of two single-threaded worker processes, the default scheduler until the module ends."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster, distributed.Client(cluster) as client:
        yield client
