"""The beanstalk commands: one named handler per command class, and the help they share."""

from __future__ import annotations

import functools
import resource
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from shardq.cluster import wire
from shardq.engine.engine import RESERVED
from shardq.engine.reserve import Reserved
from shardq.processes.serving.conn import CLOSED, CLOSING, COORDINATOR, Conn, Done
from shardq.processes.shard import ops
from shardq.processes.shard.ops import (
    BuryArgs,
    DeleteArgs,
    JobArg,
    KickArgs,
    PauseArgs,
    PutArgs,
    RefArgs,
    ReleaseArgs,
    Touched,
    TubeArg,
)
from shardq.protocol import commands as c
from shardq.protocol import proto

if TYPE_CHECKING:
    from shardq.processes.serving.loop import ServingProcess


def joins_pipe(self: ServingProcess, conn: Conn, cmd: c.Command) -> bool:
    """Would this command go, pipelined, to the shard the connection's pipeline uses?"""
    if isinstance(cmd, c.Put):
        shard = self.shard_of(conn.use)
        return (
            cmd.error is None
            and not self.draining
            and self.ids.has_id(shard)
            and (shard == conn.pipe_target)
        )
    if isinstance(cmd, BY_ID):
        return self.ids.job_shard(cmd.id) == conn.pipe_target
    if isinstance(cmd, BY_USED_TUBE):
        return self.shard_of(conn.use) == conn.pipe_target
    if isinstance(cmd, (c.StatsTube, c.PauseTube)):
        return self.shard_of(cmd.tube) == conn.pipe_target
    return False


def forward(
    self: ServingProcess,
    conn: Conn,
    target: int | None,
    op: int,
    args: Sequence[Any],
    done: Done | None = None,
) -> None:
    """Send a command to the process that owns its data; reply with what it answers."""
    if target is None:
        self.reply(conn, proto.NOT_FOUND)
        return
    self.call(conn, target, op, args, done or self.reply_first)


def reply_first(self: ServingProcess, conn: Conn, payload: Sequence[Any]) -> None:
    """Most answers (`wire.Answer`): the reply bytes the shard formatted."""
    (reply,) = payload
    self.reply(conn, reply)


def by_id(
    self: ServingProcess,
    conn: Conn,
    op: int,
    job_id: int,
    args: Sequence[Any],
    done: Done | None = None,
) -> None:
    """A command for a job: to the shard its id routes to (`args`: the op's, with it)."""
    self.forward(conn, self.ids.job_shard(job_id), op, args, done)


def do_put(self: ServingProcess, conn: Conn, cmd: c.Put) -> None:
    if cmd.error in (proto.JOB_TOO_BIG, proto.OUT_OF_MEMORY):  # no job made: no id spent
        self.reply(conn, cmd.error)
        return
    conn.producer = True
    shard = self.shard_of(conn.use)
    job_id = self.ids.take(shard)
    if job_id is not None:
        self.put_with_id(conn, cmd, shard, job_id)
        return
    conn.step("call")  # until the id is there (a block has to be leased first)

    def with_id(job_id: int) -> None:
        conn.step("resume")
        self.put_with_id(conn, cmd, shard, job_id)

    self.ids.alloc(shard, with_id)


def put_with_id(self: ServingProcess, conn: Conn, cmd: c.Put, shard: int, job_id: int) -> None:
    """The id is spent whatever happens next, as in beanstalkd."""
    if cmd.error is not None:
        self.reply(conn, cmd.error)
    elif self.draining:
        self.reply(conn, proto.DRAINING)
    elif conn.phase is not CLOSED:
        args = PutArgs(job_id, self.put_stamp(), conn.use, cmd.pri, cmd.delay, cmd.ttr, cmd.body)
        self.call(conn, shard, ops.PUT, args, self.reply_first)


def forget(self: ServingProcess, job_id: int) -> Done:
    def done(conn: Conn, payload: Sequence[Any]) -> None:
        (reply,) = payload  # wire.Answer
        conn.let_go(job_id)
        self.reply(conn, reply)

    return done


def do_reserve_job(self: ServingProcess, conn: Conn, cmd: c.ReserveJob) -> None:
    shard = self.ids.job_shard(cmd.id)
    if shard is not None:
        conn.shards.add(shard)
    self.by_id(conn, ops.RESERVE_JOB, cmd.id, JobArg(cmd.id), self.on_reserved_job)


def on_reserved_job(self: ServingProcess, conn: Conn, payload: Sequence[Any]) -> None:
    if len(payload) == len(Reserved._fields) and Reserved._make(payload).kind == RESERVED:
        conn.worker = True  # beanstalkd counts a worker only when reserve-job succeeds
        conn.away = None
    self.on_reserved(conn, payload)


