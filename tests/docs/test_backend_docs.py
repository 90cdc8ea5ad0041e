"""docs/backend.md runs: every ```python block, in order, in one namespace.

``base_url`` is a Range HTTP server for the working directory and
``s3_options`` a moto S3 server with a ``scenes`` bucket, both on 127.0.0.1.
"""

from __future__ import annotations

import pathlib
import re

from s3_server import s3_server

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "backend.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_doc_blocks_exist():
    blocks = BLOCK.findall(DOC.read_text())
    assert len(blocks) >= 8
    text = "\n".join(blocks)
    for needed in ("open_cube", "LocalCluster", "s3://", "base_url", "georeferencing=False"):
        assert needed in text, needed


def test_backend_doc_examples_run(tmp_path, monkeypatch, http_server):
    monkeypatch.chdir(tmp_path)  # the HTTP server serves tmp_path: files written here are online
    with s3_server("scenes") as options:
        namespace = {"base_url": http_server.url, "s3_options": options}
        for number, block in enumerate(BLOCK.findall(DOC.read_text()), start=1):
            try:
                exec(compile(block, f"{DOC.name} block {number}", "exec"), namespace)
            except Exception as exc:  # name the block that broke
                raise AssertionError(f"docs/backend.md python block {number} failed: {exc!r}") from exc
    assert http_server.get_requests()  # the HTTP examples did go over HTTP
