"""A tube's ready jobs in priority order: a binary heap of their keys (heapq, in C).

A job's key packs (priority, put order, id) into one int (job.py), so the smallest key is
the job a reserve takes. The common case costs one C call: a put pushes its key, a
reserve takes the head. A job leaving from elsewhere in the heap (a ready job deleted,
kicked into another state by a policy, discarded as the oldest) is not searched for: its
key is marked gone and dropped when it reaches the head, so the head is never a gone key
and the heap is empty exactly when no job is ready. When gone keys pass half of the heap
it is rebuilt without them, so they never hold more than the live keys do.

It was a `sortedcontainers.SortedList`, whose add, remove and index run as Python code:
≈ 2x the CPU of this heap a put and reserve (docs/BENCHMARKS.md, "A heap for the ready
jobs").

The heap is the list itself, so `heap[0]` and truth tests run in C; `len()` counts gone
keys too: `live` is the number of ready jobs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from heapq import heapify, heappop, heappush


class ReadyHeap(list):  # of int keys; a plain `list` base, as ready.pxd declares it
    """The ready keys of one tube: `first()` (or `[0]`) is the smallest; `live` counts them."""

    __slots__ = ("gone", "live")

    def __init__(self, keys: Iterable[int] = ()) -> None:
        super().__init__(keys)
        heapify(self)
        self.gone: set[int] | None = None  #: keys left in the heap, not ready any more
        self.live = len(self)

    def add(self, key: int) -> None:
        gone = self.gone
        if gone and key in gone:  # back before its stale entry left: it is live again
            gone.remove(key)
        else:
            heappush(self, key)
        self.live += 1

    def remove(self, key: int) -> None:
        """Take `key` out (it must be ready): at once at the head, else once it gets there."""
        self.live -= 1
        if self[0] == key:
            heappop(self)
            gone = self.gone
            if not gone:
                return  # the common case: nothing was dropped lazily
            while self and self[0] in gone:
                gone.remove(heappop(self))
        else:
            gone = self.gone
            if gone is None:
                gone = self.gone = set()
            gone.add(key)
        if len(gone) * 2 > len(self):
            self.rebuild()

    def first(self) -> int:
        return self[0]

    def rebuild(self) -> None:
        gone = self.gone
        if gone:
            self[:] = [key for key in list.__iter__(self) if key not in gone]
            heapify(self)
            gone.clear()

    def live_keys(self) -> list[int]:
        """The live keys, smallest first (for a policy's index and for tests: not hot)."""
        gone = self.gone
        return sorted(key for key in list.__iter__(self) if not gone or key not in gone)

    def __iter__(self) -> Iterator[int]:  # the live keys in order, as the SortedList gave
        return iter(self.live_keys())
