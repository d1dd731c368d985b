"""Kestrel's fanout queues: a `set` to queue ``orders`` is also put to every queue
``orders+NAME`` there is (each child gets its own copy; the parent keeps one).

The children of a parent are the tubes named ``PARENT+NAME`` that the server listed (a
``list-tubes`` at most every `REFRESH_S`, before a set) or that a Kestrel client of this
front-end named since it started (a `get` or `set` of ``orders+NAME``), until a `delete`
of that queue (which the server's list no longer brings back; naming it again does).
Pure: the caller asks the server and passes the names in.
"""

from __future__ import annotations

REFRESH_S = 1.0  #: how old the server's list of tubes may be when a set fans out
MARK = "+"


def parent_of(queue: str) -> str | None:
    parent, mark, child = queue.partition(MARK)
    return parent if mark and parent and child else None


class Fanout:
    def __init__(self) -> None:
        self.children: dict[str, set[str]] = {}  # parent -> its child queues
        self.listed_at = float("-inf")  # monotonic s of the last list-tubes
        self.deleted: set[str] = set()  # children a client deleted: not learned from lists

    def learn(self, queue: str) -> None:
        """A client named `queue`: if it is a child, it gets copies from now on."""
        self.deleted.discard(queue)
        self.add(queue)

    def add(self, queue: str) -> None:
        parent = parent_of(queue)
        if parent is not None:
            self.children.setdefault(parent, set()).add(queue)

    def forget(self, queue: str) -> None:
        parent = parent_of(queue)
        if parent is not None:
            self.deleted.add(queue)
        if parent is not None and parent in self.children:
            self.children[parent].discard(queue)
            if not self.children[parent]:
                del self.children[parent]

    def stale(self, now: float) -> bool:
        return now - self.listed_at >= REFRESH_S

    def listed(self, names: list[str], now: float) -> None:
        """The server's tubes now: every fanout child among them is known from now on."""
        self.listed_at = now
        for name in names:
            if name not in self.deleted:
                self.add(name)

    def of(self, parent: str) -> tuple[str, ...]:
        """The child queues a set to `parent` is copied to, in name order."""
        return tuple(sorted(self.children.get(parent, ())))
