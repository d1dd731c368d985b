"""The key names of the `stats`, `stats-tube` and `stats-job` replies, in reply order.

Every list here is the one statement of its keys and their order (beanstalkd 1.12's);
the engine, the serving process and the coordinator take the names from here, so a key cannot
be spelled differently in two places, and a reply's order cannot drift from the others.
"""

from __future__ import annotations

from shardq.protocol.commands import COMMANDS

#: The per-state job counts that open `stats` and follow `name` in `stats-tube`.
JOB_COUNT_KEYS = (
    "current-jobs-urgent",
    "current-jobs-ready",
    "current-jobs-reserved",
    "current-jobs-delayed",
    "current-jobs-buried",
)

#: The `cmd-*` counters of `stats` that beanstalkd 1.12 has, in its order.
BEANSTALKD_CMD_KEYS = (
    "cmd-put",
    "cmd-peek",
    "cmd-peek-ready",
    "cmd-peek-delayed",
    "cmd-peek-buried",
    "cmd-reserve",
    "cmd-reserve-with-timeout",
    "cmd-delete",
    "cmd-release",
    "cmd-use",
    "cmd-watch",
    "cmd-ignore",
    "cmd-bury",
    "cmd-kick",
    "cmd-touch",
    "cmd-stats",
    "cmd-stats-job",
    "cmd-stats-tube",
    "cmd-list-tubes",
    "cmd-list-tube-used",
    "cmd-list-tubes-watched",
    "cmd-pause-tube",
)

#: The `cmd-*` counters of `stats`, in order: beanstalkd's, then those of commands it does
#: not have (commands.py: STAT), in the order of COMMANDS.
CMD_KEYS = BEANSTALKD_CMD_KEYS + tuple(
    cls.STAT for cls in COMMANDS if cls.STAT is not None and cls.STAT not in BEANSTALKD_CMD_KEYS
)

#: The write-ahead log's counters (each shard's log reports them; 0 without a log).
BINLOG_KEYS = (
    "binlog-oldest-index",
    "binlog-current-index",
    "binlog-records-migrated",
    "binlog-records-written",
)

#: Shown only once a log with damaged records was replayed, after binlog-records-written.
BINLOG_DAMAGED_KEY = "binlog-damaged-records"

#: What each shard counts for `stats` (Engine.counts); the coordinator sums them.
SHARD_COUNT_KEYS = (*JOB_COUNT_KEYS, "job-timeouts", "total-jobs", "current-tubes")

#: `stats` keys in beanstalkd 1.12's order.
STATS_KEYS = (
    *JOB_COUNT_KEYS,
    *CMD_KEYS,
    "job-timeouts",
    "total-jobs",
    "max-job-size",
    "current-tubes",
    "current-connections",
    "current-producers",
    "current-workers",
    "current-waiting",
    "total-connections",
    "pid",
    "version",
    "rusage-utime",
    "rusage-stime",
    "uptime",
    *BINLOG_KEYS,
    "binlog-max-size",
    "draining",
    "id",
    "hostname",
    "os",
    "platform",
)

#: shardq's own `stats` keys, after all of beanstalkd's (clients that parse its keys in
#: order still do): the configured limits (0: none) and how often each closed a connection.
#: Shown only when a limit is set or has acted (processes/coordinator.py): a default
#: server's `stats` has beanstalkd's keys only.
LIMIT_KEYS = (
    "limit-max-connections",
    "limit-connections-refused",
    "limit-connections-denied",
    "limit-max-output-bytes",
    "limit-output-closed",
    "limit-max-jobs",
    "limit-max-memory",
    "limit-jobs",
    "limit-memory",
    "limit-puts-refused",
)

#: The `stats` keys a serving process counts (its part, `connection_fields`, comes with its
#: own `stats` or its hosted shard's COUNTS answer; the coordinator adds them up).
SERVING_KEYS = (
    *CMD_KEYS,
    "max-job-size",
    "current-connections",
    "current-producers",
    "current-workers",
    "current-waiting",
    "total-connections",
    "draining",
    "limit-max-connections",
    "limit-connections-refused",
    "limit-connections-denied",
    "limit-max-output-bytes",
    "limit-output-closed",
)

#: `stats-tube` keys in order.
STATS_TUBE_KEYS = (
    "name",
    *JOB_COUNT_KEYS,
    "total-jobs",
    "current-using",
    "current-watching",
    "current-waiting",
    "cmd-delete",
    "cmd-pause-tube",
    "pause",
    "pause-time-left",
)

#: The `stats-tube` key shardq adds after all of beanstalkd's when the server has several
#: shards: the index of the shard that holds the tube (cluster/routing.py). A server with
#: one shard (`--shards 1`) answers as beanstalkd does.
SHARD_TUBE_KEY = "shard"

#: `stats-tube` keys shardq adds after all of beanstalkd's (and `shard`), only for a tube
#: that has a per-tube policy (shardq/engine/policy.py): a tube without one reads as
#: beanstalkd's.
#: The order is documented (docs/PROTOCOLS.md) and stable: a new policy key goes after the
#: last `policy-*` key, before `current-bytes`; a new counter at the end.
POLICY_TUBE_KEYS = (
    "policy-max-jobs",
    "policy-max-bytes",
    "policy-discard-old",
    "policy-max-reserves",
    "policy-max-timeouts",
    "policy-max-age",
    "policy-max-reserved",
    "policy-reserve-rate",
    "policy-fanout",
    "policy-expired-to",
    "current-bytes",
    "total-discarded",
    "total-policy-buried",
    "total-expired",
    "total-fanout-copies",
    "total-expired-moved",
)

#: `stats-job` keys in order.
STATS_JOB_KEYS = (
    "id",
    "tube",
    "state",
    "pri",
    "age",
    "delay",
    "ttr",
    "time-left",
    "file",
    "reserves",
    "timeouts",
    "releases",
    "buries",
    "kicks",
)

__all__ = [
    "BINLOG_DAMAGED_KEY",
    "BINLOG_KEYS",
    "CMD_KEYS",
    "JOB_COUNT_KEYS",
    "LIMIT_KEYS",
    "POLICY_TUBE_KEYS",
    "SERVING_KEYS",
    "SHARD_COUNT_KEYS",
    "SHARD_TUBE_KEY",
    "STATS_JOB_KEYS",
    "STATS_KEYS",
    "STATS_TUBE_KEYS",
]
