"""The loopback HTTP servers take as many connections at once as a reader opens.

A remote read of a few dozen frames sends a request per range, each on a
connection of its own.  With socketserver's listen backlog of 5, the kernel
dropped the SYN of every connection beyond the sixth still waiting to be
accepted, and those waited a second for the client to send it again: reads
stalled for no reason of the reader's.  A server that accepts nothing yet
shows the backlog alone.
"""

from __future__ import annotations

import selectors
import socket
import time
from http.server import BaseHTTPRequestHandler

from servers import LoopbackHTTPServer, RangeServer

#: More connections at once than the old backlog held, and about the ranges of a large window.
CONNECTIONS = 64


def connected_before_accepting(server_address, count: int, wait: float = 2.0) -> int:
    """How many of ``count`` connections the kernel completes to a server that accepts none of them."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.setblocking(False)
            sock.connect_ex(server_address)
        pending, deadline = set(sockets), time.monotonic() + wait
        with selectors.DefaultSelector() as selector:   # no FD_SETSIZE limit, unlike select.select
            for sock in sockets:
                selector.register(sock, selectors.EVENT_WRITE)
            while pending and time.monotonic() < deadline:
                for key, _ in selector.select(0.1):
                    pending.discard(key.fileobj)
                    selector.unregister(key.fileobj)
        return count - len(pending)
    finally:
        for sock in sockets:
            sock.close()


def test_a_loopback_server_queues_every_connection_of_a_burst():
    server = LoopbackHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    try:
        assert connected_before_accepting(server.server_address, CONNECTIONS) == CONNECTIONS
    finally:
        server.server_close()


def test_the_range_server_is_one(tmp_path):
    with RangeServer(str(tmp_path)) as server:
        assert isinstance(server._httpd, LoopbackHTTPServer)


def _get(url: str, headers: dict | None = None) -> bytes:
    import urllib.request

    with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {})) as answer:
        return answer.read()


def test_the_range_server_waits_its_latency_before_every_answer(tmp_path):
    (tmp_path / "f.bin").write_bytes(b"x" * 10)
    with RangeServer(str(tmp_path), latency=0.15) as server:
        started = time.perf_counter()
        assert _get(server.url + "/f.bin", {"Range": "bytes=2-5"}) == b"xxxx"
        assert time.perf_counter() - started >= 0.15


def test_the_range_server_caps_each_connections_bandwidth(tmp_path):
    (tmp_path / "f.bin").write_bytes(bytes(400_000))
    with RangeServer(str(tmp_path), bandwidth=1_000_000) as server:
        started = time.perf_counter()
        assert len(_get(server.url + "/f.bin")) == 400_000
        assert time.perf_counter() - started >= 0.3


def test_the_range_server_counts_requests_bytes_and_peak_in_flight_then_starts_again(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    (tmp_path / "f.bin").write_bytes(bytes(1000))
    with RangeServer(str(tmp_path), latency=0.3) as server:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda i: _get(server.url + "/f.bin", {"Range": f"bytes={i * 100}-{i * 100 + 99}"}), range(4)))
        assert server.take_stats() == {"requests": 4, "gets": 4, "bytes": 400, "peak_in_flight": 4}
        _get(server.url + "/f.bin", {"Range": "bytes=0-9"})
        assert server.take_stats() == {"requests": 1, "gets": 1, "bytes": 10, "peak_in_flight": 1}
