"""The metrics process's view of the server, taken fresh for each HTTP request: `stats`
from the coordinator (its usual fan-out, the same answer a client's `stats` gets, but
counted nowhere: no connection, no ``cmd-stats``), every shard's tubes and histograms (the
METRICS op, asked of each shard directly, hosted ones included) and the server's processes
from /proc (children of the supervisor, named by role in /proc/PID/comm).

Everything is asked at once and awaited up to `ANSWER_WITHIN_S`; a peer that does not
answer in time makes the view unhealthy. A peer with a question still unanswered is not
asked again until that question is `GIVE_UP_AFTER_S` old (its late answer is taken as this
one's), so a stopped shard does not pile questions up in the coordinator. An answer that
arrived but could not be read (out of memory) is asked for again by the next view: waiting
for it would have made /health say "not answered in time" for `GIVE_UP_AFTER_S` after
memory came back.
"""

from __future__ import annotations

import logging
import os
import select
import time
from collections.abc import Sequence
from typing import Any

from shardq.cluster import wire
from shardq.cluster.wire import Request
from shardq.metrics.gathered import Gathered, Proc, parse_stats, tube_fields
from shardq.metrics.procstat import parse_rss, parse_stat
from shardq.processes.common import links
from shardq.processes.common.links import Again, Dealer
from shardq.processes.common.procname import label_of_comm
from shardq.processes.common.sockpath import link_path
from shardq.processes.shard import ops
from shardq.processes.shard.ops import Metrics
from shardq.protocol.stats_keys import SERVING_KEYS

log = logging.getLogger(__name__)

ANSWER_WITHIN_S = 2.0  #: how long a view waits for the coordinator and the shards
GIVE_UP_AFTER_S = 5.0  #: an unanswered question is forgotten (its peer restarted?) after this
COORDINATOR = -1  #: the coordinator's key among the peers (shards are 0..N-1)


class Peers:
    """Links to the coordinator and to every shard, and the questions in flight."""

    def __init__(self, run_dir: str, shards: int) -> None:
        self.socks: dict[int, Dealer] = {}
        self.poll = select.epoll()
        for key, name in [(COORDINATOR, "coordinator")] + [
            (i, f"shard-{i}") for i in range(shards)
        ]:
            # named with the server's token (peers drop strangers); a question asked while
            # its peer is away waits for it (keep)
            sock = Dealer(link_path(run_dir, name), links.name(), keep=True)
            sock.connect()
            self.poll.register(sock.fd, select.EPOLLIN)
            self.socks[key] = sock
        self.key_of = {sock.fd: key for key, sock in self.socks.items()}
        self.asked: dict[int, tuple[int, float]] = {}  # peer -> (rid, when) of its open question
        self.next_rid = 1

    def request(self, key: int, rid: int) -> Request:
        if key == COORDINATOR:
            # {}: no serving process's fields of our own; True: every limit-* key (the
            # metrics show them whether or not a limit is set)
            return Request(wire.STATS, rid, 0, wire.Asked({}, True))
        return Request(ops.METRICS, rid, 0, ())

    def ask_all(self, within_s: float = ANSWER_WITHIN_S) -> dict[int, Sequence[Any]]:
        """Ask every peer (but those with a recent open question); wait up to `within_s`
        for every answer. Returns peer -> its reply payload, for those that answered."""
        now = time.monotonic()
        for key, sock in self.socks.items():
            open_question = self.asked.get(key)
            if open_question is not None and now - open_question[1] < GIVE_UP_AFTER_S:
                continue
            rid, self.next_rid = self.next_rid, self.next_rid + 1
            try:
                sock.send(wire.pack([self.request(key, rid)]))
            except Again:
                continue  # its queue is full: it has not read for a while
            self.asked[key] = (rid, now)
        answers: dict[int, Sequence[Any]] = {}
        deadline = now + within_s
        while len(answers) < len(self.socks):
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                break
            due = links.retry_due(self.socks.values(), now)  # peers away: reached when due
            wait = left if due is None else min(left, max(0.0, due - now))
            for fd, _ in self.poll.poll(wait):
                self.take(self.socks[self.key_of[fd]], answers)
        return answers

    def take(self, sock: Dealer, answers: dict[int, Sequence[Any]]) -> None:
        """Every answer waiting on `sock`. Out of memory, an answer read but not kept is
        lost: its question is forgotten (the next view asks again; a late answer to it
        has a stale rid and is dropped), and the MemoryError goes on up."""
        key = self.key_of[sock.fd]
        try:
            self.read_answers(key, sock, answers)
        except MemoryError:
            self.asked.pop(key, None)
            raise

    def read_answers(self, key: int, sock: Dealer, answers: dict[int, Sequence[Any]]) -> None:
        # ups and downs need nothing: a question lost is asked again later
        while (data := sock.next_message()) is not None:
            try:
                batch = wire.unpack(data)
            except ValueError:
                log.warning("metrics: dropped a malformed answer")
                sock.taken()
                continue
            except MemoryError:  # dropped, not kept: its question is asked again (take), and
                sock.taken()  # answers to the next ones would pile up behind it
                raise
            sock.taken()
            for rid, payload in batch:
                asked = self.asked.get(key)
                if asked is not None and rid == asked[0]:
                    del self.asked[key]
                    answers[key] = payload

    def close(self) -> None:
        for sock in self.socks.values():
            sock.close()
        self.poll.close()


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def child_pids(supervisor: int) -> list[int]:
    """The supervisor's children: its task's ``children`` file (one read) where the kernel
    has it (CONFIG_PROC_CHILDREN; the supervisor has one thread), else a scan of /proc."""
    text = read_text(f"/proc/{supervisor}/task/{supervisor}/children")
    if text is not None:
        return [int(pid) for pid in text.split()]
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = parse_stat(read_text(f"/proc/{entry}/stat") or "")
            if stat is not None and stat.ppid == supervisor:
                found.append(int(entry))
    return found


