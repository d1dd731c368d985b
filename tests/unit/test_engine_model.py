"""Engine unit tests: a randomized model drives an engine and checks every invariant.

Harness and expectations: engine_helpers.py; the `q` fixture: conftest.py.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from engine_helpers import Q, unkey

from shardq.engine.engine import FINAL, OFFER, RESERVED, SAFETY_MARGIN, WAITING
from shardq.engine.job import NS, URGENT_PRI, State
from shardq.engine.tube import Tube
from shardq.protocol import proto

TUBES = ("default", "a", "b", "c")


@dataclass
class MConn:
    cid: int
    use: str
    watch: list[str]
    rid: int | None = None  # a waiting reserve
    rid_offer: bool = False
    rid_expire: tuple[int, bytes] | None = None  # when and how the waiting reserve ends
    offers: set[int] = field(default_factory=set)


class Model:
    """Drives an engine with random commands and checks the invariants after every step."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.q = Q()
        self.conns: dict[int, MConn] = {}
        self.next_cid = 1
        self.live: set[int] = set()  # ids put and not deleted
        self.holder: dict[int, int] = {}  # job -> conn it is reserved by
        self.timeouts: dict[int, int] = {}  # job -> timeouts seen so far
        self.by_rid: dict[int, int] = {}  # waiting rid -> conn
        self.total: dict[int, tuple[Tube, int]] = {}  # id(tube) -> (tube, puts into it)
        self.log: list[str] = []
        self.q.e.audit = []  # the event log's rows (as if --events were given)
        self.last_event: dict[int, str] = {}  # job -> its last event but touch
        for _ in range(4):
            self.connect()

    # ---- connections
    def connect(self) -> None:
        cid = self.next_cid
        self.next_cid += 1
        use = self.rng.choice(TUBES)
        watch = self.rng.sample(TUBES, self.rng.randint(1, 3))
        self.conns[cid] = MConn(cid, use, watch)
        self.q.e.ref(use, 1, 0, self.q.now)
        for t in watch:
            self.q.e.ref(t, 0, 1, self.q.now)

    def disconnect(self, c: MConn) -> None:
        self.q.e.disconnect(c.cid, self.q.now)
        if c.rid is not None:
            del self.by_rid[c.rid]
        for job, conn in list(self.holder.items()):
            if conn == c.cid:
                del self.holder[job]
        self.q.e.ref(c.use, -1, 0, self.q.now)
        for t in c.watch:
            self.q.e.ref(t, 0, -1, self.q.now)
        del self.conns[c.cid]
        self.connect()

    # ---- helpers
    def take(self, job: int, conn: int) -> None:
        assert job not in self.holder, f"job {job} handed to {conn} while held by {self.holder}"
        self.holder[job] = conn

    def soon_at(self, c: MConn) -> int | None:
        deadlines = [self.q.e.jobs[j].deadline for j, conn in self.holder.items() if conn == c.cid]
        return min(deadlines) - SAFETY_MARGIN if deadlines else None

    def best_ready(self, tubes: list[str]) -> int | None:
        heads = []
        for name in tubes:
            tube = self.q.e.tubes.get(name)
            if tube is not None and tube.ready and not tube.paused(self.q.now):
                heads.append(tube.ready[0])
        return unkey(min(heads))[2] if heads else None

    def held_by(self, c: MConn) -> list[int]:
        return sorted(j for j, conn in self.holder.items() if conn == c.cid)

    # ---- one step
    def step(self) -> None:
        rng, q = self.rng, self.q
        idle = [c for c in self.conns.values() if c.rid is None and not c.offers]
        ops = ["advance", "put", "put", "reserve", "reserve", "delete", "kick", "kick_job"]
        ops += ["pause", "watch", "disconnect", "reserve_job", "cancel", "resolve"]
        ops += ["release", "release", "bury", "touch", "use"]
        op = rng.choice(ops)
        self.log.append(op)
        before = set(q.e.waiters)
        if op == "advance":
            wake = q.e.next_wakeup()
            choice = rng.random()
            if wake is not None and choice < 0.3:
                q.to(max(q.now, wake))
            elif wake is not None and choice < 0.4:
                q.to(max(q.now, wake - 1))
            else:
                q.advance(rng.choice([0, 1, NS // 3, NS, 2 * NS + 7]))
            self.reconcile_timeouts()
        elif op == "put" and self.conns:
            c = rng.choice(list(self.conns.values()))
            job = q.put(
                c.use,
                pri=rng.choice([0, 1, 1023, 1024, 5000]),
                delay=rng.choice([0, 0, 0, 1, 2]),
                ttr=rng.choice([1, 2, 5]),
            )
            self.live.add(job)
            self.timeouts[job] = 0
            tube = q.e.tubes[c.use]
            self.total[id(tube)] = (tube, self.total.get(id(tube), (tube, 0))[1] + 1)
        elif op == "reserve" and idle:
            c = rng.choice(idle)
            offer = rng.random() < 0.3
            timeout = rng.choice([None, 0, 1, 3])
            soon_at = self.soon_at(c)
            best = self.best_ready(c.watch)
            if offer:  # a cross-shard reserve: the serving process keeps the deadlines
                timeout, soon_at = None, None
            rid = q.rid()
            payload = q.reserve(c.cid, tuple(c.watch), timeout, soon_at, offer, rid=rid)
            if best is not None:  # invariant 4: the best ready job, and it beats DEADLINE_SOON
                assert payload is not None and payload[0] in (RESERVED, OFFER), payload
                assert payload[2] == best
            if payload is None or payload[0] == WAITING:
                assert best is None
                c.rid, c.rid_offer = rid, offer
                self.by_rid[rid] = c.cid
                timeout_at = None if timeout is None else q.now + timeout * NS
                c.rid_expire = None
                if (
                    not offer
                    and soon_at is not None
                    and (timeout_at is None or soon_at <= timeout_at)
                ):
                    c.rid_expire = (soon_at, proto.DEADLINE_SOON)
                elif not offer and timeout_at is not None:
                    c.rid_expire = (timeout_at, proto.TIMED_OUT)
            elif payload[0] == RESERVED:
                assert not offer
                self.take(payload[2], c.cid)
            elif payload[0] == OFFER:
                assert offer
                c.offers.add(payload[2])
            else:
                assert payload[0] == FINAL
                if soon_at is not None and q.now >= soon_at:
                    assert payload[1] == proto.DEADLINE_SOON
                else:
                    assert payload[1] == proto.TIMED_OUT and timeout == 0
        elif op == "reserve_job" and idle and self.live:
            c = rng.choice(idle)
            job = rng.choice(sorted(self.live))
            state = q.e.jobs[job].state
            payload = q.e.reserve_job(c.cid, job, q.now)
            if state in (State.READY, State.DELAYED, State.BURIED):
                assert payload[0] == RESERVED
                self.take(job, c.cid)
            else:
                assert payload == [FINAL, proto.NOT_FOUND]
        elif op == "delete" and idle and self.live:
            c = rng.choice(idle)
            job = rng.choice(sorted(self.live))
            expect = self.holder.get(job, c.cid) == c.cid and q.e.jobs[job].state != State.OFFERED
            reply = q.e.delete(c.cid, job, q.now)
            assert reply == (proto.DELETED if expect else proto.NOT_FOUND)
            if reply == proto.DELETED:
                self.live.discard(job)
                self.holder.pop(job, None)
        elif op in ("release", "bury", "touch") and idle:
            c = rng.choice(idle)
            mine = self.held_by(c)
            others = sorted(self.live - set(mine))
            if not mine and not others:
                return
            job = rng.choice(mine) if mine and rng.random() < 0.85 else rng.choice(others or mine)
            pri = rng.choice([0, 1024, 7])
            if op == "release":
                reply = q.e.release(c.cid, job, pri, rng.choice([0, 0, 1]), q.now)
                ok = proto.RELEASED
            elif op == "bury":
                reply = q.e.bury(c.cid, job, pri, q.now)
                ok = proto.BURIED
            else:
                reply = q.e.touch(c.cid, job, q.now)[0]
                ok = proto.TOUCHED
            assert reply == (ok if job in mine else proto.NOT_FOUND)
            if job in mine and op != "touch":
                del self.holder[job]
        elif op == "kick" and self.conns:
            c = rng.choice(list(self.conns.values()))
            tube = q.e.tubes.get(c.use)
            buried, delayed = len(tube.buried), len(tube.delayed)
            bound = rng.choice([0, 1, 2, 100])
            expect = min(bound, buried if buried else delayed)
            assert q.e.kick(c.use, bound, q.now) == expect
        elif op == "kick_job" and self.live:
            job = rng.choice(sorted(self.live))
            kickable = q.e.jobs[job].state in (State.BURIED, State.DELAYED)
            assert q.e.kick_job(job, q.now) == (proto.KICKED if kickable else proto.NOT_FOUND)
        elif op == "pause":
            name = rng.choice(TUBES)
            exists = name in q.e.tubes
            reply = q.e.pause_tube(name, rng.choice([0, 1, 2]), q.now)
            assert reply == (proto.PAUSED if exists else proto.NOT_FOUND)
        elif op == "watch" and idle:
            c = rng.choice(idle)
            name = rng.choice(TUBES)
            if name in c.watch and len(c.watch) > 1:
                c.watch.remove(name)
                q.e.ref(name, 0, -1, q.now)
            elif name not in c.watch:
                c.watch.append(name)
                q.e.ref(name, 0, 1, q.now)
        elif op == "use" and idle:
            c = rng.choice(idle)
            old, c.use = c.use, rng.choice(TUBES)
            q.e.ref(c.use, 1, 0, q.now)
            q.e.ref(old, -1, 0, q.now)
        elif op == "disconnect" and self.conns:
            self.disconnect(rng.choice(list(self.conns.values())))
        elif op == "cancel":
            waiting = [c for c in self.conns.values() if c.rid is not None]
            if waiting:
                c = rng.choice(waiting)
                q.e.cancel(c.rid)
                del self.by_rid[c.rid]
                c.rid = None
        elif op == "resolve":
            offered = [c for c in self.conns.values() if c.offers]
            if offered:
                c = rng.choice(offered)
                job = c.offers.pop()
                if rng.random() < 0.6:
                    q.e.accept(c.cid, job, q.now)
                    self.take(job, c.cid)
                else:
                    q.e.decline(c.cid, job, q.now)
        self.handle_events(before)
        self.check()

    def reconcile_timeouts(self) -> None:
        """Jobs whose TTR ran out in this tick are no longer held (before any re-serving)."""
        for job in list(self.holder):
            now_timeouts = self.q.e.jobs[job].timeouts
            if now_timeouts > self.timeouts[job]:
                assert now_timeouts == self.timeouts[job] + 1
                self.timeouts[job] = now_timeouts
                del self.holder[job]
        for job in self.live:
            self.timeouts[job] = self.q.e.jobs[job].timeouts

    def handle_events(self, waiters_before: set[int]) -> None:
        q = self.q
        served_from: list[tuple[int, str]] = []
        for rid, payload in q.events():
            assert rid in self.by_rid, f"event for a reserve that is not waiting: {rid} {payload}"
            assert rid in waiters_before
            c = self.conns[self.by_rid.pop(rid)]
            assert c.rid == rid
            c.rid = None
            kind = payload[0]
            if kind == RESERVED:
                assert not c.rid_offer
                self.take(payload[2], c.cid)
                served_from.append((rid, q.e.jobs[payload[2]].tube))
            elif kind == OFFER:
                assert c.rid_offer
                c.offers.add(payload[2])
                served_from.append((rid, q.e.jobs[payload[2]].tube))
            else:
                assert kind == FINAL and c.rid_expire is not None
                when, reply = c.rid_expire
                assert payload[1] == reply
                assert when <= q.now
        # invariant 5: nobody older still waits on a tube a younger waiter was served from
        for rid, tube in served_from:
            for w in q.e.waiters.values():
                assert not (tube in w.tubes and w.rid < rid), f"{w.rid} skipped for {rid}"

    # ---- invariants
    def check(self) -> None:
        e, now = self.q.e, self.q.now
        assert set(e.jobs) == self.live  # nothing lost, nothing invented
        places: list[int] = []
        for name, tube in e.tubes.items():
            assert tube.name == name
            ready_ids = [unkey(k)[2] for k in tube.ready]
            for key in tube.ready:
                job = e.jobs[unkey(key)[2]]
                assert (job.state, job.tube, unkey(key)) == (
                    State.READY,
                    name,
                    (job.pri, job.seq, job.id),
                )
            for key in tube.delayed:
                job = e.jobs[unkey(key)[2]]
                assert (job.state, job.tube, unkey(key)) == (
                    State.DELAYED,
                    name,
                    (job.deadline, job.seq, job.id),
                )
                assert job.deadline > now, "a due delayed job was not promoted"
            for job_id in tube.buried:
                assert (e.jobs[job_id].state, e.jobs[job_id].tube) == (State.BURIED, name)
            places += ready_ids + [unkey(k)[2] for k in tube.delayed] + list(tube.buried)
            mine = [j for j in e.jobs.values() if j.tube == name]
            reserved = sum(j.state == State.RESERVED for j in mine)
            offered = sum(j.state == State.OFFERED for j in mine)
            urgent = sum(unkey(k)[0] < URGENT_PRI for k in tube.ready)
            urgent += sum(j.state == State.OFFERED and j.pri < URGENT_PRI for j in mine)
            assert (tube.reserved, tube.offered, tube.urgent) == (reserved, offered, urgent)
            assert tube.in_use(), f"tube {name} should have been collected"
            stats = self.q.stats_tube(name)
            assert int(stats["current-jobs-ready"]) == len(ready_ids) + offered
            assert int(stats["current-jobs-reserved"]) == reserved
            assert int(stats["current-jobs-delayed"]) == len(tube.delayed)
            assert int(stats["current-jobs-buried"]) == len(tube.buried)
            assert int(stats["current-jobs-urgent"]) == urgent
            assert int(stats["current-waiting"]) == len(tube.waiters)
            assert int(stats["total-jobs"]) == self.total.get(id(tube), (tube, 0))[1]
            using = sum(c.use == name for c in self.conns.values())
            watching = sum(name in c.watch for c in self.conns.values())
            assert (tube.using, tube.watching) == (using, watching)
            # invariant 3: a waiter never sits next to a ready job it could take
            if tube.waiters:
                assert not (tube.ready and not tube.paused(now)), (
                    f"{name} has ready jobs and waiters"
                )
            if tube.pause:
                assert tube.unpause_at > now, "a pause that ended was not noticed"
        for c in self.conns.values():
            for name in [c.use, *c.watch]:
                assert name in e.tubes
        held = [j for ids in e.owned.as_dict().values() for j in ids]
        assert len(places) + len(held) == len(e.jobs)
        assert set(places) | set(held) == set(e.jobs), "a job is in no place or in two"
        for conn, ids in e.owned.as_dict().items():
            assert ids
            for job_id in ids:
                job = e.jobs[job_id]
                assert job.owner == conn and job.state in (State.RESERVED, State.OFFERED)
        # invariant 1: reserved by exactly the connection the model handed it to
        reserved_now = {j.id: j.owner for j in e.jobs.values() if j.state == State.RESERVED}
        assert reserved_now == self.holder
        for job_id in reserved_now:
            assert e.jobs[job_id].deadline >= now, "a TTR timer was lost"
        offered_now = {j.id: j.owner for j in e.jobs.values() if j.state == State.OFFERED}
        assert offered_now == {j: c.cid for c in self.conns.values() for j in c.offers}
        # waiters
        assert set(e.waiters) == set(self.by_rid)
        for rid, w in e.waiters.items():
            assert w.conn == self.by_rid[rid]
            for name in w.tubes:
                assert e.tubes[name].waiters.get(rid) is w
            if w.expire_at is not None:
                assert w.expire_at > now, "a reserve timeout was lost"
        assert e.counts()["current-jobs-reserved"] == len(self.holder)
        self.check_events()

    def check_events(self) -> None:
        """Invariant 6: every state change reaches the event log. A job's last event says
        where it is: reserved after a reserve, buried after a bury, gone after a delete,
        ready or delayed (or offered: ready for stats) after a put, release, kick or
        timeout (a job a closed connection held: a release)."""
        e = self.q.e
        assert e.audit is not None
        for row in e.audit:
            if row[1] != "touch":
                self.last_event[row[2]] = row[1]
        e.audit.clear()
        for job_id, event in self.last_event.items():
            job = e.jobs.get(job_id)
            if job is None:
                assert event == "delete", (job_id, event)
            elif job.state == State.RESERVED:
                assert event == "reserve", (job_id, event)
            elif job.state == State.BURIED:
                assert event == "bury", (job_id, event)
            else:
                assert event in ("put", "release", "kick", "timeout"), (job_id, event, job.state)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_operations_keep_every_invariant(seed: int) -> None:
    model = Model(seed)
    for i in range(3000):
        try:
            model.step()
        except AssertionError as err:
            raise AssertionError(f"seed {seed}, step {i}, ops {model.log[-8:]}: {err}") from err
