"""What a protocol front-end says, which the front-ends' loop (loop.py) asks: the hooks a
front-end (Kestrel, Workq) overrides, with the answers that are its protocol's own."""

from __future__ import annotations

import socket

from shardq.processes.frontends.session import Session, Task


class Hooks:
    #: what a client is told when the server connection is lost mid-command (then closed)
    UNAVAILABLE = b""
    #: what a command that memory was short for is answered (the protocol's own error)
    OUT_OF_MEMORY = b""

    def new_session(self, sid: int, sock: socket.socket | None, backend: socket.socket) -> Session:
        raise NotImplementedError

    def next_task(self, s: Session) -> Task | None:
        """The task of the client's next command (None: no whole command yet)."""
        raise NotImplementedError

    def internal_error(self) -> bytes:
        raise NotImplementedError

    def housekeeping(self) -> None:
        """The front-end's own timers, once a turn."""

    def next_due(self) -> float | None:
        """Seconds until `housekeeping` has something to do (None: nothing pending)."""
        return None

    def closed(self, s: Session) -> None:
        """A session has just been closed."""

    def unsynced(self) -> bool:
        """The front-end wrote what must be on disk before answers leave (its journal)."""
        return False

    def sync(self) -> None:
        """Make it so (one fsync for every answer of the turn)."""
