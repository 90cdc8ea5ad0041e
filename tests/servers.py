"""Servers the tests start on 127.0.0.1 and stop themselves.

``RangeServer`` serves a directory over HTTP, honours single ``Range``
requests and counts every request with the bytes it sent, so tests can assert
exactly what a reader fetched.  Like nginx, it sends an ``ETag`` made of the
file's inode, modification time and size, and answers ``412`` to an
``If-Match`` naming another.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


def _etag(stat: os.stat_result) -> str:
    return f'"{stat.st_ino:x}-{stat.st_mtime_ns:x}-{stat.st_size:x}"'


@dataclass
class Request:
    method: str
    path: str
    range: tuple[int, int] | None  # inclusive-exclusive byte range sent, None for a whole file
    sent: int


class LoopbackHTTPServer(ThreadingHTTPServer):
    """A thread per request, and room for as many connections as a reader opens at once."""

    # socketserver's default listen backlog is 5: the kernel drops the SYN of
    # any connection beyond the sixth still waiting to be accepted, and the
    # client sends it again a second later, so a read of a few dozen ranges at
    # once (a connection each) stalled for a second.  128 is werkzeug's, which
    # the moto S3 server (s3_server.py) already runs on.
    request_queue_size = 128


class LoopbackServer:
    """Runs a request handler on 127.0.0.1 in a thread; the servers below share it."""

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._httpd = LoopbackHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        # a short poll interval: shutdown() waits for it, once per test
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"


@dataclass
class RangeServer(LoopbackServer):
    """An HTTP server for ``root`` on 127.0.0.1; use as a context manager."""

    root: str
    requests: list[Request] = field(default_factory=list)

    def __enter__(self) -> RangeServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two sends: without this a small response
            # waits ~40 ms for the client's delayed ACK (Nagle).
            disable_nagle_algorithm = True

            def log_message(self, *args):  # keep test output clean
                pass

            def _target(self):
                path = os.path.join(server.root, self.path.split("?", 1)[0].lstrip("/"))
                return path if os.path.isfile(path) else None

            def do_HEAD(self):
                path = self._target()
                if path is None:
                    self.send_error(404)
                    return
                size = os.path.getsize(path)
                server.requests.append(Request("HEAD", self.path, None, 0))
                self.send_response(200)
                self.send_header("ETag", _etag(os.stat(path)))
                self.send_header("Content-Length", str(size))
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()

            def do_GET(self):
                path = self._target()
                if path is None:
                    self.send_error(404)
                    return
                match = _RANGE.match(self.headers.get("Range", ""))
                with open(path, "rb") as f:
                    stat = os.fstat(f.fileno())
                    size, etag = stat.st_size, _etag(stat)
                    if self.headers.get("If-Match") not in (None, "*", etag):
                        self.send_response(412)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        server.requests.append(Request("GET", self.path, None, 0))
                        return
                    if match:
                        start = int(match.group(1))
                        stop = min(int(match.group(2)) + 1 if match.group(2) else size, size)
                        if start >= size:
                            self.send_response(416)
                            self.send_header("Content-Range", f"bytes */{size}")
                            self.send_header("Content-Length", "0")
                            self.end_headers()
                            server.requests.append(Request("GET", self.path, (start, start), 0))
                            return
                        f.seek(start)
                        body = f.read(stop - start)
                        self.send_response(206)
                        self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{size}")
                        server.requests.append(Request("GET", self.path, (start, stop), len(body)))
                    else:
                        body = f.read()
                        self.send_response(200)
                        server.requests.append(Request("GET", self.path, None, len(body)))
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("ETag", etag)
                self.end_headers()
                self.wfile.write(body)

        self._serve(Handler)
        return self

    def get_requests(self) -> list[Request]:
        """GET requests only (fsspec may also send HEAD to learn a size)."""
        return [r for r in self.requests if r.method == "GET"]
