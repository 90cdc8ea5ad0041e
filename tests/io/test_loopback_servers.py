"""The loopback HTTP servers take as many connections at once as a reader opens.

A remote read of a few dozen frames sends a request per range, each on a
connection of its own.  With socketserver's listen backlog of 5, the kernel
dropped the SYN of every connection beyond the sixth still waiting to be
accepted, and those waited a second for the client to send it again: reads
stalled for no reason of the reader's.  A server that accepts nothing yet
shows the backlog alone.
"""

from __future__ import annotations

import select
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
        while pending and time.monotonic() < deadline:
            _, writable, _ = select.select([], list(pending), [], 0.1)
            pending -= set(writable)
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
