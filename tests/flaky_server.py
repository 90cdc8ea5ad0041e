"""A failing HTTP proxy the tests start on 127.0.0.1 in front of a real server.

``FlakyProxy`` forwards every request to an upstream server (a
:class:`servers.RangeServer`, or a moto S3 server: the request is passed on
verbatim, headers included) and, for the requests its ``when`` predicate
picks, injects one fault from a script::

    with RangeServer(root) as origin, FlakyProxy(origin.url, ["500", "drop", "short"]) as proxy:
        ...  # the first three ranged GETs fail, each in its own way; the rest pass

Faults:

``"500"`` / ``"503"``
    an error status with an S3-style XML body (S3 says ``InternalError`` / ``SlowDown``).
``"drop"``
    the connection is closed without a response.
``"short"``
    the upstream response with its full ``Content-Length`` but only half of the body.
``"truncated"``
    half of the body, with a ``Content-Length`` that agrees: only the reader's length check can tell.
``"slow"``
    the response is held until the client hangs up (its timeout: it gave up), and then
    ``client_gave_up`` is set and nothing is sent; a client that waits ``delay`` seconds
    gets the response then.  No race between two clocks: the client's timeout alone decides.
``"flip"``
    one bit of the body is flipped in transit: the transport cannot notice, only a checksum can.
``"whole"``
    a ranged GET answered ``200`` with the whole object (a server that ignores ``Range``).

``when(method, path, headers)`` picks the requests that may fail (by default
ranged GETs).  ``always=`` names a fault applied to every picked request once the script is
used up: a persistent failure.  Every request is recorded with the fault it got.
"""

from __future__ import annotations

import http.client
import selectors
import socket
import threading
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler

from servers import LoopbackServer

FAULTS = ("500", "503", "drop", "short", "truncated", "slow", "flip", "whole")
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
               "proxy-authorization", "proxy-authenticate", "content-length"}


@dataclass
class ProxiedRequest:
    method: str
    path: str
    range: str | None  # the Range header as sent, or None
    fault: str | None  # the fault injected, None when passed through


def ranged_get(method: str, path: str, headers) -> bool:
    """The default ``when``: GETs of a byte range, i.e. frame and georeferencing reads."""
    return method == "GET" and "Range" in headers


class FlakyProxy(LoopbackServer):
    """An HTTP proxy on 127.0.0.1 that fails on purpose; use as a context manager."""

    def __init__(self, upstream: str, faults=(), *, always: str | None = None, when=ranged_get,
                 delay: float = 2.0):
        for fault in (*faults, *([always] if always else [])):
            if fault not in FAULTS:
                raise ValueError(f"unknown fault {fault!r}; expected one of {FAULTS}")
        parsed = urllib.parse.urlsplit(upstream)
        self._upstream = (parsed.hostname, parsed.port)
        self._script = list(faults)
        self._always = always
        self._when = when
        self._delay = delay
        self._lock = threading.Lock()
        self.requests: list[ProxiedRequest] = []
        self.client_gave_up = threading.Event()  # a "slow" response's client hung up before it was sent

    def _next_fault(self, method: str, path: str, headers) -> str | None:
        if not self._when(method, path, headers):
            return None
        with self._lock:
            return self._script.pop(0) if self._script else self._always

    @property
    def faults_injected(self) -> list[str]:
        return [r.fault for r in self.requests if r.fault is not None]

    def __enter__(self) -> FlakyProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two sends: without this a small response
            # waits ~40 ms for the client's delayed ACK (Nagle).
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def _hung_up_within(self, seconds: float) -> bool:
                """Whether the client closes the connection within ``seconds``, sending nothing more."""
                # a selector, not select.select: a test process may hold descriptors past FD_SETSIZE (1024)
                with selectors.DefaultSelector() as selector:
                    selector.register(self.connection, selectors.EVENT_READ)
                    readable = selector.select(seconds)
                if not readable:
                    return False
                try:
                    return self.connection.recv(1, socket.MSG_PEEK) == b""
                except ConnectionError:
                    return True

            def _forward(self):
                fault = proxy._next_fault(self.command, self.path, self.headers)
                with proxy._lock:
                    proxy.requests.append(ProxiedRequest(self.command, self.path, self.headers.get("Range"), fault))
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if fault == "drop":
                    self.close_connection = True
                    return
                if fault in ("500", "503"):
                    code = "InternalError" if fault == "500" else "SlowDown"
                    self._reply(int(fault), {"Content-Type": "application/xml"},
                                f"<Error><Code>{code}</Code><Message>injected</Message></Error>".encode())
                    return
                if fault == "slow" and self._hung_up_within(proxy._delay):
                    proxy.client_gave_up.set()
                    self.close_connection = True
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                if fault == "whole":
                    headers.pop("Range", None)
                upstream = http.client.HTTPConnection(*proxy._upstream, timeout=30)
                try:
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    response = upstream.getresponse()
                    data = response.read()
                    out_headers = {k: v for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP}
                    status = response.status
                    if self.command == "HEAD" and response.getheader("Content-Length") is not None:
                        out_headers["Content-Length"] = response.getheader("Content-Length")
                finally:
                    upstream.close()
                if fault == "flip" and data:
                    data = bytearray(data)
                    data[len(data) // 2] ^= 0x10
                    data = bytes(data)
                if fault == "truncated":
                    data = data[: len(data) // 2]
                if fault == "short":
                    self.send_response(status)
                    for k, v in out_headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self._reply(status, out_headers, data)

            def _reply(self, status, headers, data):
                # A HEAD reply keeps the upstream Content-Length (the object's size), sends no body.
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                if "Content-Length" not in headers:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward

        self._serve(Handler)
        return self
