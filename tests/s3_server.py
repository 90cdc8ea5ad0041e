"""A moto S3 server on 127.0.0.1 for tests that read rumi files from S3 with s3fs.

Credentials are fake and set for the duration only; ``AWS_EC2_METADATA_DISABLED``
keeps botocore from ever asking an address other than the server's.
"""

from __future__ import annotations

import contextlib
import socket
import urllib.request

import pytest


@contextlib.contextmanager
def s3_server(bucket: str):
    """Yield s3fs storage options for a fresh moto server holding an empty ``bucket``."""
    moto_server = pytest.importorskip("moto.server")
    s3fs = pytest.importorskip("s3fs")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    # moto keeps its buckets in process memory, shared by every server it starts:
    # begin from nothing, so an earlier test's bucket cannot collide with this one.
    urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/moto-api/reset", method="POST"))
    try:
        # moto keeps its buckets in process-wide state that outlives a server:
        # start every server empty, whatever an earlier test left behind.
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/moto-api/reset", method="POST"))
        with pytest.MonkeyPatch.context() as env:
            for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                                "AWS_DEFAULT_REGION": "eu-west-1", "AWS_EC2_METADATA_DISABLED": "true"}.items():
                env.setenv(name, value)
            # Explicit options travel with every task to worker processes, which
            # do not share this process's environment.
            options = {"key": "testing", "secret": "testing", "endpoint_url": f"http://127.0.0.1:{port}",
                       "client_kwargs": {"region_name": "eu-west-1"}}
            s3fs.S3FileSystem(**options).mkdir(bucket)
            yield options
    finally:
        server.stop()
