"""Reserving jobs: answers, waiters, offers to cross-shard reservers, and hand-overs.

A reserve is answered at once with the best ready job of its tubes, or waits (a waiter)
until a job comes, it times out or its connection's DEADLINE_SOON begins. A reserve that
spans shards is served in offer mode: the job is offered, and the serving process accepts or
declines it. Connections that close or come back after a restart are handled here too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from shardq.engine.core import EngineCore, reserved_fields
from shardq.engine.job import (
    ID_MASK,
    NS,
    ST_OFFERED,
    ST_READY,
    ST_RESERVED,
    URGENT_KEY,
    Job,
)
from shardq.engine.kinds import CANCELLED, FINAL, NONE_BETTER, OFFER, RESERVED, WAITING
from shardq.engine.timers import T_TTR, T_WAIT
from shardq.engine.tube import Tube, Waiter
from shardq.protocol import replies
from shardq.protocol.replies import job_reply

if TYPE_CHECKING or __file__.endswith(".py"):  # the pure build: no-op decorators
    from shardq.nocython import cython
else:  # compiled: Cython reads the decorators (and imports nothing at run time)
    import cython

SAFETY_MARGIN = NS  #: DEADLINE_SOON fires this long before a reserved job's TTR runs out

__all__ = [
    "CANCELLED",
    "FINAL",
    "NONE_BETTER",
    "OFFER",
    "RESERVED",
    "SAFETY_MARGIN",
    "WAITING",
    "Reserving",
    "reserved_payload",
]


class Reserved(NamedTuple):
    """The payload a reserve is answered with when a job was reserved (a list of these
    fields, in this order, on the wire). The serving process unpacks it into these names rather
    than building the tuple: this is the reserve hot path."""

    kind: int  # RESERVED
    reply: bytes  # the client's RESERVED line and body
    job_id: int
    deadline: int  # TTR deadline, monotonic ns


class Offer(NamedTuple):
    """The payload of an offer to a cross-shard reserver (a list of these fields, in this
    order, on the wire; the serving process names them with ``Offer._make``)."""

    kind: int  # OFFER
    reply: bytes  # the RESERVED line the client gets if it accepts
    job_id: int
    ttr: int  # ns; the TTR starts when the serving process accepts
    pri: int
    seq: int  # put order: (pri, seq) picks the best offer across shards
    conn: int  # the connection it is offered to (a stray offer is declined for it)


class Final(NamedTuple):
    """The payload of a reserve answered without a job (DEADLINE_SOON, TIMED_OUT,
    NOT_FOUND, or a failure); a waiter's other answers are ``[WAITING]`` (offer mode: no
    job yet) and ``[CANCELLED]`` (withdrawn)."""

    kind: int  # FINAL
    reply: bytes


def reserved_payload(job: Job) -> list[Any]:
    """What a reserve answers: the fields of `Reserved`."""
    return reserved_fields(job.key & ID_MASK, job.body, job.deadline)


def _head(tube: Tube) -> int:
    """The key of a tube's best ready job (the tube has one)."""
    return tube.ready[0]


