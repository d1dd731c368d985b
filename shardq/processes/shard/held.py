"""Requests a shard holds back for a while (settling after a restart, a close's held tubes),
kept in arrival order and dropped with the connection or serving process that sent them."""

from __future__ import annotations

from shardq.cluster.routing import origin_of
from shardq.cluster.wire import Request


class HeldRequests:
    """(peer, request) pairs, in arrival order."""

    def __init__(self) -> None:
        self.items: list[tuple[bytes, Request]] = []

    def __len__(self) -> int:
        return len(self.items)

    def add(self, peer: bytes, req: Request) -> None:
        self.items.append((peer, req))

    def take(self) -> list[tuple[bytes, Request]]:
        """All of them, in order; none are left."""
        items, self.items = self.items, []
        return items

    def drop_rid(self, rid: int) -> bool:
        """A held request withdrawn (CANCEL): True if it was held (it never ran)."""
        kept = [(p, r) for p, r in self.items if r.rid != rid]
        dropped = len(kept) != len(self.items)
        self.items = kept
        return dropped

    def drop_conn(self, conn: int) -> None:
        """A closed connection's held requests go with it (DISCONNECT)."""
        self.items = [(p, r) for p, r in self.items if r.conn != conn]

    def drop_origin(self, origin: int) -> None:
        """A restarted serving process's held requests go with it (RESET)."""
        self.items = [(p, r) for p, r in self.items if origin_of(r.conn) != origin]
