"""Starting a shardq server with its Workq front-end for the Workq tests (both ports from
the listening lines), and a raw Workq client that reads whole replies."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kestrel_server import TEARDOWN_TIMEOUT, Raw, front_servers, start_front

from shardq.bench.procs import (
    terminate,
)


@dataclass
class WorkqServer:
    proc: object
    port: int  # beanstalk
    workq: int
    run_dir: Path
    stderr_path: Path

    def stop(self) -> int | None:
        return terminate(self.proc, TEARDOWN_TIMEOUT, group=True)  # type: ignore[arg-type]


def start(tmp_path: Path, shards: int, extra: tuple[str, ...] = ()) -> WorkqServer:
    return WorkqServer(*start_front(tmp_path, shards, extra, "workq"))


@pytest.fixture(name="workq_server")
def workq_server_fixture(tmp_path: Path) -> Iterator[Callable[..., WorkqServer]]:
    """Factory: ``workq_server(shards, extra=()) -> WorkqServer``, always stopped."""
    yield from front_servers(tmp_path, "workq", WorkqServer)


def new_id() -> str:
    return str(uuid.uuid4())


class Workq(Raw):
    """A raw Workq connection: whole replies (the ``+OK n`` objects and their blocks)."""

    def line(self, timeout: float = 5.0) -> bytes:
        return self.read_until(b"\r\n", timeout)

    def exact(self, n: int, timeout: float = 5.0) -> bytes:
        out = b""
        while len(out) < n:
            out += self.read_until(b"\r\n", timeout)
        assert len(out) == n, out
        return out

    def reply(self, timeout: float = 5.0) -> bytes:
        """One whole reply: an error, ``+OK``, a result or a leased job (a header line and
        a block), or an inspect reply (objects of key lines)."""
        first = self.line(timeout)
        if not first.startswith(b"+OK ") or first == b"+OK\r\n":
            return first
        count = int(first[4:-2])
        out = first
        for _ in range(count):
            head = self.line(timeout)
            out += head
            words = head[:-2].split(b" ")
            if len(words) == 2:  # an inspected object: its key lines
                for _ in range(int(words[1])):
                    out += self.line(timeout)
            else:  # a result or a leased job: its block
                out += self.exact(int(words[-1]) + 2, timeout)
        return out

    def cmd(self, data: bytes, timeout: float = 5.0) -> bytes:
        self.send(data)
        return self.reply(timeout)


def add(
    c: Workq,
    ident: str,
    name: str,
    payload: bytes,
    ttr: int = 1000,
    ttl: int = 60000,
    flags: str = "",
) -> bytes:
    head = f"add {ident} {name} {ttr} {ttl} {len(payload)}{' ' + flags if flags else ''}\r\n"
    return c.cmd(head.encode() + payload + b"\r\n")
