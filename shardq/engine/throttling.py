"""Enforcing the per-tube limits `max_reserved` and `reserve_rate` (limits.py) on a shard.

A tube at one of its limits is *closed* (`Tube.closed`), as a paused tube is: `reserve`
and the serving of waiters (reserve.py) pass over its ready jobs as they pass over a paused
tube's, so a reserve watching only it waits (or times out), one watching other tubes too
gets their best ready job, and a cross-shard reserver is offered none of its jobs. What
opens it again:

* `max_reserved`: one of its reserved (or offered) jobs is no longer held. A job made ready
  again (released, timed out, declined, freed by its connection closing) serves the
  waiters as any new ready job does (`_enqueue`); a job deleted, buried (by its holder or
  by a policy) or released with a delay serves them through `_freed`.
* `reserve_rate`: its next token is due. A timer in the engine's heap (timers.py, T_TOKEN)
  fires then, as T_PAUSE does at a pause's end; the tubes it opens are served together.
* a reload (`set_policies` with `now`) that raises or drops a limit: every tube with both
  waiters and ready jobs is served at once.

Every job of the tube handed out takes a token: an answered reserve, a served waiter, an
offer (the token comes back if the offer is declined), and a `reserve-job` (which is not
refused, as it is not for a paused tube; later reserves wait the longer). A rate-limited
tube that goes away (nothing uses, watches or holds it) before its bucket is full leaves
its `full_at` in `buckets`, so letting a tube go and making it again does not refill the
bucket; a T_TOKEN timer for the name forgets it once the bucket would be full.
Nothing here is logged: after a restart every bucket starts full.
"""

from __future__ import annotations

from shardq.engine.core import EngineCore
from shardq.engine.job import Job
from shardq.engine.limits import Throttle
from shardq.engine.policy import Policies
from shardq.engine.timers import T_TOKEN
from shardq.engine.tube import Tube


class Throttling(EngineCore):
    """The concurrency and rate limits' part of an engine."""

    __slots__ = ()  # the state is EngineCore's

    def _spend(self, tube: Tube, now: int) -> None:
        """A job of `tube` (it has limits) is being handed out, reserved or offered: its
        bucket gives a token."""
        throttle = tube.throttle
        if throttle is not None and throttle.interval:
            throttle.take(now)
            if throttle.starved(now):
                self._arm_token(tube, throttle)

    def _give_back(self, job: Job, now: int) -> None:
        """An offered job was declined: the token its offer took comes back."""
        tube = self.tubes[job.tube]
        throttle = tube.throttle
        if throttle is not None and throttle.interval:
            throttle.give_back()
            if throttle.starved(now):
                self._arm_token(tube, throttle)

    def _arm_token(self, tube: Tube, throttle: Throttle) -> None:
        """The bucket is empty: a timer for its next token (unless one is armed for then)."""
        due = throttle.next_token()
        if throttle.timer_at != due:
            throttle.timer_at = due
            self._at(due, T_TOKEN, tube.name)

    def _freed(self, tube: Tube, now: int) -> None:
        """A held job of `tube` is held no more and not ready (deleted, buried, delayed):
        a tube that was at its `max_reserved` serves its waiters."""
        if tube.throttle is not None and tube.waiters and tube.ready:
            self._serve_tube(tube, now)

    def _token_due(self, name: str, when: int, opened: list[Tube]) -> None:
        """A T_TOKEN timer fired: the tube has a token again (`opened`: to be served), or a
        tube that went away has a full bucket again (forgotten)."""
        tube = self.tubes.get(name)
        if tube is None:
            if self.buckets.get(name) == when:
                del self.buckets[name]
            return
        throttle = tube.throttle
        if throttle is None or throttle.timer_at != when:
            return  # another timer stands for it now
        throttle.timer_at = 0
        if tube.waiters and tube.ready:
            opened.append(tube)

    def _keep_bucket(self, tube: Tube) -> None:
        """A rate-limited tube goes away (core._gc): keep its bucket until it is full."""
        assert tube.throttle is not None
        full_at = tube.throttle.full_at
        self.buckets[tube.name] = full_at
        self._at(full_at, T_TOKEN, tube.name)

    def _restore_bucket(self, tube: Tube, now: int) -> None:
        """A tube made again (core.ensure_tube): its bucket as the tube left it."""
        full_at = self.buckets.pop(tube.name, 0)
        throttle = tube.throttle
        if throttle is not None and throttle.interval and full_at > now:
            throttle.full_at = full_at
            if throttle.starved(now):
                self._arm_token(tube, throttle)

    def set_policies(self, policies: Policies, now: int | None = None) -> None:
        """New policies; at a reload (`now` given) a raised or dropped limit serves the
        waiting reserves at once, and an empty bucket is due its next token at its new
        rate."""
        super().set_policies(policies, now)
        if now is None:
            return
        for tube in self.tubes.values():
            throttle = tube.throttle
            if throttle is not None and throttle.starved(now):
                self._arm_token(tube, throttle)
        self._serve_tubes([t for t in self.tubes.values() if t.waiters and t.ready], now)