def on_touched(self: ServingProcess, job_id: int) -> Done:
    def done(conn: Conn, payload: Sequence[Any]) -> None:
        touched = Touched._make(payload)
        if touched.deadline:
            conn.hold(job_id, touched.deadline)
        self.reply(conn, touched.reply)

    return done


def quit(self: ServingProcess, conn: Conn) -> None:
    """`quit` has no reply; whatever the client pipelined after it is dropped."""
    self.finish(conn)


def do_use(self: ServingProcess, conn: Conn, cmd: c.Use) -> None:
    old, conn.use = conn.use, cmd.tube
    conn.away = None  # its home may have changed (handoff.py)
    if old == cmd.tube:
        self.reply(conn, proto.using(cmd.tube))
        return
    self.request(self.shard_of(old), ops.REF, conn, RefArgs(old, -1, 0), None)
    self.forward(
        conn,
        self.shard_of(cmd.tube),
        ops.REF,
        RefArgs(cmd.tube, 1, 0),
        functools.partial(self.reply_using, cmd.tube),
    )


def reply_using(self: ServingProcess, tube: str, conn: Conn, _payload: Sequence[Any]) -> None:
    """`use` answered by the tube's shard: USING."""
    self.reply(conn, proto.using(tube))


def reply_watching(self: ServingProcess, conn: Conn, _payload: Sequence[Any]) -> None:
    """`watch` or `ignore` answered by the tube's shard: WATCHING and the count."""
    self.reply(conn, proto.watching(len(conn.watch)))


def do_watch(self: ServingProcess, conn: Conn, cmd: c.Watch) -> None:
    if cmd.tube in conn.watch:
        self.reply(conn, proto.watching(len(conn.watch)))
        return
    conn.watch.append(cmd.tube)
    conn.away = None
    ref = RefArgs(cmd.tube, 0, 1)
    self.forward(conn, self.shard_of(cmd.tube), ops.REF, ref, self.reply_watching)


def do_ignore(self: ServingProcess, conn: Conn, cmd: c.Ignore) -> None:
    if cmd.tube not in conn.watch:
        self.reply(conn, proto.watching(len(conn.watch)))
        return
    if len(conn.watch) == 1:
        self.reply(conn, proto.NOT_IGNORED)
        return
    i = conn.watch.index(cmd.tube)
    conn.watch[i] = conn.watch[-1]  # swap-remove, as beanstalkd's watch set does
    conn.watch.pop()
    conn.away = None
    ref = RefArgs(cmd.tube, 0, -1)
    self.forward(conn, self.shard_of(cmd.tube), ops.REF, ref, self.reply_watching)


def connection_fields(self: ServingProcess) -> dict[str, Any]:
    """This process's part of `stats`: its command counters and connections. A hosted
    shard adds them to its COUNTS answer (ShardCore.host_fields), so the coordinator sums
    every serving process's part, exact as of when each answered."""
    conns = [k for k in self.conns.values() if k.phase < CLOSING]  # not the ending ones
    return {
        **self.command_stats(),
        "max-job-size": self.max_job_size,
        "current-connections": len(conns),
        "current-producers": sum(k.producer for k in conns),
        "current-workers": sum(k.worker for k in conns),
        "current-waiting": sum(k.waiting is not None for k in conns),
        "total-connections": self.total_connections,
        "draining": self.draining,
        "limit-max-connections": self.max_connections,
        "limit-connections-refused": self.connections_refused,
        "limit-connections-denied": self.connections_denied,
        "limit-max-output-bytes": self.max_output,
        "limit-output-closed": self.output_closed,
    }


def do_stats(self: ServingProcess, conn: Conn, cmd: c.Stats) -> None:
    fields: dict[str, Any] = {}  # with a hosted shard its COUNTS answer carries them
    if self.hosted is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        fields = {
            **self.connection_fields(),
            "rusage-utime": usage.ru_utime,
            "rusage-stime": usage.ru_stime,
        }
    self.forward(conn, COORDINATOR, wire.STATS, wire.Asked(fields, False))


#: command class -> the `cmd-*` stats counter it bumps (commands.py: STAT)
STAT_KEYS: dict[type, str] = {cls: cls.STAT for cls in c.COMMANDS if cls.STAT is not None}

BY_ID = (c.Delete, c.Release, c.Bury, c.Touch, c.Peek, c.KickJob, c.StatsJob)
BY_USED_TUBE = (c.PeekReady, c.PeekDelayed, c.PeekBuried, c.Kick)


def on_reserve(a: ServingProcess, conn: Conn, cmd: c.Reserve) -> None:
    a.do_reserve(conn, None)


def on_reserve_with_timeout(a: ServingProcess, conn: Conn, cmd: c.ReserveWithTimeout) -> None:
    a.do_reserve(conn, cmd.timeout)


