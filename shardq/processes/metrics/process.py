"""The metrics process (``metrics.listen``, ``--metrics HOST:PORT``): one HTTP port with

* ``/metrics``: Prometheus text (shardq/metrics/exposition.py);
* ``/health``: 200 ``ok`` when every process of the server runs and answered within
  `gather.ANSWER_WITHIN_S`, else 503 with one line per problem;
* ``/``: the dashboard page, which polls ``/api/summary`` (JSON) every second.

A thin shell: the supervisor binds the port and passes it (a restarted metrics process
keeps it); `http.HttpDoor` serves it, many clients at once, each with a deadline,
a bound on how many are open, and the door's `Gate` (``allow``,
``limits.max_connections``; with ``metrics.tls_cert`` and ``metrics.tls_key``, HTTPS only).
Each batch of requests gathers one fresh view (`gather.Gatherer`): nothing is
polled while nobody asks.
"""

from __future__ import annotations

import json
import logging
import signal
import socket
from collections.abc import Callable

from shardq.metrics.exposition import CONTENT_TYPE, render
from shardq.metrics.gathered import Gathered
from shardq.metrics.http import TEXT, Request, out_of_memory, response
from shardq.metrics.page import dashboard_html
from shardq.metrics.summary import summary
from shardq.processes.common import live, outofmemory, wakeup
from shardq.processes.common.door import Gate
from shardq.processes.common.settings import MetricsSettings
from shardq.processes.metrics.gather import Gatherer
from shardq.processes.metrics.http import HttpDoor

log = logging.getLogger(__name__)

Answer = tuple[int, str, bytes]  #: status, content type, body


class Endpoint:
    """What each path answers, from a view gathered once for the requests of a turn."""

    def __init__(self, gatherer: Gatherer, shards: int, serving: int) -> None:
        self.gatherer = gatherer
        self.shards = shards
        self.serving = serving

    def respond(self, requests: list[Request]) -> list[tuple[int, bytes]]:
        """Each request's answer; one that memory is short for is answered 503 (the others
        go on). One that needs no view (the page) is tried once more after memory ran out
        in it: `note` has given back the reserve, which is room for that much."""
        view: Gathered | None = None
        answers = []
        for request in requests:
            needs_view, route = ROUTES.get(request.path, (False, not_found))
            for last in (needs_view, True):
                try:
                    if needs_view and view is None:
                        view = self.gatherer.gather()
                    status, content_type, body = route(self, view)
                    head_only = request.method == "HEAD"
                    answers.append((status, response(status, content_type, body, head_only)))
                    break
                except MemoryError:
                    outofmemory.note(f"metrics: {request.path}, answered 503")
                    if last:
                        answers.append((503, out_of_memory()))
                        break
        return answers


def get_metrics(e: Endpoint, view: Gathered | None) -> Answer:
    assert view is not None
    return 200, CONTENT_TYPE, render(view)


def get_health(e: Endpoint, view: Gathered | None) -> Answer:
    assert view is not None
    problems = view.problems()
    if problems:
        return 503, TEXT, ("\n".join(problems) + "\n").encode()
    return 200, TEXT, b"ok\n"


def get_summary(e: Endpoint, view: Gathered | None) -> Answer:
    assert view is not None
    return 200, "application/json", json.dumps(summary(view, e.shards, e.serving)).encode()


def get_page(e: Endpoint, view: Gathered | None) -> Answer:
    return 200, "text/html; charset=utf-8", dashboard_html()


def not_found(e: Endpoint, view: Gathered | None) -> Answer:
    return 404, TEXT, b"not found\n"


#: path -> (whether it needs a gathered view, its route)
ROUTES: dict[str, tuple[bool, Callable[[Endpoint, Gathered | None], Answer]]] = {
    "/metrics": (True, get_metrics),
    "/health": (True, get_health),
    "/api/summary": (True, get_summary),
    "/": (False, get_page),
    "/index.html": (False, get_page),
}


def main(settings: MetricsSettings, gate: Gate) -> None:
    """`gate`: who may connect, how many, HTTPS. Without `settings.serving_stats` (the
    serving processes host no shard: --no-colocate) their part of `stats` (commands,
    connections) cannot be had, and is left out."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, wakeup.exit_on_sigterm)
    s, shards = settings, settings.common.shards
    gatherer = Gatherer(s.common.run_dir, shards, s.roles, s.serving_stats, s.serving)
    live.on_change(gate.take_live)
    endpoint = Endpoint(gatherer, shards, s.serving)
    door = HttpDoor(socket.socket(fileno=s.listen_fd), gate, endpoint.respond)
    try:
        door.serve_forever()
    finally:
        gatherer.peers.close()
