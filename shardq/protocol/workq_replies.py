"""What a Workq server answers, as bytes (successes start with ``+``, errors with ``-``)."""

from __future__ import annotations

from collections.abc import Iterable

OK = b"+OK\r\n"
NOT_FOUND = b"-NOT-FOUND\r\n"
TIMEOUT = b"-TIMEOUT\r\n"
DUPLICATE_JOB = b"-CLIENT-ERROR Duplicate job\r\n"
DUPLICATE_RESULT = b"-CLIENT-ERROR Duplicate result\r\n"
FULL = b"-SERVER-ERROR queue is full\r\n"
INVALID_PAYLOAD_SIZE = b"-CLIENT-ERROR Invalid payload size\r\n"
UNAVAILABLE = b"-SERVER-ERROR queue server unavailable\r\n"
#: what a command the front-end had not the memory for is answered (then the next goes on)
OUT_OF_MEMORY = b"-SERVER-ERROR out of memory\r\n"


def server_error(text: str) -> bytes:
    return b"-SERVER-ERROR " + text.encode() + b"\r\n"


def result(job_id: str, success: bool, data: bytes) -> bytes:
    return b"+OK 1\r\n%s %d %d\r\n%b\r\n" % (job_id.encode(), success, len(data), data)


def leased(job_id: str, name: str, ttr_ms: int, payload: bytes) -> bytes:
    head = f"{job_id} {name} {ttr_ms} {len(payload)}".encode()
    return b"+OK 1\r\n" + head + b"\r\n" + payload + b"\r\n"


def block(label: str, pairs: list[tuple[str, object]]) -> bytes:
    """One object of an inspect reply: ``<label> <key-count>`` and its ``key value`` lines."""
    lines = [f"{label} {len(pairs)}".encode()]
    for key, value in pairs:
        raw = value if isinstance(value, bytes) else str(value).encode()
        lines.append(key.encode() + b" " + raw)
    return b"\r\n".join(lines) + b"\r\n"


def inspected(blocks: Iterable[bytes]) -> bytes:
    """``+OK <reply-count>`` and the objects."""
    parts = list(blocks)
    return b"+OK %d\r\n" % len(parts) + b"".join(parts)
