"""The connections with output to write at the end of a turn (`clients.flush_output`).

A list in the order they got it, and a flag on each connection (`Conn.dirty`) so that one is
listed once: no set to hash every connection into and empty again every turn (≈ 290
instructions a command under `bload -w mixed -c 50`, a set's add, copy and clear). A
connection taken off (closed, handed over) only has its flag cleared; `take` skips it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shardq.processes.serving.conn import Conn

if TYPE_CHECKING or __file__.endswith(".py"):  # the pure build: no-op decorators
    from shardq.nocython import cython
else:  # compiled: Cython reads the decorators (and imports nothing at run time)
    import cython


class Outgoing:
    """The connections to write this turn, each once."""

    __slots__ = ("conns",)

    def __init__(self) -> None:
        self.conns: list[Conn] = []

    def add(self, conn: Conn) -> None:
        if not conn.dirty:
            conn.dirty = True
            self.conns.append(conn)

    def discard(self, conn: Conn) -> None:
        conn.dirty = False  # (left in the list: `take` skips it)

    @cython.locals(conn=Conn)
    def take(self) -> list[Conn]:
        """The connections to write, in order, each once; none are listed after."""
        listed = self.conns
        self.conns = []
        taken = []
        for conn in listed:
            if conn.dirty:
                conn.dirty = False
                taken.append(conn)
        return taken

    def __contains__(self, conn: Conn) -> bool:
        return conn.dirty

    def __bool__(self) -> bool:
        return bool(self.conns)

    def __len__(self) -> int:
        return sum(1 for conn in self.conns if conn.dirty)