def on_delete(a: ServingProcess, conn: Conn, cmd: c.Delete) -> None:
    a.by_id(conn, ops.DELETE, cmd.id, DeleteArgs(cmd.id, False), a.forget(cmd.id))


def on_release(a: ServingProcess, conn: Conn, cmd: c.Release) -> None:
    args = ReleaseArgs(cmd.id, cmd.pri, cmd.delay)
    a.by_id(conn, ops.RELEASE, cmd.id, args, a.forget(cmd.id))


def on_bury(a: ServingProcess, conn: Conn, cmd: c.Bury) -> None:
    a.by_id(conn, ops.BURY, cmd.id, BuryArgs(cmd.id, cmd.pri, False), a.forget(cmd.id))


def on_touch(a: ServingProcess, conn: Conn, cmd: c.Touch) -> None:
    a.by_id(conn, ops.TOUCH, cmd.id, JobArg(cmd.id), a.on_touched(cmd.id))


def on_peek(a: ServingProcess, conn: Conn, cmd: c.Peek) -> None:
    a.by_id(conn, ops.PEEK, cmd.id, JobArg(cmd.id))


def on_kick_job(a: ServingProcess, conn: Conn, cmd: c.KickJob) -> None:
    a.by_id(conn, ops.KICK_JOB, cmd.id, JobArg(cmd.id))


def on_stats_job(a: ServingProcess, conn: Conn, cmd: c.StatsJob) -> None:
    a.by_id(conn, ops.STATS_JOB, cmd.id, JobArg(cmd.id))


def on_peek_ready(a: ServingProcess, conn: Conn, cmd: c.PeekReady) -> None:
    a.forward(conn, a.shard_of(conn.use), ops.PEEK_READY, TubeArg(conn.use))


def on_peek_delayed(a: ServingProcess, conn: Conn, cmd: c.PeekDelayed) -> None:
    a.forward(conn, a.shard_of(conn.use), ops.PEEK_DELAYED, TubeArg(conn.use))


def on_peek_buried(a: ServingProcess, conn: Conn, cmd: c.PeekBuried) -> None:
    a.forward(conn, a.shard_of(conn.use), ops.PEEK_BURIED, TubeArg(conn.use))


def on_kick(a: ServingProcess, conn: Conn, cmd: c.Kick) -> None:
    a.forward(conn, a.shard_of(conn.use), ops.KICK, KickArgs(conn.use, cmd.bound))


def on_stats_tube(a: ServingProcess, conn: Conn, cmd: c.StatsTube) -> None:
    a.forward(conn, a.shard_of(cmd.tube), ops.STATS_TUBE, TubeArg(cmd.tube))


def on_pause_tube(a: ServingProcess, conn: Conn, cmd: c.PauseTube) -> None:
    args = PauseArgs(cmd.tube, cmd.delay)
    a.forward(conn, a.shard_of(cmd.tube), ops.PAUSE_TUBE, args)


def on_list_tubes(a: ServingProcess, conn: Conn, cmd: c.ListTubes) -> None:
    a.forward(conn, COORDINATOR, wire.LIST_TUBES, ())


def on_list_tube_used(a: ServingProcess, conn: Conn, cmd: c.ListTubeUsed) -> None:
    a.reply(conn, proto.using(conn.use))


def on_list_tubes_watched(a: ServingProcess, conn: Conn, cmd: c.ListTubesWatched) -> None:
    a.reply(conn, proto.yaml_list(conn.watch))


def on_quit(a: ServingProcess, conn: Conn, cmd: c.Quit) -> None:
    a.quit(conn)


#: command class -> its handler
HANDLERS: dict[type, Callable[[ServingProcess, Conn, Any], None]] = {
    c.Put: do_put,
    c.Reserve: on_reserve,
    c.ReserveWithTimeout: on_reserve_with_timeout,
    c.ReserveJob: do_reserve_job,
    c.Delete: on_delete,
    c.Release: on_release,
    c.Bury: on_bury,
    c.Touch: on_touch,
    c.Peek: on_peek,
    c.KickJob: on_kick_job,
    c.StatsJob: on_stats_job,
    c.PeekReady: on_peek_ready,
    c.PeekDelayed: on_peek_delayed,
    c.PeekBuried: on_peek_buried,
    c.Kick: on_kick,
    c.StatsTube: on_stats_tube,
    c.PauseTube: on_pause_tube,
    c.Use: do_use,
    c.Watch: do_watch,
    c.Ignore: do_ignore,
    c.Stats: do_stats,
    c.ListTubes: on_list_tubes,
    c.ListTubeUsed: on_list_tube_used,
    c.ListTubesWatched: on_list_tubes_watched,
    c.Quit: on_quit,
}
