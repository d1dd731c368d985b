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
* A job older than `max_age` seconds (since its put) is deleted, counted in
  `Tube.expired`: a timer per job (timers.py, T_AGE) fires at its age limit. A job that is
  held then (reserved, or offered to a cross-shard reserver) is not taken from its worker:
  it is looked at again within a second (and at its TTR's end) and deleted once it is no
  longer held. A reload re-arms the timers of the tubes whose `max_age` changed; a restart
  arms them from each job's logged put time.

The limits on handing jobs out, `max_reserved` and `reserve_rate`, are throttling.py's.

All are logged as the commands they stand for (a discard or expiry as a delete record, a
burial as a job state record) and noted as `delete` and `bury` job events, so a restart from the log
and the analytics pipeline see them as such.
"""

from __future__ import annotations

from shardq.engine.job import BURY, ID_MASK, NS, ST_OFFERED, ST_RESERVED, Job
from shardq.engine.persist import Persistence
from shardq.engine.policy import Policies, Policy
from shardq.engine.timers import T_AGE
from shardq.engine.tube import Tube

HELD = (ST_RESERVED, ST_OFFERED)  #: a job in these states is not expired (yet)


def _max_age(tube: Tube) -> int:
    return tube.policy.max_age if tube.policy is not None else 0


class Policing(Persistence):
    """The per-tube policies' part of an engine."""

    __slots__ = ()  # the state is EngineCore's

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
        job.dur += BURY
        self._note(now, "bury", job)
        job.move("bury")
        tube.buried[job.id] = None
        tube.policy_buried += 1
        self._persist(job)
        self._freed(tube, now)  # max_reserved
        return True

    def _age_out(self, job_id: int, now: int) -> None:
        """A job's max_age timer fired: delete the job if it is past its tube's max_age and
        not held; else look again when it may be (see the module's docstring)."""
        job = self.jobs.get(job_id)
        if job is None:
            return
        tube = self.tubes[job.tube]
        max_age = _max_age(tube)
        if not max_age:
            return  # the policy went (a reload)
        due = job.created + max_age * NS
        if now < due:  # max_age grew (a reload)
            self._at(due, T_AGE, job_id)
            return
        if job.state in HELD:
            again = now + NS
            if job.state == ST_RESERVED:
                again = max(now + 1, min(again, job.deadline + 1))  # after its TTR timer
            self._at(again, T_AGE, job_id)
            return
        self._unlink(job)
        tube.expired += 1
        target = tube.policy.expiry_target(job.tube) if tube.policy is not None else ""
        if not target or not self._move_expired(job, tube, target, now):
            self._remove(job, tube, now)
        self._gc(tube)

    def _move_expired(self, job: Job, tube: Tube, target: str, now: int) -> bool:
        """expired_to: the job (out of its tube's queues) goes to `target`, ready, as if put
        there now (its age, and the target's own max_age, count from here), keeping its id;
        False if the target's policy has no room for it (it is deleted then)."""
        into = self.ensure_tube(target, now)
        size = len(job.body)
        if into.policy is not None and not self._make_room(into, into.policy, size, now):
            self._gc(into)
            return False
        self._note(now, "delete", job)  # the analytics log: a life ends here, another starts
        tube.body_bytes -= size
        into.body_bytes += size
        into.total_jobs += 1
        tube.moved += 1
        job.move("expire-to")
        job.tube, job.created, job.delay = target, now, 0
        self._note(now, "put", job)
        if into.policy is not None and into.policy.max_age:
            self._at(now + into.policy.max_age * NS, T_AGE, job.id)
        self._enqueue(job, now)
        if self.wal_out is not None:
            self.wal_out.append(self.full_record(job))
        return True

    def _place(self, job: Job, now: int) -> None:
        """A job rebuilt from the log: its max_age timer from its put time."""
        super()._place(job, now)
        max_age = _max_age(self.tubes[job.tube])
        if max_age:
            self._at(job.created + max_age * NS, T_AGE, job.id)

    def set_policies(self, policies: Policies, now: int | None = None) -> None:
        """New policies; a tube whose max_age changed gets a timer for each of its jobs (a
        timer that fires early finds the new limit and waits for it)."""
        before = {name: _max_age(tube) for name, tube in self.tubes.items()}
        super().set_policies(policies, now)
        changed = {
            name: max_age
            for name, tube in self.tubes.items()
            if (max_age := _max_age(tube)) and max_age != before[name]
        }
        if changed:
            for job in self.jobs.values():
                new_age = changed.get(job.tube)
                if new_age:
                    self._at(job.created + new_age * NS, T_AGE, job.id)
