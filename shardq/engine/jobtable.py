"""The engine's jobs by id: a table of blocks, not a dict.

Job ids come in blocks (cluster/routing.py's `ID_BLOCK`: a serving process leases a
block of one shard's ids and hands them out in order), so one shard's ids are dense within
the blocks it was given. The table keeps one list of `BLOCK` slots (the same size) a block,
in a dict by block number: a job costs its slot's 8 bytes, where a dict by id cost about 74
(the id's int, 32 bytes, and its entry with the dict's slack, ≈ 42). A block goes when its last job
does. The hot paths look up the block they used last first (a put, then its reserve and
delete, mostly fall in one block), so most look-ups touch no dict at all.

It reads as a mapping of id to job (`get`, `[]`, `in`, `len`, iteration), in order of id.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from shardq.engine.job import Job

if TYPE_CHECKING or __file__.endswith(".py"):  # the pure build: no-op decorators
    from shardq.nocython import cython
else:  # compiled: Cython reads the decorators (and imports nothing at run time)
    import cython

#: ids a block (cluster/routing.py's ID_BLOCK, which the engine does not import: test_jobtable
#: checks they agree); id - 1 >> SHIFT: its block, & SLOT_MASK: its slot
BLOCK = 1024
SHIFT = 10
SLOT_MASK = BLOCK - 1
ID_LIMIT = 1 << 64  #: ids are below this (the protocol's u64); other keys hold nothing


class Block:
    """One block's slots (None: no job) and how many jobs it holds."""

    __slots__ = ("slots", "live")

    def __init__(self) -> None:
        self.slots: list[Job | None] = [None] * BLOCK
        self.live = 0


class JobTable:
    """Jobs by id (see the module's docstring)."""

    __slots__ = ("blocks", "count", "last_no", "last")

    def __init__(self) -> None:
        self.blocks: dict[int, Block] = {}
        self.count = 0  #: jobs held
        self.last_no = -1  #: the block looked up last, and the block itself (None: none)
        self.last: Block | None = None

    @cython.locals(no=cython.longlong, block=Block)
    def _block(self, no: int) -> Block | None:
        if no == self.last_no:
            return self.last
        block = self.blocks.get(no)
        if block is not None:
            self.last_no = no
            self.last = block
        return block

    @cython.locals(i=cython.ulonglong, block=Block)
    def get(self, job_id: int) -> Job | None:
        """The job with this id (0 < id < 2**64), or None."""
        if job_id == 0:
            return None
        i = job_id - 1
        block = self._block(i >> SHIFT)
        if block is None:
            return None
        return block.slots[i & SLOT_MASK]

    @cython.locals(i=cython.ulonglong, no=cython.longlong, block=Block)
    def add(self, job_id: int, job: Job) -> None:
        """Hold `job` under its id (0 < id < 2**64), in place of any job there."""
        i = job_id - 1
        no = i >> SHIFT
        block = self._block(no)
        if block is None:
            block = Block()
            self.blocks[no] = block
            self.last_no = no
            self.last = block
        if block.slots[i & SLOT_MASK] is None:
            block.live += 1
            self.count += 1
        block.slots[i & SLOT_MASK] = job

    @cython.locals(i=cython.ulonglong, no=cython.longlong, block=Block, job=Job)
    def pop(self, job_id: int) -> Job | None:
        """Take the job with this id out (0 < id < 2**64): it, or None if there was none."""
        if job_id == 0:
            return None
        i = job_id - 1
        no = i >> SHIFT
        block = self._block(no)
        if block is None:
            return None
        job = block.slots[i & SLOT_MASK]
        if job is None:
            return None
        block.slots[i & SLOT_MASK] = None
        block.live -= 1
        self.count -= 1
        if block.live == 0:
            del self.blocks[no]
            self.last_no = -1
            self.last = None
        return job

    # ------------------------------------------------- the mapping, for the rest
    def __len__(self) -> int:
        return self.count

    def __contains__(self, job_id: object) -> bool:
        return isinstance(job_id, int) and 0 < job_id < ID_LIMIT and self.get(job_id) is not None

    def __getitem__(self, job_id: int) -> Job:
        job = self.get(job_id) if isinstance(job_id, int) and 0 < job_id < ID_LIMIT else None
        if job is None:
            raise KeyError(job_id)
        return job

    def __setitem__(self, job_id: int, job: Job) -> None:
        self.add(job_id, job)

    def __delitem__(self, job_id: int) -> None:
        if self.pop(job_id) is None:
            raise KeyError(job_id)

    def items(self) -> Iterator[tuple[int, Job]]:
        """(id, job) in order of id."""
        for no in sorted(self.blocks):
            first = (no << SHIFT) + 1
            for at, job in enumerate(self.blocks[no].slots):
                if job is not None:
                    yield first + at, job

    def __iter__(self) -> Iterator[int]:
        return (job_id for job_id, _ in self.items())

    def keys(self) -> Iterator[int]:
        return iter(self)

    def values(self) -> Iterator[Job]:
        return (job for _, job in self.items())

    def __repr__(self) -> str:
        return f"JobTable({dict(self.items())!r})"
