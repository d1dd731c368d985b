"""The engine and its write-ahead log: the records it writes, and rebuilding from them.

The engine appends a record (records.py) to `wal_out` for every change a restart must
see; the shard writes them with one group commit per turn. `snapshot` is every live job
as a full record (compaction), `restore` rebuilds the jobs from a log's records.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from shardq.engine.core import EngineCore
from shardq.engine.job import ID_MASK, NS, ST_BURIED, ST_DELAYED, ST_READY, Job, State, new_job
from shardq.engine.records import (
    DELETE,
    JOB,
    RECORD_OVERHEAD,
    STATE,
    DeleteRecord,
    JobRecord,
    StateRecord,
    new,
)
from shardq.engine.timers import T_DELAY

READY, DELAYED, BURIED = ST_READY, ST_DELAYED, ST_BURIED  # one enum lookup each
#: The state a job has after a restart, by its state before (or its logged value): delayed
#: and buried jobs stay so, any other comes back ready (`.get(state, READY)`).
RESTARTS_AS: dict[int, State] = {DELAYED: DELAYED, BURIED: BURIED}


class Persistence(EngineCore):
    """Logging an engine's jobs, and rebuilding them from the log."""

    __slots__ = ()  # the state is EngineCore's

    def _wall(self, mono: int) -> int:
        return mono + self.wall_offset if mono else 0

    def _persist(self, job: Job) -> None:
        """Log a job's new state (release, bury, kick) for the write-ahead log."""
        if self.wal_out is not None:
            self.wal_out.append(
                new(
                    StateRecord,
                    (
                        STATE,
                        job.id,
                        int(job.state),
                        job.pri,
                        job.delay * NS,
                        self._wall(job.deadline),
                        job.reserves,
                        job.timeouts,
                        job.releases,
                        job.buries,
                        job.kicks,
                    ),
                )
            )

    def full_record(self, job: Job) -> JobRecord:
        """Everything a restart needs to rebuild the job; a reserved job comes back ready."""
        state = RESTARTS_AS.get(job.state, READY)
        deadline = self._wall(job.deadline) if state == DELAYED else 0
        key = job.key
        return new(
            JobRecord,
            (
                JOB,
                job.id,
                key >> 64 & ID_MASK,  # seq
                job.tube,
                key >> 128,  # pri
                job.delay * NS,
                job.ttr * NS,
                self._wall(job.created),
                int(state),
                deadline,
                job.reserves,
                job.timeouts,
                job.releases,
                job.buries,
                job.kicks,
                job.body,
            ),
        )

    def snapshot(self) -> list[JobRecord]:
        """Full records of every live job, buried ones in their bury order (for compaction)."""
        buried = [j for t in self.tubes.values() for j in t.buried]
        order = [j for j in self.jobs if self.jobs[j].state != BURIED] + buried
        return [self.full_record(self.jobs[j]) for j in order]

    def restore(self, records: Iterable[Sequence[Any]], now: int) -> None:
        """Rebuild the jobs from write-ahead log records, oldest first (last record wins)."""
        rebuilt: dict[int, Job] = {}
        for raw in records:
            kind = raw[0]
            if kind == JOB:
                rec = new(JobRecord, raw)
                job = new_job(
                    rec.id,
                    rec.seq,
                    rec.tube,
                    rec.pri,
                    rec.delay // NS,  # the log keeps durations in ns
                    rec.ttr // NS,
                    rec.body,
                    rec.created - self.wall_offset,
                )
                rebuilt.pop(rec.id, None)  # a re-logged job moves to the end (bury order)
                rebuilt[rec.id] = job
                self._restore_state(job, rec)
            elif kind == STATE:
                change = new(StateRecord, raw)
                if change.id in rebuilt:
                    job = rebuilt.pop(change.id)
                    rebuilt[change.id] = job
                    job.pri, job.delay = change.pri, change.delay // NS
                    self._restore_state(job, change)
            elif kind == DELETE:
                rebuilt.pop(new(DeleteRecord, raw).id, None)
        for job in rebuilt.values():
            self._place(job, now)

    def _restore_state(self, job: Job, rec: JobRecord | StateRecord) -> None:
        state, deadline_wall = rec.state, rec.deadline
        job.state = RESTARTS_AS.get(state, READY)
        job.deadline = deadline_wall - self.wall_offset if deadline_wall else 0
        job.set_counters(rec.reserves, rec.timeouts, rec.releases, rec.buries, rec.kicks)

    def _place(self, job: Job, now: int) -> None:
        tube = self.ensure_tube(job.tube, now)
        self.jobs[job.id] = job
        tube.total_jobs += 1
        self.total_jobs += 1
        self.live_bytes += len(job.body) + RECORD_OVERHEAD
        tube.body_bytes += len(job.body)
        if job.state == BURIED:
            tube.buried[job.id] = None
        elif job.state == DELAYED and job.deadline > now:
            tube.delayed.add(job.delayed_key)
            self._at(job.deadline, T_DELAY, job.id)
        else:
            job.state = READY
            tube.add_ready(job)
