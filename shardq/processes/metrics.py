"""The metrics process (``metrics.listen``, ``--metrics HOST:PORT``): one HTTP port with

* ``/metrics``: Prometheus text (shardq/metrics/exposition.py);
* ``/health``: 200 ``ok`` when every process of the server runs and answered within
  `metrics_gather.ANSWER_WITHIN_S`, else 503 with one line per problem;
* ``/``: the dashboard page, which polls ``/api/summary`` (JSON) every second.

With ``metrics.tls_cert`` and ``metrics.tls_key`` the port speaks HTTPS (each connection's
handshake done at accept, within REQUEST_TIMEOUT_S). A thin shell: the supervisor binds the port
and passes it (a restarted metrics process keeps it); one thread, `http.server` handling one
request at a time (HTTP/1.0, the connection closed after each answer, a 5 s socket timeout
so a slow client cannot hold it), woken at least once a second for the supervisor check
(`lifeline`). Each request gathers a fresh view (`metrics_gather.Gatherer`): nothing is
polled while nobody asks.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
import ssl
import sys
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import FrameType
from typing import Any

from shardq.metrics.exposition import CONTENT_TYPE, render
from shardq.metrics.page import dashboard_html
from shardq.metrics.summary import summary
from shardq.processes import lifeline
from shardq.processes.listener import tls_context
from shardq.processes.metrics_gather import Gatherer

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 5.0  #: a client that sends nothing for this long is closed


class Handler(BaseHTTPRequestHandler):
    server: MetricsServer
    timeout = REQUEST_TIMEOUT_S
    server_version = "shardq-metrics"

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        route = ROUTES.get(self.path.split("?", 1)[0])
        if route is None:
            self.answer(404, "text/plain; charset=utf-8", b"not found\n")
            return
        route(self)

    def do_HEAD(self) -> None:  # noqa: N802 (http.server's name)
        """As GET, without the body (some load balancers check health so)."""
        self.do_GET()

    def answer(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        log.debug("%s %s", self.address_string(), format % args)


def get_metrics(h: Handler) -> None:
    h.answer(200, CONTENT_TYPE, render(h.server.gatherer.gather()))


def get_health(h: Handler) -> None:
    problems = h.server.gatherer.gather().problems()
    if problems:
        h.answer(503, "text/plain; charset=utf-8", ("\n".join(problems) + "\n").encode())
    else:
        h.answer(200, "text/plain; charset=utf-8", b"ok\n")


def get_summary(h: Handler) -> None:
    view = summary(h.server.gatherer.gather(), h.server.shards, h.server.serving)
    h.answer(200, "application/json", json.dumps(view).encode())


def get_page(h: Handler) -> None:
    h.answer(200, "text/html; charset=utf-8", dashboard_html())


ROUTES: dict[str, Callable[[Handler], None]] = {
    "/metrics": get_metrics,
    "/health": get_health,
    "/api/summary": get_summary,
    "/": get_page,
    "/index.html": get_page,
}


class MetricsServer(HTTPServer):
    """`HTTPServer` on a socket bound elsewhere (the supervisor's)."""

    def __init__(self, listen_fd: int, gatherer: Gatherer, shards: int, serving: int) -> None:
        super().__init__(("127.0.0.1", 0), Handler, bind_and_activate=False)
        self.socket.close()
        self.socket = socket.socket(fileno=listen_fd)
        self.timeout = lifeline.CHECK_EVERY_S  # handle_request returns at least this often
        self.gatherer = gatherer
        self.shards = shards
        self.serving = serving
        self.tls: ssl.SSLContext | None = None  # HTTPS (metrics.tls_cert / tls_key)

    def get_request(self) -> tuple[socket.socket, Any]:
        """The next connection; with TLS, its handshake done (within REQUEST_TIMEOUT_S: a
        client that stalls holds the endpoint no longer). A failed handshake is an OSError
        (ssl.SSLError is one), which `handle_request` drops quietly."""
        sock, address = self.socket.accept()
        if self.tls is not None:
            sock.settimeout(REQUEST_TIMEOUT_S)
            try:
                sock = self.tls.wrap_socket(sock, server_side=True)
            except OSError:
                sock.close()
                raise
        return sock, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.exception("metrics: a request from %s failed", client_address)


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    sys.exit(0)


def main(
    listen_fd: int,
    run_dir: str,
    shards: int,
    serving: int,
    expected: list[str],
    serving_stats: bool = True,
    tls_cert: str | None = None,
    tls_key: str | None = None,
) -> None:
    """`serving_stats`: False when the serving processes host no shard (--no-colocate):
    their part of `stats` (commands, connections) cannot be had, and is left out."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    gatherer = Gatherer(run_dir, shards, tuple(expected), serving_stats)
    server = MetricsServer(listen_fd, gatherer, shards, serving)
    if tls_cert is not None and tls_key is not None:
        server.tls = tls_context(tls_cert, tls_key, None)
    try:
        while True:
            lifeline.check()
            server.handle_request()
    finally:
        server.socket.close()
        gatherer.peers.close()
