"""A tube's concurrency and rate limits (`max_reserved`, `reserve_rate`): may a reserve take
one of its ready jobs now?

Pure state and arithmetic on the engine's clock (monotonic ns); the engine's part, when to
ask and what to do with the answer, is throttling.py.

* `max_reserved`: the tube's jobs that are reserved, or offered to a cross-shard reserver
  (who may accept them), count; at the limit nothing more is handed out.
* `reserve_rate`: a token bucket of ``max(1, rate)`` tokens, refilled continuously at `rate`
  tokens a second; every job of the tube handed out takes one. It is kept as one time, as
  in the generic cell rate algorithm: `full_at`, when the bucket would be full again. A
  token costs `interval` ns of it, and a token is there while `full_at` is at most
  `tolerance` (the other ``burst - 1`` tokens' worth) ahead of now. A bucket with
  `full_at` in the past is full: a new one is `full_at = 0`.
"""

from __future__ import annotations

from shardq.engine.job import NS
from shardq.engine.policy import Policy

#: (max_reserved, interval ns, tolerance ns) of a policy; interval 0: no rate
Limits = tuple[int, int, int]


def limits_of(policy: Policy | None) -> Limits | None:
    """What `policy` limits, or None when it sets neither limit."""
    if policy is None or not (policy.max_reserved or policy.reserve_rate):
        return None
    rate = policy.reserve_rate
    if not rate:
        return policy.max_reserved, 0, 0
    interval = max(1, round(NS / rate))
    return policy.max_reserved, interval, round((max(1.0, rate) - 1.0) * interval)


class Throttle:
    """The limits of one tube and the state of its token bucket."""

    __slots__ = ("max_reserved", "interval", "tolerance", "full_at", "timer_at")

    max_reserved: int  #: 0: none
    interval: int  #: ns a token takes to come back; 0: no rate
    tolerance: int  #: ns: how far ahead of now `full_at` may be while a token is left
    full_at: int  #: when the bucket would be full again (monotonic ns)
    timer_at: int  #: when its "next token" timer is due (0: none armed)

    def __init__(
        self, max_reserved: int, interval: int, tolerance: int, full_at: int = 0, timer_at: int = 0
    ) -> None:
        self.max_reserved = max_reserved
        self.interval = interval
        self.tolerance = tolerance
        self.full_at = full_at
        self.timer_at = timer_at

    def shut(self, held: int, now: int) -> bool:
        """Is the tube at a limit, with `held` of its jobs reserved or offered?"""
        if 0 < self.max_reserved <= held:
            return True
        return self.interval != 0 and self.full_at - now > self.tolerance

    def starved(self, now: int) -> bool:
        """Has the bucket no token left now?"""
        return self.interval != 0 and self.full_at - now > self.tolerance

    def next_token(self) -> int:
        """When the bucket has a token again (only meaningful while it is starved)."""
        return self.full_at - self.tolerance

    def take(self, now: int) -> None:
        """A job of the tube was handed out: one token (the bucket may go below empty, for
        a `reserve-job`, which is not refused: later reserves wait the longer)."""
        if self.interval:
            self.full_at = max(self.full_at, now) + self.interval

    def give_back(self) -> None:
        """An offered job was declined: the token it took comes back."""
        if self.interval:
            self.full_at -= self.interval

    def retune(self, limits: Limits, now: int | None) -> None:
        """New limits (a reload). The bucket keeps the tokens it holds, up to its new size,
        and refills at the new rate from `now`; without `now` it keeps `full_at`."""
        max_reserved, interval, tolerance = limits
        if not interval or not self.interval:
            self.full_at = 0  # no rate before (or now): a full bucket
        elif now is not None and (interval, tolerance) != (self.interval, self.tolerance):
            missing = max(0, self.full_at - now) / self.interval
            tokens = (self.tolerance + self.interval) / self.interval - missing
            burst = (tolerance + interval) / interval
            self.full_at = now + round((burst - min(tokens, burst)) * interval)
        self.max_reserved, self.interval, self.tolerance = max_reserved, interval, tolerance
