"""The engine's statistics: `stats-job`, `stats-tube`, and its share of `stats`.

Key names and their order come from shardq/protocol/stats_keys.py; the values are listed
here in that order.
"""

from __future__ import annotations

from typing import Any

from shardq.engine.core import EngineCore
from shardq.engine.job import NS, ST_DELAYED, ST_RESERVED, STATE_NAMES
from shardq.engine.tube import Tube
from shardq.protocol import replies
from shardq.protocol.replies import Quoted
from shardq.protocol.stats_keys import (
    POLICY_TUBE_KEYS,
    SHARD_COUNT_KEYS,
    SHARD_TUBE_KEY,
    STATS_JOB_KEYS,
    STATS_TUBE_KEYS,
)


def _seconds(ns: int) -> int:
    """Whole seconds, truncated toward zero like beanstalkd's int64 division."""
    return -(-ns // NS) if ns < 0 else ns // NS


def _rate(rate: float) -> int | replies.Raw:
    """A reserve_rate as the config file may write it: 2, 0.5 (the shortest exact form)."""
    return int(rate) if float(rate).is_integer() else replies.Raw(repr(float(rate)))


class Stats(EngineCore):
    """The statistics replies of an engine."""

    __slots__ = ()  # the state is EngineCore's

    def stats_job(self, job_id: int, now: int) -> bytes:
        job = self.jobs.get(job_id)
        if job is None:
            return replies.NOT_FOUND
        left = 0
        if job.state in (ST_RESERVED, ST_DELAYED):
            left = _seconds(job.deadline - now)
        values = (
            job.id,
            job.tube,
            replies.Raw(STATE_NAMES[job.state]),
            job.pri,
            _seconds(now - job.created),  # age
            job.delay,
            job.ttr,
            left,
            0,  # file
            job.reserves,
            job.timeouts,
            job.releases,
            job.buries,
            job.kicks,
        )
        return replies.yaml_map(zip(STATS_JOB_KEYS, values, strict=True))

    def stats_tube(self, tube_name: str, now: int) -> bytes:
        tube = self.tubes.get(tube_name)
        if tube is None:
            return replies.NOT_FOUND
        pairs = list(zip(STATS_TUBE_KEYS, self._tube_values(tube, now), strict=True))
        if self.shard_index is not None:  # several shards: which one holds the tube
            pairs.append((SHARD_TUBE_KEY, self.shard_index))
        if tube.policy is not None:  # after all of beanstalkd's keys, and only then
            pairs += zip(POLICY_TUBE_KEYS, self._policy_values(tube), strict=True)
        return replies.yaml_map(pairs)

    @staticmethod
    def _policy_values(tube: Tube) -> tuple[Any, ...]:
        """A tube's policy and what it did (POLICY_TUBE_KEYS order); the tube has one."""
        policy = tube.policy
        assert policy is not None
        return (
            policy.max_jobs,
            policy.max_bytes,
            policy.discard_old,
            policy.max_reserves,
            policy.max_timeouts,
            policy.max_age,
            policy.max_reserved,
            _rate(policy.reserve_rate),
            policy.fanout,
            Quoted(policy.expiry_target(tube.name)),
            tube.body_bytes,  # current-bytes
            tube.discarded,
            tube.policy_buried,
            tube.expired,
            tube.fanned,
            tube.moved,
        )

    def tube_table(self, now: int) -> list[list[Any]]:
        """Every tube's `stats-tube` values (STATS_TUBE_KEYS order), for the metrics."""
        return [list(self._tube_values(tube, now)) for tube in self.tubes.values()]

    def _tube_values(self, tube: Tube, now: int) -> tuple[Any, ...]:
        paused = tube.paused(now)
        return (
            tube.name,
            tube.urgent,
            tube.ready.live + tube.offered,  # an offered job is still ready for stats
            tube.reserved,
            len(tube.delayed),
            len(tube.buried),
            tube.total_jobs,
            tube.using,
            tube.watching,
            len(tube.waiters),
            tube.cmd_delete,
            tube.cmd_pause,
            tube.pause // NS if paused else 0,
            _seconds(tube.unpause_at - now) if paused else 0,  # pause-time-left
        )

    def counts(self) -> dict[str, int]:
        """This shard's share of the server-wide `stats`."""
        tubes = self.tubes.values()
        values = (
            sum(t.urgent for t in tubes),
            sum(t.ready.live + t.offered for t in tubes),
            sum(t.reserved for t in tubes),
            sum(len(t.delayed) for t in tubes),
            sum(len(t.buried) for t in tubes),
            self.job_timeouts,
            self.total_jobs,
            len(self.tubes),  # current-tubes
        )
        return dict(zip(SHARD_COUNT_KEYS, values, strict=True))
