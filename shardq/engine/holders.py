"""Which connection holds which of a shard's jobs (reserved by it, or offered to it).

A connection mostly holds one job at a time (a worker reserves, deletes, reserves again),
so it is kept as the job's id until a second comes, and only then as a set of ids: no set
is made and dropped for every reserve.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING or __file__.endswith(".py"):  # the pure build: no-op decorators
    from shardq.nocython import cython
else:  # compiled: Cython reads the decorators (and imports nothing at run time)
    import cython


class Holders:
    """connection -> the id of the one job it holds, or the set of them from its second on."""

    __slots__ = ("by_conn",)

    def __init__(self) -> None:
        self.by_conn: dict[int, int | set[int]] = {}

    @cython.locals(ids=set)
    def own(self, conn: int, job_id: int) -> None:
        """`conn` holds this job now."""
        held = self.by_conn.get(conn)
        if held is None:
            self.by_conn[conn] = job_id
        elif isinstance(held, set):
            ids = held
            ids.add(job_id)
        elif held != job_id:
            self.by_conn[conn] = {held, job_id}

    @cython.locals(ids=set)
    def disown(self, conn: int, job_id: int) -> None:
        """`conn` holds this job no more."""
        held = self.by_conn.get(conn)
        if held is None:
            return
        if isinstance(held, set):
            ids = held
            ids.discard(job_id)
            if not ids:
                del self.by_conn[conn]
        elif held == job_id:
            del self.by_conn[conn]

    def ids(self, conn: int) -> list[int]:
        """The ids of the jobs `conn` holds, in order."""
        held = self.by_conn.get(conn)
        if held is None:
            return []
        return sorted(held) if isinstance(held, set) else [held]

    def conns(self) -> list[int]:
        """The connections that hold a job."""
        return list(self.by_conn)

    def as_dict(self) -> dict[int, set[int]]:
        """connection -> the ids it holds, as a set each (for tests and debugging)."""
        return {conn: set(self.ids(conn)) for conn in self.by_conn}
