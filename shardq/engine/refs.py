"""The engine's tube references and listings: which connections use and watch a tube
(per serving process), the tubes' policies, their heads and their list, and the job events
for the event log (a mixin of `Engine`: the state is EngineCore's)."""

from __future__ import annotations

from shardq.engine.core import EngineCore
from shardq.engine.job import ID_MASK, ST_RESERVED, Job
from shardq.engine.policy import Policies


class TubeRefs(EngineCore):
    """Tube references, policies, heads and lists; job events; ownership checks."""

    __slots__ = ()  # the state is EngineCore's

    def set_policies(self, policies: Policies, now: int | None = None) -> None:
        """New per-tube policies (start-up, or a reload at `now`): every tube resolves its
        own again. Jobs already past a lowered limit stay; the next put is refused (or
        discards)."""
        self.policies = policies
        self.policed = bool(policies)
        for tube in self.tubes.values():
            tube.set_policy(policies.resolve(tube.name), now)

    def ref(self, name: str, using: int, watching: int, now: int, origin: int = 0) -> None:
        """A connection of serving process `origin` started or stopped using or watching a
        tube (counted per origin too, so a restarted process's references can be dropped)."""
        tube = self.ensure_tube(name, now)
        tube.using += using
        tube.watching += watching
        refs = self.origin_refs.setdefault(origin, {})
        counts = refs.get(name)
        if counts is None:
            counts = refs[name] = [0, 0]
        counts[0] += using
        counts[1] += watching
        if not counts[0] and not counts[1]:
            del refs[name]
        self._gc(tube)

    def move_refs(self, name: str, using: int, watching: int, old: int, new: int) -> None:
        """A connection moved from serving process `old` to `new`: its references to a
        tube now count under `new` (the tube's totals do not change)."""
        for origin, sign in ((old, -1), (new, 1)):
            refs = self.origin_refs.setdefault(origin, {})
            counts = refs.setdefault(name, [0, 0])
            counts[0] += sign * using
            counts[1] += sign * watching
            if not counts[0] and not counts[1]:
                del refs[name]

    def ready_head(self, name: str) -> tuple[int, int] | None:
        """(priority, put order) of the tube's best ready job; None: none (or no tube)."""
        tube = self.tubes.get(name)
        if tube is None or not tube.ready.live:
            return None
        key = tube.ready.first()
        return key >> 128, key >> 64 & ID_MASK

    def list_tubes(self) -> list[tuple[tuple[int, int], str]]:
        return [(t.order, t.name) for t in self.tubes.values()]

    def _note(self, now: int, event: str, job: Job, delay: int | None = None) -> None:
        """A job event for the event log and the metrics; `delay`: the event's own (else the
        job's: its put's, or its last release's)."""
        if self.audit is not None:
            delay = job.delay if delay is None else delay
            self.audit.append(
                (now, event, job.id, job.tube, job.pri, delay, job.ttr, len(job.body))
            )
        if self.timing is not None:
            self.timing.note(now, event, job)

    def _owned_by(self, job_id: int, conn: int) -> Job | None:
        job = self.jobs.get(job_id)
        if job is None or job.state != ST_RESERVED or job.hold >> 128 != conn:  # owner
            return None
        return job
