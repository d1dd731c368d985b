"""The little of HTTP the metrics endpoint speaks, sans-IO: a request's head in, an answer's
bytes out.

A request is its head (the request line and the headers, up to the blank line; at most
`MAX_HEAD` bytes): ``GET`` or ``HEAD``, a path (the query is dropped), ``HTTP/1.x``; the
headers are not needed and not kept, and a body is never read. Every answer is HTTP/1.0
with a ``Content-Length`` and ``Connection: close``: one request per connection, as the
endpoint always served (a scraper or a browser opens the next).
"""

from __future__ import annotations

from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus

MAX_HEAD = 8192  #: a request head longer than this is answered 431 and closed
METHODS = ("GET", "HEAD")
SERVER = "shardq-metrics"
TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True, slots=True)
class Request:
    method: str  # GET or HEAD
    path: str  # without its query


class HttpError(Exception):
    """A request that cannot be served: its status."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def head_end(data: bytes | bytearray) -> int:
    """Where the head ends (after its blank line), or -1 while it has not."""
    for blank in (b"\r\n\r\n", b"\n\n"):
        at = data.find(blank)
        if at >= 0:
            return at + len(blank)
    return -1


def parse_head(data: bytes | bytearray) -> Request | None:
    """The request whose head `data` starts with; None while the head is not whole.
    HttpError: too long (431), not an HTTP/1 request line (400), another method (501)."""
    if head_end(data) < 0:
        if len(data) > MAX_HEAD:
            raise HttpError(431)
        return None
    words = bytes(data.split(b"\n", 1)[0]).decode("latin-1").split()
    if len(words) != 3 or not words[2].startswith("HTTP/1."):
        raise HttpError(400)
    method, target, _version = words
    if method not in METHODS:
        raise HttpError(501)
    return Request(method, target.split("?", 1)[0])


def response(status: int, content_type: str, body: bytes, head_only: bool = False) -> bytes:
    """A whole answer: status line, headers, and (unless to a HEAD) the body."""
    head = (
        f"HTTP/1.0 {status} {HTTPStatus(status).phrase}\r\n"
        f"Server: {SERVER}\r\n"
        f"Date: {formatdate(usegmt=True)}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Cache-Control: no-store\r\n"
        "Connection: close\r\n\r\n"
    ).encode("latin-1")
    return head if head_only else head + body


def error(status: int) -> bytes:
    """The answer to a request that cannot be served."""
    return response(status, TEXT, f"{HTTPStatus(status).phrase}\n".encode())


#: the body of the answer to a request memory was short for (503: it may work later)
OUT_OF_MEMORY_BODY = b"out of memory\n"


def out_of_memory() -> bytes:
    """The answer to a request the metrics process had not the memory for."""
    return response(HTTPStatus.SERVICE_UNAVAILABLE, TEXT, OUT_OF_MEMORY_BODY)
