"""docs/backend.md runs: every ```python block, in order, in one namespace.

``base_url`` is a Range HTTP server for the working directory and
``s3_options`` a moto S3 server with a ``scenes`` bucket, both on 127.0.0.1.
"""

from __future__ import annotations

from doc_blocks import python_blocks, run_blocks
from s3_server import s3_server

PAGE = "docs/backend.md"


def test_doc_blocks_exist():
    blocks = python_blocks(PAGE)
    assert len(blocks) >= 8
    text = "\n".join(blocks)
    for needed in ("open_cube", "LocalCluster", "s3://", "base_url", "georeferencing=False"):
        assert needed in text, needed


def test_backend_doc_examples_run(tmp_path, monkeypatch, http_server):
    monkeypatch.chdir(tmp_path)  # the HTTP server serves tmp_path: files written here are online
    with s3_server("scenes") as options:
        run_blocks(PAGE, {"base_url": http_server.url, "s3_options": options})
    assert http_server.get_requests()  # the HTTP examples did go over HTTP
