"""Servers the tests start on 127.0.0.1 and stop themselves.

``RangeServer`` serves a directory over HTTP, honours single ``Range``
requests and counts every request with the bytes it sent, so tests can assert
exactly what a reader fetched.  Like nginx, it sends an ``ETag`` made of the
file's inode, modification time and size, and answers ``412`` to an
``If-Match`` naming another.  It can also behave like object storage seen
from afar: wait ``latency`` seconds before each answer's first byte, send
each answer no faster than ``bandwidth`` bytes a second, and keep the peak
number of requests it was answering at once (``ci/benchmarks/remote.py``).
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
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

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def process_request(self, request, client_address) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        # Keep-alive connections wait in their handler threads for a next request that never comes, and the
        # client keeps its end: a suite of servers piled up ~1,000 sockets. Hanging up ends both.
        with self._connections_lock:
            held = list(self._connections)
        for connection in held:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:  # already closed by its handler
                pass


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
    #: seconds each answer waits before its first byte, as a distant store's round trip does
    latency: float = 0.0
    #: bytes a second each connection's body is sent at, at most; None for as fast as it goes
    bandwidth: float | None = None
    #: False: send no ETag, as some servers do (nothing then tells one version of a file from another of its size)
    etags: bool = True
    #: the most requests answered at once since the last :meth:`take_stats`
    peak_in_flight: int = 0
    _in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _arrived(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def take_stats(self) -> dict:
        """Requests, body bytes sent and peak requests in flight since the last call; counting starts again.

        >>> with RangeServer(".") as server:
        ...     server.take_stats()
        {'requests': 0, 'gets': 0, 'bytes': 0, 'peak_in_flight': 0}
        """
        with self._lock:
            taken, self.requests[:] = list(self.requests), []
            peak, self.peak_in_flight = self.peak_in_flight, self._in_flight
        return {"requests": len(taken), "gets": sum(r.method == "GET" for r in taken),
                "bytes": sum(r.sent for r in taken), "peak_in_flight": peak}

    def _send_body(self, wfile, body: bytes) -> None:
        if self.bandwidth is None:
            wfile.write(body)
            return
        # Paced in small pieces, each sent no earlier than the rate allows.
        piece, started = 64 * 1024, time.perf_counter()
        for offset in range(0, len(body), piece):
            wfile.write(body[offset:offset + piece])
            due = started + (offset + piece) / self.bandwidth
            time.sleep(max(0.0, due - time.perf_counter()))

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

            def send_response(self, code, message=None):
                # The answer is made while the latency runs, as a distant store's is: what the client waits for is
                # the latency, and the server's own work (on the client's cores here) does not add to it.
                time.sleep(max(0.0, self.first_byte_due - time.perf_counter()))
                super().send_response(code, message)

            def do_HEAD(self):
                self.first_byte_due = time.perf_counter() + server.latency
                server._arrived()
                try:
                    self._head()
                finally:
                    server._done()

            def do_GET(self):
                self.first_byte_due = time.perf_counter() + server.latency
                server._arrived()
                try:
                    self._get()
                finally:
                    server._done()

            def _head(self):
                path = self._target()
                if path is None:
                    self.send_error(404)
                    return
                size = os.path.getsize(path)
                server.requests.append(Request("HEAD", self.path, None, 0))
                self.send_response(200)
                if server.etags:
                    self.send_header("ETag", _etag(os.stat(path)))
                self.send_header("Content-Length", str(size))
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()

            def _get(self):
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
                if server.etags:
                    self.send_header("ETag", etag)
                self.end_headers()
                server._send_body(self.wfile, body)

        self._serve(Handler)
        return self

    def get_requests(self) -> list[Request]:
        """GET requests only (fsspec may also send HEAD to learn a size)."""
        return [r for r in self.requests if r.method == "GET"]
