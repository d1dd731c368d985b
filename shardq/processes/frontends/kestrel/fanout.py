"""Kestrel's fanout queues: a `set` to queue ``orders`` is also put to every queue
``orders+NAME`` there is (each child gets its own copy; the parent keeps one).

The children of a parent are the tubes named ``PARENT+NAME`` that the server listed (a
``list-tubes`` at most every `REFRESH_S`, before a set) or that a Kestrel client of this
front-end named since it started (a `get` or `set` of ``orders+NAME``), until a `delete`
of that queue (which the server's list no longer brings back; naming it again does).
Pure: the caller asks the server and passes the names in; with ``-b`` every change goes to
the front-end's journal (`journal`), so children, even empty ones, survive a restart. A
queue whose tube policy says `fanout` is copied by the server itself (engine/fanout.py), for
every door: the front-end then copies nothing (`of`).
"""

from __future__ import annotations

from collections.abc import Callable

from shardq.engine.policy import Policies
from shardq.processes.common import live
from shardq.storage.kestrel_journal import Child, Unchild

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
        self.journal: Callable[[Child | Unchild], None] | None = None
        self.policies = Policies()  #: the server's per-tube policies (SIGHUP: take_live)

    def take_live(self, settings: live.Live) -> None:
        self.policies = Policies(settings.tubes)

    def learn(self, queue: str) -> None:
        """A client named `queue`: if it is a child, it gets copies from now on."""
        self.deleted.discard(queue)
        self.add(queue)

    def add(self, queue: str) -> None:
        parent = parent_of(queue)
        if parent is None:
            return
        known = self.children.setdefault(parent, set())
        if queue not in known:
            known.add(queue)
            if self.journal is not None:
                self.journal(Child(queue))

    def forget(self, queue: str) -> None:
        parent = parent_of(queue)
        if parent is not None:
            self.deleted.add(queue)
            if self.journal is not None:
                self.journal(Unchild(queue))
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

    def replay(self, record: Child | Unchild) -> None:
        if isinstance(record, Child):
            self.deleted.discard(record.queue)
            self.add(record.queue)
        else:
            self.forget(record.queue)

    def live(self) -> list[Child | Unchild]:
        """What a rewritten journal holds of the children: each known and each deleted one."""
        known: list[Child | Unchild] = [Child(q) for qs in self.children.values() for q in qs]
        return known + [Unchild(q) for q in self.deleted]

    def of(self, parent: str) -> tuple[str, ...]:
        """The child queues a set to `parent` is copied to, in name order; none when the
        queue's tube policy says `fanout` (the server copies it then, for every door)."""
        policy = self.policies.resolve(parent)
        if policy is not None and policy.fanout:
            return ()
        return tuple(sorted(self.children.get(parent, ())))
