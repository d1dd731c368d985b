"""A tube: its ready, delayed and buried jobs, its waiters, pause state, limits and counters.

The tube only keeps order; the engine decides what moves where. Ready jobs are
ordered by (priority, put order, id), delayed jobs by (due time, put order, id), each
as one int key (see job.py), buried jobs by the order they were buried in (oldest
first, as kick takes them).
"""

from __future__ import annotations

from sortedcontainers import SortedList

from shardq.engine.job import LOW_MASK, URGENT_KEY, Job
from shardq.engine.limits import Throttle, limits_of
from shardq.engine.policy import Policy
from shardq.engine.ready import ReadyHeap


class Waiter:
    """A reserve that could not be answered yet; served first come, first served."""

    __slots__ = ("conn", "rid", "tubes", "offer", "expire_at", "expire_reply")

    conn: int
    rid: int
    tubes: tuple[str, ...]
    offer: bool  # a cross-shard reserve: offer the job, the serving process accepts or declines
    expire_at: int | None  # when the reserve ends without a job
    expire_reply: bytes  # TIMED_OUT or DEADLINE_SOON

    def __init__(
        self,
        conn: int,
        rid: int,
        tubes: tuple[str, ...],
        offer: bool,
        expire_at: int | None,
        expire_reply: bytes,
    ) -> None:
        self.conn = conn
        self.rid = rid
        self.tubes = tubes
        self.offer = offer
        self.expire_at = expire_at
        self.expire_reply = expire_reply


class Tube:
    __slots__ = (
        "name",
        "order",
        "ready",
        "delayed",
        "buried",
        "waiters",
        "urgent",
        "reserved",
        "offered",
        "total_jobs",
        "using",
        "watching",
        "cmd_delete",
        "cmd_pause",
        "pause",
        "unpause_at",
        "body_bytes",
        "policy",
        "by_age",
        "discarded",
        "policy_buried",
        "expired",
        "fanned",
        "moved",
        "throttle",
        "held",
    )

    name: str
    order: tuple[int, int]  # list-tubes position: (creation time, n), swap-remove emulated
    ready: ReadyHeap
    delayed: SortedList
    buried: dict[int, None]
    waiters: dict[int, Waiter]  # rid -> waiter, arrival order
    urgent: int
    reserved: int
    offered: int
    total_jobs: int
    using: int
    watching: int
    cmd_delete: int
    cmd_pause: int
    pause: int  # configured pause, ns (0 = not paused)
    unpause_at: int
    body_bytes: int  # the sum of its jobs' body sizes (current-bytes)
    policy: Policy | None  # its per-tube policy (engine/policy.py); None: none
    #: the (put order, id) bits of its ready jobs' keys, oldest first: only with discard_old
    by_age: SortedList | None
    discarded: int  # jobs dropped by discard_old (total-discarded)
    policy_buried: int  # jobs buried by max_reserves or max_timeouts (total-policy-buried)
    expired: int  # jobs deleted by max_age (total-expired)
    fanned: int  # copies its puts made in the tubes of its family (total-fanout-copies)
    moved: int  # expired jobs moved to its expired_to tube (total-expired-moved)
    #: max_reserved and reserve_rate (engine/limits.py), or None when its policy sets neither
    throttle: Throttle | None
    #: closes it is held for (engine `disconnect` with hold): closed to reserves meanwhile
    held: int

    def __init__(
        self,
        name: str,
        order: tuple[int, int],
        ready: ReadyHeap | None = None,
        delayed: SortedList | None = None,
        buried: dict[int, None] | None = None,
        waiters: dict[int, Waiter] | None = None,
        urgent: int = 0,
        reserved: int = 0,
        offered: int = 0,
        total_jobs: int = 0,
        using: int = 0,
        watching: int = 0,
        cmd_delete: int = 0,
        cmd_pause: int = 0,
        pause: int = 0,
        unpause_at: int = 0,
        body_bytes: int = 0,
        policy: Policy | None = None,
        by_age: SortedList | None = None,
        discarded: int = 0,
        policy_buried: int = 0,
        expired: int = 0,
        fanned: int = 0,
        moved: int = 0,
        throttle: Throttle | None = None,
        held: int = 0,
    ) -> None:
        self.name = name
        self.order = order
        self.ready = ReadyHeap() if ready is None else ready
        self.delayed = SortedList() if delayed is None else delayed
        self.buried = dict() if buried is None else buried
        self.waiters = dict() if waiters is None else waiters
        self.urgent = urgent
        self.reserved = reserved
        self.offered = offered
        self.total_jobs = total_jobs
        self.using = using
        self.watching = watching
        self.cmd_delete = cmd_delete
        self.cmd_pause = cmd_pause
        self.pause = pause
        self.unpause_at = unpause_at
        self.body_bytes = body_bytes
        self.policy = policy
        self.by_age = by_age
        self.discarded = discarded
        self.policy_buried = policy_buried
        self.expired = expired
        self.fanned = fanned
        self.moved = moved
        self.throttle = throttle
        self.held = held

    def jobs(self) -> int:
        return self.ready.live + len(self.delayed) + len(self.buried) + self.reserved + self.offered

    def in_use(self) -> bool:
        return self.name == "default" or bool(self.using or self.watching or self.jobs())

    def paused(self, now: int) -> bool:
        return self.pause != 0 and now < self.unpause_at

    def closed(self, now: int) -> bool:
        """May no reserve take one of its ready jobs now? Paused, held for a close, or at a
        limit of its policy (max_reserved, reserve_rate). Kept lean: it runs for every
        reserve."""
        if (self.pause != 0 and now < self.unpause_at) or self.held:
            return True
        throttle = self.throttle
        return throttle is not None and throttle.shut(self.reserved + self.offered, now)

    def add_ready(self, job: Job) -> None:
        key = job.key
        self.ready.add(key)
        if key < URGENT_KEY:
            self.urgent += 1
        if self.by_age is not None:
            self.by_age.add(key & LOW_MASK)

    def remove_ready(self, job: Job) -> None:
        key = job.key
        self.ready.remove(key)
        if key < URGENT_KEY:
            self.urgent -= 1
        if self.by_age is not None:
            self.by_age.remove(key & LOW_MASK)

    def set_policy(self, policy: Policy | None, now: int | None = None) -> None:
        """Its policy (made, or a reload at `now`); the age order of ready jobs is kept only
        while discard_old needs it, the limits' state only while it has a limit."""
        self.policy = policy
        limits = limits_of(policy)
        if limits is None:
            self.throttle = None
        elif self.throttle is None:
            self.throttle = Throttle(*limits)
        else:
            self.throttle.retune(limits, now)
        if policy is None or not policy.discard_old:
            self.by_age = None
        elif self.by_age is None:
            self.by_age = SortedList(key & LOW_MASK for key in self.ready.live_keys())

    def best_ready(self) -> int | None:
        return self.ready[0] if self.ready else None  # (never a gone key: ready.py)

    def oldest_waiter(self) -> Waiter:
        """The first come of the tube's waiters; only for a tube that has waiters."""
        return next(iter(self.waiters.values()))
