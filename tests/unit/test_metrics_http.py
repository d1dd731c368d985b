"""The metrics endpoint's HTTP, sans-IO (shardq/metrics/http.py): a request head in (whole
or not yet, or why it cannot be served), an HTTP/1.0 answer out."""

from __future__ import annotations

import pytest

from shardq.metrics.http import MAX_HEAD, HttpError, Request, error, parse_head, response


def test_a_head_is_a_request_once_its_blank_line_came() -> None:
    assert parse_head(b"GET /metrics HTTP/1.1\r\nHost: x\r\n") is None
    assert parse_head(b"GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n") == Request("GET", "/metrics")
    assert parse_head(b"HEAD /health HTTP/1.0\n\n") == Request("HEAD", "/health")


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (b"POST /metrics HTTP/1.1\r\n\r\n", 501),
        (b"GET /metrics\r\n\r\n", 400),
        (b"GET /metrics SPDY/3\r\n\r\n", 400),
        (b"\r\n\r\n", 400),
        (b"GET /" + b"x" * MAX_HEAD + b" HTTP/1.1\r\n", 431),
    ],
)
def test_what_cannot_be_served_says_why(head: bytes, status: int) -> None:
    with pytest.raises(HttpError) as caught:
        parse_head(head)
    assert caught.value.status == status


def test_an_answer_has_its_length_and_closes() -> None:
    data = response(200, "text/plain; charset=utf-8", b"ok\n")
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    assert lines[0] == "HTTP/1.0 200 OK"
    assert "Content-Length: 3" in lines and "Connection: close" in lines
    assert body == b"ok\n"
    head_only = response(200, "text/plain; charset=utf-8", b"ok\n", head_only=True)
    assert head_only.endswith(
        b"Content-Length: 3\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
    )  # the body's length, no body
    assert error(404).startswith(b"HTTP/1.0 404 Not Found\r\n")
    assert error(404).endswith(b"\r\n\r\nNot Found\n")
