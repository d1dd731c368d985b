"""Enforcing the per-tube policies (engine/policy.py) on the jobs of a shard.

* A put to a tube at `max_jobs` (jobs in any state), or whose body would take the tube's
  bodies past `max_bytes`, is refused (OUT_OF_MEMORY) — unless `discard_old`: then the
  oldest ready jobs of the tube (put order) are deleted until the new one fits, counted in
  `Tube.discarded`. If even every ready job would not make room (the rest are reserved,
  delayed or buried), nothing is deleted and the put is refused.
* A reserved job that would be made ready again (released, timed out, or freed by its
  connection closing) is buried instead once its `reserves` count has reached
  `max_reserves`, or, at a TTR timeout, once its `timeouts` count has reached
  `max_timeouts`; counted in `Tube.policy_buried`.

Both are logged as the commands they stand for (a discard as a delete record, a burial as a
job state record) and noted as `delete` and `bury` job events, so a restart from the log
and the analytics pipeline see them as such.
"""

from __future__ import annotations

from shardq.engine.job import BURY, ID_MASK, Job
from shardq.engine.persist import Persistence
from shardq.engine.policy import Policy
from shardq.engine.tube import Tube


class Policing(Persistence):
    """The per-tube policies' part of an engine."""

    def _make_room(self, tube: Tube, policy: Policy, size: int, now: int) -> bool:
        """May a job of `size` body bytes be put into `tube`? With discard_old, the oldest
        ready jobs that stand in its way are deleted first (all of them, or none)."""
        over_jobs = tube.jobs() + 1 - policy.max_jobs if policy.max_jobs else 0
        over_bytes = tube.body_bytes + size - policy.max_bytes if policy.max_bytes else 0
        if over_jobs <= 0 and over_bytes <= 0:
            return True
        oldest = tube.by_age
        if oldest is None or (policy.max_bytes and size > policy.max_bytes):
            return False
        victims: list[Job] = []
        for low in oldest:
            if over_jobs <= 0 and over_bytes <= 0:
                break
            job = self.jobs[low & ID_MASK]
            victims.append(job)
            over_jobs -= 1
            over_bytes -= len(job.body)
        if over_jobs > 0 or over_bytes > 0:
            return False
        for job in victims:
            self._unlink(job)
            self._remove(job, tube, now)
            tube.discarded += 1
        return True

    def _bury_instead(self, job: Job, now: int, timed_out: bool = False) -> bool:
        """A reserved job that is about to be made ready again (it has no owner any more):
        bury it instead if its tube's policy says so. True if it was buried."""
        tube = self.tubes[job.tube]
        policy = tube.policy
        if policy is None:
            return False
        spent = 0 < policy.max_reserves <= job.reserves
        timed = timed_out and 0 < policy.max_timeouts <= job.timeouts
        if not (spent or timed):
            return False
        job.counts += BURY
        self._note(now, "bury", job)
        job.move("bury")
        tube.buried[job.id] = None
        tube.policy_buried += 1
        self._persist(job)
        return True
