"""The engine's jobs by id: a table of blocks, not a dict.

Job ids come in blocks (cluster/routing.py's `ID_BLOCK`: a serving process leases a
block of one shard's ids and hands them out in order), so one shard's ids are dense within
the blocks it was given. The table keeps one list of `BLOCK` slots (the same size) a block,
in a dict by block number: a job costs its slot's 8 bytes, where a dict by id cost about 74
(the id's int, 32 bytes, and its entry with the dict's slack, ≈ 42). A block goes when its
last job does; one whose ids are not all used yet waits, empty, until another block is
looked up (`_look_at`). The hot paths look up the block they used last first (a put, then its
reserve and delete, mostly fall in one block), so most look-ups touch no dict at all.

A block whose ids have all been used and which holds few jobs still (`SPARSE_LIVE`: the
stragglers of a busy queue, a buried or long-delayed job among thousands deleted) would
cost a whole block for them: its jobs move to a dict by id (`sparse`, the old way), and a
block number is then in `sparse_blocks` instead (with how many jobs of it `sparse` holds),
never in both, so a look-up asks one of the two.

It reads as a mapping of id to job (`get`, `[]`, `in`, `len`, iteration: the blocks' jobs
in order of id, then the sparse ones).
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
#: a block whose last slot has been used moves its jobs to `sparse` when this few are left
SPARSE_LIVE = BLOCK // 32


class Block:
    """One block's slots (None: no job), how many jobs it holds, and how far into it ids
    have been used (its highest slot used, plus one)."""

    __slots__ = ("slots", "live", "top")

    def __init__(self) -> None:
        self.slots: list[Job | None] = [None] * BLOCK
        self.live = 0
        self.top = 0


class JobTable:
    """Jobs by id (see the module's docstring)."""

    __slots__ = ("blocks", "sparse", "sparse_blocks", "count", "last_no", "last")

    def __init__(self) -> None:
        self.blocks: dict[int, Block] = {}
        self.sparse: dict[int, Job] = {}  #: the jobs of blocks that went sparse, by id
        self.sparse_blocks: dict[int, int] = {}  #: block number -> its jobs in `sparse`
        self.count = 0  #: jobs held
        self.last_no = -1  #: the block looked up last, and the block itself (None: none)
        self.last: Block | None = None

    @cython.locals(block=Block)
    def _block(self, no: int) -> Block | None:
        if no == self.last_no:
            return self.last
        block = self.blocks.get(no)
        if block is not None:
            self._look_at(no, block)
        return block

    @cython.locals(block=Block, old=Block)
    def _look_at(self, no: int, block: Block) -> None:
        """`block` is the one looked up last now. The one before goes if it is empty: an
        empty block stays only while it is the last looked up, so that a queue emptied by
        every delete (one client putting and taking one job at a time) does not make and
        drop a block of slots for every put."""
        old = self.last
        if old is not None and old.live == 0:
            del self.blocks[self.last_no]
        self.last_no = no
        self.last = block

    @cython.locals(i=cython.ulonglong, no=cython.longlong, block=Block)
    def get(self, job_id: int) -> Job | None:
        """The job with this id (0 < id < 2**64), or None."""
        if job_id == 0:
            return None
        i = job_id - 1
        no = i >> SHIFT
        block = self._block(no)
        if block is not None:
            return block.slots[i & SLOT_MASK]
        if self.sparse_blocks and no in self.sparse_blocks:
            return self.sparse.get(job_id)
        return None

    @cython.locals(i=cython.ulonglong, no=cython.longlong, at=cython.Py_ssize_t, block=Block)
    def add(self, job_id: int, job: Job) -> None:
        """Hold `job` under its id (0 < id < 2**64), in place of any job there."""
        i = job_id - 1
        no = i >> SHIFT
        at = i & SLOT_MASK
        block = self._block(no)
        if block is None:
            if self.sparse_blocks and no in self.sparse_blocks:
                if job_id not in self.sparse:
                    self.sparse_blocks[no] += 1
                    self.count += 1
                self.sparse[job_id] = job
                return
            block = Block()
            self.blocks[no] = block
            self._look_at(no, block)
        if block.slots[at] is None:
            block.live += 1
            self.count += 1
            if at >= block.top:
                block.top = at + 1
        block.slots[at] = job

    @cython.locals(i=cython.ulonglong, no=cython.longlong, at=cython.Py_ssize_t, block=Block)
    def pop(self, job_id: int) -> Job | None:
        """Take the job with this id out (0 < id < 2**64): it, or None if there was none."""
        if job_id == 0:
            return None
        i = job_id - 1
        no = i >> SHIFT
        at = i & SLOT_MASK
        block = self._block(no)
        if block is None:
            return self._pop_sparse(no, job_id)
        job = block.slots[at]
        if job is None:
            return None
        block.slots[at] = None
        block.live -= 1
        self.count -= 1
        if block.live == 0:
            if block.top == BLOCK:  # used up: no more of its ids will come
                self._drop(no)
            # else it stays while it is the last looked up (`_look_at`)
        elif block.live <= SPARSE_LIVE and block.top == BLOCK:
            self._thin_out(no, block)
        return job

    def _drop(self, no: int) -> None:
        """Block `no` gone (it was the one looked up last)."""
        del self.blocks[no]
        self.last_no = -1
        self.last = None

    @cython.locals(block=Block, at=cython.Py_ssize_t)
    def _thin_out(self, no: int, block: Block) -> None:
        """A used-up block with few jobs left: them into `sparse`, the block gone."""
        first = (int(no) << SHIFT) + 1  # (a Python int: ids go up to 2**64)
        for at in range(BLOCK):
            job = block.slots[at]
            if job is not None:
                self.sparse[first + at] = job
        self.sparse_blocks[no] = block.live
        self._drop(no)

    def _pop_sparse(self, no: int, job_id: int) -> Job | None:
        if not self.sparse_blocks or no not in self.sparse_blocks:
            return None
        job = self.sparse.pop(job_id, None)
        if job is not None:
            self.count -= 1
            left = self.sparse_blocks[no] - 1
            if left:
                self.sparse_blocks[no] = left
            else:
                del self.sparse_blocks[no]
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
        """(id, job): the blocks' in order of id, then the sparse ones."""
        for no in sorted(self.blocks):
            first = (no << SHIFT) + 1
            for at, job in enumerate(self.blocks[no].slots):
                if job is not None:
                    yield first + at, job
        yield from list(self.sparse.items())

    def __iter__(self) -> Iterator[int]:
        return (job_id for job_id, _ in self.items())

    def keys(self) -> Iterator[int]:
        return iter(self)

    def values(self) -> Iterator[Job]:
        return (job for _, job in self.items())

    def __repr__(self) -> str:
        return f"JobTable({dict(self.items())!r})"