class Reserving(EngineCore):
    """Reserves, waiters and offers of an engine."""

    __slots__ = ()  # the state is EngineCore's

    def _drop_waiter(self, waiter: Waiter) -> None:
        del self.waiters[waiter.rid]
        for name in waiter.tubes:
            tube = self.tubes.get(name)
            if tube is not None:
                tube.waiters.pop(waiter.rid, None)

    def _no_job(
        self,
        conn: int,
        rid: int,
        tubes: tuple[str, ...],
        now: int,
        timeout_at: int | None,
        soon_at: int | None,
        offer: bool,
    ) -> list[Any] | None:
        """A reserve that found no job ready: its answer now, or it waits (None)."""
        if soon_at is not None and now >= soon_at:
            return [FINAL, replies.DEADLINE_SOON]
        if timeout_at is not None and now >= timeout_at:
            return [FINAL, replies.TIMED_OUT]
        expire_at, reply = timeout_at, replies.TIMED_OUT
        if soon_at is not None and (expire_at is None or soon_at <= expire_at):
            expire_at, reply = soon_at, replies.DEADLINE_SOON
        if offer:
            expire_at = None
        waiter = Waiter(conn, rid, tubes, offer, expire_at, reply)
        self.waiters[rid] = waiter
        for name in tubes:
            self.ensure_tube(name, now).waiters[rid] = waiter
        if expire_at is not None:
            self._at(expire_at, T_WAIT, rid)
        return [WAITING] if offer else None

    @cython.locals(self=EngineCore, job=Job, tube=Tube)
    def _offer(self, job: Job, conn: int, now: int) -> list[Any]:
        """Offer the job to the cross-shard reserve of `conn`: the fields of `Offer`."""
        self._unlink(job)
        job.move("offer")
        job.owner = conn
        tube = self.tubes[job.tube]
        tube.offered += 1
        if tube.throttle is not None:
            self._spend(tube, now)  # reserve_rate
        key = job.key
        if key < URGENT_KEY:
            tube.urgent += 1  # an offered job is still ready as far as stats go
        job_id = key & ID_MASK
        self.owned.own(conn, job_id)
        return [
            OFFER,
            job_reply(b"RESERVED", job_id, job.body),
            job_id,
            job.ttr * NS,
            key >> 128,  # pri
            key >> 64 & ID_MASK,  # seq
            conn,  # whoever receives an offer it cannot place declines it for this conn
        ]  # the fields of `Offer`

    def _serve_tube(self, tube: Tube, now: int) -> None:
        """Hand the tube's best ready jobs to its oldest waiters, while both exist."""
        self._serve_tubes([tube], now)

    def _serve_tubes(self, tubes: list[Tube], now: int) -> None:
        """While some of these tubes have both waiters and ready jobs, give the best job of
        them all to the oldest waiter of its tube (beanstalkd's process_queue). A paused tube,
        or one at a limit of its policy (throttling.py), is passed over."""
        while True:
            live = [t for t in tubes if t.ready and t.waiters and not t.closed(now)]
            if not live:
                return
            tube = min(live, key=_head)
            waiter = tube.oldest_waiter()
            self._drop_waiter(waiter)
            job = self.jobs[tube.ready[0] & ID_MASK]
            self.events.append((waiter.rid, self._hand_over(job, waiter.conn, waiter.offer, now)))

    def offer_best(self, conn: int, tubes: tuple[str, ...], now: int) -> list[Any] | None:
        """The best ready job of these tubes offered to `conn` (the fields of `Offer`), or
        None when none is ready; no waiter is left behind."""
        self.tick(now)
        job = self._best_job(tubes, now)
        return None if job is None else self._hand_over(job, conn, True, now)

    def reserve_better(
        self, conn: int, tubes: tuple[str, ...], now: int, pri: int, seq: int
    ) -> list[Any]:
        """Reserve for `conn` the best ready job of these tubes if it comes before a job of
        priority `pri` put at `seq` (another shard's offer): the fields of `Reserved`; else
        ``[NONE_BETTER]``, and nothing is left behind (no waiter, no offer)."""
        self.tick(now)
        job = self._best_job(tubes, now)
        if job is None or job.key >> 64 >= (pri << 64 | seq):
            return [NONE_BETTER]
        job_id, deadline = self._reserve(job, conn, now)
        return reserved_fields(job_id, job.body, deadline)

    def cancel(self, rid: int) -> bool:
        """Withdraw a waiting reserve (the serving process timed it out or was served elsewhere).
        False when there was no such waiter: it was served already, and its answer (an
        event) is on its way or still in `events`."""
        waiter = self.waiters.get(rid)
        if waiter is None:
            return False
        self._drop_waiter(waiter)
        return True

    def accept(self, conn: int, job_id: int, now: int) -> None:
        """The cross-shard reserver took the offered job: it is now reserved by it."""
        job = self.jobs.get(job_id)
        if job is None or job.state != ST_OFFERED or job.owner != conn:
            return
        self._unreserve(job)
        self._reserve(job, conn, now, "accept")

    def decline(self, conn: int, job_id: int, now: int) -> None:
        """The reserver was gone or served elsewhere: the job goes back to its place."""
        job = self.jobs.get(job_id)
        if job is None or job.state != ST_OFFERED or job.owner != conn:
            return
        self._unreserve(job)
        job.move("decline")
        if self.policed:
            self._give_back(job, now)  # reserve_rate: the offer's token
        self._enqueue(job, now)

    def reserve_job(self, conn: int, job_id: int, now: int) -> list[Any]:
        job = self.jobs.get(job_id)
        if job is None or not job.can("reserve"):
            return [FINAL, replies.NOT_FOUND]
        _, deadline = self._reserve(job, conn, now)  # not refused at a limit, nor when paused
        return reserved_fields(job_id, job.body, deadline)

    def disconnect(self, conn: int, now: int, hold: bool = False) -> list[str]:
        """A connection closed: its waiters go away and its jobs are ready again at once.
        With `hold`, the tubes they go back to are held closed to reserves (as if paused)
        until `unhold` (processes/shard/closing.py says why); their names are returned."""
        for waiter in [w for w in self.waiters.values() if w.conn == conn]:
            self._drop_waiter(waiter)
        owned = self.owned.ids(conn)
        held = sorted({self.jobs[job_id].tube for job_id in owned}) if hold else []
        for name in held:
            self.tubes[name].held += 1
        for job_id in owned:
            job = self.jobs[job_id]
            if job.state == ST_OFFERED:
                self.decline(conn, job_id, now)
            else:
                self._unreserve(job)
                if self.policed and self._bury_instead(job, now):  # max_reserves
                    continue
                # given back: the event log has it as a release with no delay (stats-job's
                # `releases` does not count it, as in beanstalkd)
                self._note(now, "release", job, 0)
                job.move("release")
                self._enqueue(job, now)
        return held

    def unhold(self, names: list[str], now: int) -> None:
        """The tubes a `disconnect` held open again: their waiters are served."""
        opened = []
        for name in names:
            tube = self.tubes.get(name)
            if tube is not None and tube.held:
                tube.held -= 1
                if not tube.held:
                    opened.append(tube)
        if opened:
            self._serve_tubes(opened, now)

    def reassert(self, conn: int, job_id: int, deadline: int, now: int) -> None:
        """After this shard restarted from its log, a live connection still holds this job:
        reserve it for that connection again, with its old TTR deadline (no new reserve)."""
        job = self.jobs.get(job_id)
        if job is None or job.state != ST_READY:
            return
        self._unlink(job)
        job.state = ST_RESERVED
        job.held_by(conn, deadline)
        self.tubes[job.tube].reserved += 1
        self.owned.own(conn, job.id)
        self._at(deadline + 1, T_TTR, job.id)

    def forget_connections(
        self, now: int, origin: int | None = None, belongs: Callable[[int], bool] | None = None
    ) -> None:
        """A serving process restarted: its connections are gone; free their jobs, waiters
        and tube references. `origin` names the process and `belongs` tells its connection
        ids; with neither, every connection of every process is forgotten."""
        conns = set(self.owned.conns()) | {w.conn for w in self.waiters.values()}
        for conn in sorted(conns):
            if belongs is None or belongs(conn):
                self.disconnect(conn, now)
        if origin is None:
            dropped = {name: [t.using, t.watching] for name, t in self.tubes.items()}
            self.origin_refs.clear()
        else:
            dropped = self.origin_refs.pop(origin, {})
        for name, (using, watching) in dropped.items():
            tube = self.tubes.get(name)
            if tube is not None:
                tube.using -= using
                tube.watching -= watching
                self._gc(tube)
