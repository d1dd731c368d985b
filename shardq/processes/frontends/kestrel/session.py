"""One Kestrel client: a front-end session (`frontends/session.py`) with the items it holds
open and a command read ahead while gathering pipelined sets."""

from __future__ import annotations

import socket

from shardq.processes.frontends.session import Send, Session, Sleep, Task
from shardq.protocol.kestrel import KestrelParser

__all__ = ["KestrelSession", "Send", "Sleep", "Task"]


class KestrelSession(Session):
    """A Kestrel client connection (`sock`; None for the front-end's own janitor) and its
    beanstalk connection (`backend`)."""

    def __init__(
        self, sid: int, sock: socket.socket | None, backend: socket.socket, max_item: int
    ) -> None:
        super().__init__(sid, sock, backend, KestrelParser(max_item))
        self.open: dict[str, int] = {}  # queue -> job id of its open (reserved) item