def server_processes(supervisor: int) -> list[Proc]:
    """The supervisor and its children that are shardq processes (/proc/PID/comm "sq ...")."""
    found = []
    for pid in [supervisor, *child_pids(supervisor)]:
        stat = parse_stat(read_text(f"/proc/{pid}/stat") or "")
        if stat is None:
            continue  # gone meanwhile
        role: str | None = "supervisor"
        if pid != supervisor:
            role = label_of_comm((read_text(f"/proc/{pid}/comm") or "").rstrip("\n"))
        if role is None:
            continue
        rss = parse_rss(read_text(f"/proc/{pid}/status") or "")
        found.append(Proc(role, pid, stat.state, stat.cpu_seconds, rss))
    return found


class Gatherer:
    """Takes a `Gathered` view on demand."""

    def __init__(
        self,
        run_dir: str,
        shards: int,
        expected: tuple[str, ...],
        serving_stats: bool = True,
        serving: int = 1,
    ) -> None:
        self.peers = Peers(run_dir, shards)
        self.shards = shards
        self.serving = serving
        self.expected = expected
        self.supervisor = os.getppid()
        #: False: the serving processes' part of `stats` never reaches the coordinator's
        #: answer to us (no hosted shard brings it); those keys are dropped, not shown as 0
        self.serving_stats = serving_stats

    def stats(self, answer: Sequence[Any] | None) -> dict[str, Any] | None:
        """The coordinator's `stats` reply (`wire.Answer`), as values."""
        if answer is None:
            return None
        values = parse_stats(wire.Answer._make(answer).value)
        if not self.serving_stats:
            for key in SERVING_KEYS:
                values.pop(key, None)
        return values

    def gather(self) -> Gathered:
        answers = self.peers.ask_all()
        stats = answers.pop(COORDINATOR, None)
        tubes: dict[str, dict[str, Any]] = {}
        homes: dict[str, list[int]] = {}
        timing: dict[int, dict[str, Any]] = {}
        for shard, payload in sorted(answers.items()):
            rows, snapshot = Metrics._make(payload)
            fields = tube_fields(rows)
            tubes.update(fields)
            for name in fields:
                homes.setdefault(name, []).append(shard)
            if snapshot is not None:
                timing[shard] = snapshot
        return Gathered(
            stats=self.stats(stats),
            tubes=tubes,
            timing=timing,
            answered=set(answers),
            shards=self.shards,
            processes=server_processes(self.supervisor),
            expected=self.expected,
            homes=homes,
            serving=self.serving,
        )
