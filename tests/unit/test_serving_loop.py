"""The serving process's rooms without processes or sockets to peers.

An in-process Serving process is built on a listening socket (no peer is started: nothing here
needs one); client connections are socket pairs. Requests the serving process would send are read
from its per-target queues (`outq`) and the peers' answers are fed to `on_replies`, so id
leasing, cross-shard reserve settling and the per-command guard are tested as plain calls.
"""

from __future__ import annotations

import logging
import selectors
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from shardq.cluster import wire
from shardq.cluster.routing import tube_shard
from shardq.cluster.wire import Answer, Reply, Request
from shardq.config import load_config
from shardq.engine.engine import CANCELLED, OFFER, WAITING
from shardq.engine.reserve import Offer
from shardq.processes.serving import handlers
from shardq.processes.serving.conn import BUSY, CLOSED, COORDINATOR, Conn
from shardq.processes.serving.loop import ServingProcess
from shardq.processes.shard import ops
from shardq.processes.shard.core import ShardCore
from shardq.processes.supervision.children import serving_settings
from shardq.protocol import commands as c
from shardq.protocol import proto
from shardq.protocol.stats_keys import CMD_KEYS


def make_serving(tmp_path: Path, shards: int, hosted: ShardCore | None = None) -> ServingProcess:
    """A serving process of `shards` (hosting `hosted`, if given) with no peer started."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    config = load_config("", {"shards": shards, "serving": 1})
    settings = serving_settings(config, str(tmp_path), 0, (listener.detach(), -1, -1))
    return ServingProcess(settings, hosted)


def shut(a: ServingProcess) -> None:
    a.close_links()
    a.listener.close()


@pytest.fixture
def serving_proc(tmp_path: Path) -> Iterator[ServingProcess]:
    a = make_serving(tmp_path, 1)
    yield a
    shut(a)


@pytest.fixture
def two_shards(tmp_path: Path) -> Iterator[ServingProcess]:
    a = make_serving(tmp_path, 2)
    yield a
    shut(a)


def sent(a: ServingProcess, target: int) -> list[Request]:
    """What the serving process queued for a target, taken out of the queue."""
    batch = a.outq.get(target, [])
    a.outq[target] = []
    return batch


def job_of(r: Request) -> int:
    """The job a request names (ACCEPT, DECLINE...: its first argument)."""
    return int(r.args[0])


def tube_on(shard: int, shards: int = 2) -> str:
    n = 0
    while tube_shard(f"t{n}", shards) != shard:
        n += 1
    return f"t{n}"


def offer(rid: int, job_id: int, pri: int, seq: int, conn_id: int) -> Reply:
    reply = proto.job_reply(b"RESERVED", job_id, b"job%d" % job_id)
    return Reply(rid, Offer(OFFER, reply, job_id, 60 * 10**9, pri, seq, conn_id))


def conn(a: ServingProcess, conn_id: int) -> Conn:
    mine, _theirs = socket.socketpair()
    k = Conn(conn_id, mine, 65535)
    a.conns[conn_id] = k
    return k


def broken(a: ServingProcess, k: Conn, cmd: object) -> None:
    raise RuntimeError("a bug in a handler")


def test_a_failing_handler_answers_internal_error_and_the_server_goes_on(
    serving_proc: ServingProcess, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(handlers.HANDLERS, c.ListTubesWatched, broken)
    first, second = conn(serving_proc, 1), conn(serving_proc, 2)
    with caplog.at_level(logging.ERROR):
        serving_proc.dispatch(first, c.ListTubesWatched())
    assert bytes(first.out) == proto.INTERNAL_ERROR
    assert "a bug in a handler" in caplog.text and "Traceback" in caplog.text
    serving_proc.dispatch(first, c.ListTubeUsed())
    serving_proc.dispatch(second, c.ListTubeUsed())
    assert bytes(first.out) == proto.INTERNAL_ERROR + proto.using("default")
    assert bytes(second.out) == proto.using("default")


# --------------------------------------------------------------------------- id leasing


def test_the_first_put_waits_for_a_lease_then_gets_id_1(serving_proc: ServingProcess) -> None:
    k = conn(serving_proc, 1)
    assert serving_proc.ids.take(0) is None  # no block yet: one is asked for
    (lease,) = sent(serving_proc, COORDINATOR)
    assert lease.op == wire.LEASE and lease.args == wire.Lease(0)
    serving_proc.on_replies([Reply(lease.rid, Answer(0))])  # block 0 leased: ids 1..1024
    assert serving_proc.ids.take(0) == 1
    assert serving_proc.ids.job_shard(1) == 0  # leased here
    assert serving_proc.ids.job_shard(1025) == 0  # not leased here: by the rule (block 1 % 1 shard)
    serving_proc.dispatch(k, c.Put(pri=0, delay=0, ttr=60, body=b"x"))
    (put,) = sent(serving_proc, 0)
    assert put.op == ops.PUT and ops.PutArgs._make(put.args).job_id == 2  # the next id


def test_a_put_without_an_id_resumes_when_the_lease_arrives(serving_proc: ServingProcess) -> None:
    k = conn(serving_proc, 1)
    serving_proc.dispatch(k, c.Put(pri=0, delay=0, ttr=60, body=b"x"))
    assert k.phase is BUSY and not serving_proc.outq.get(0)  # waiting for an id
    leases = sent(serving_proc, COORDINATOR)
    serving_proc.on_replies([Reply(leases[0].rid, Answer(0))])
    (put,) = sent(serving_proc, 0)
    assert put.op == ops.PUT and ops.PutArgs._make(put.args).job_id == 1


def test_blocks_are_leased_ahead_up_to_the_spare_bound(serving_proc: ServingProcess) -> None:
    serving_proc.ids.take(0)
    (first,) = sent(serving_proc, COORDINATOR)
    serving_proc.on_replies([Reply(first.rid, Answer(0))])
    for _ in range(600):  # past half of block 0: the next blocks are asked for
        serving_proc.ids.take(0)
    asked = sent(serving_proc, COORDINATOR)
    assert 1 <= len(asked) <= 4 and all(r.op == wire.LEASE for r in asked)


# --------------------------------------------------------------------------- cross-shard reserve


def watching_both(a: ServingProcess) -> Conn:
    k = conn(a, 7)
    k.watch = [tube_on(0), tube_on(1)]
    return k


def test_the_best_offer_is_accepted_and_the_other_declined(two_shards: ServingProcess) -> None:
    a = two_shards
    k = watching_both(a)
    a.do_reserve(k, None)
    (r0,), (r1,) = sent(a, 0), sent(a, 1)
    assert r0.op == r1.op == ops.RESERVE
    assert ops.ReserveArgs._make(r0.args).offer is True  # offer mode
    a.on_replies([offer(r0.rid, 3, 5, 10, k.id)])
    assert not k.out  # the other shard has not answered yet
    a.on_replies([offer(r1.rid, 1030, 1, 20, k.id)])  # lower priority value: more urgent
    assert bytes(k.out) == proto.job_reply(b"RESERVED", 1030, b"job1030")
    assert [r.op for r in sent(a, 1)] == [ops.ACCEPT]
    assert [(r.op, job_of(r)) for r in sent(a, 0)] == [(ops.DECLINE, 3)]
    assert 1030 in k.reserved and k.waiting is None


def test_equal_priority_goes_to_the_older_put(two_shards: ServingProcess) -> None:
    a = two_shards
    k = watching_both(a)
    a.do_reserve(k, None)
    (r0,), (r1,) = sent(a, 0), sent(a, 1)
    a.on_replies([offer(r0.rid, 3, 5, 99, k.id), offer(r1.rid, 1030, 5, 20, k.id)])
    assert bytes(k.out).startswith(b"RESERVED 1030 ")


def test_a_waiting_shard_is_cancelled_and_its_late_offer_declined(
    two_shards: ServingProcess,
) -> None:
    a = two_shards
    k = watching_both(a)
    a.do_reserve(k, None)
    (r0,), (r1,) = sent(a, 0), sent(a, 1)
    a.on_replies([Reply(r0.rid, [WAITING]), offer(r1.rid, 1030, 5, 20, k.id)])
    assert [r.op for r in sent(a, 0)] == [ops.CANCEL]
    assert bytes(k.out) == b""  # shard 0 still counts the waiter: the reply waits for it
    # shard 0 had served its waiter in the same turn: OFFER first, then CANCELLED
    a.on_replies([offer(r0.rid, 3, 0, 1, k.id), Reply(r0.rid, [CANCELLED])])
    assert [(r.op, job_of(r)) for r in sent(a, 0)] == [(ops.DECLINE, 3)]
    assert bytes(k.out).startswith(b"RESERVED 1030 ")
    assert not a.cross  # nothing of the reserve is left


def test_eof_with_an_unsettled_offer_declines_it(two_shards: ServingProcess) -> None:
    a = two_shards
    k = watching_both(a)
    a.do_reserve(k, None)
    (r0,), _ = sent(a, 0), sent(a, 1)
    a.on_replies([offer(r0.rid, 3, 5, 10, k.id)])  # shard 1 has not answered yet
    a.finish_cross(k.waiting, proto.TIMED_OUT)  # type: ignore[arg-type]
    assert [(r.op, job_of(r)) for r in sent(a, 0)] == [(ops.DECLINE, 3)]
    (c1,) = sent(a, 1)
    assert c1.op == ops.CANCEL
    assert bytes(k.out) == b""  # until shard 1 says its waiter is gone
    a.on_replies([Reply(c1.rid, [CANCELLED])])
    assert bytes(k.out) == proto.TIMED_OUT
    assert not a.cross


def test_an_offer_nobody_tracks_is_declined(two_shards: ServingProcess) -> None:
    a = two_shards
    a.ids.load([(1, 1)])  # ids 1025..2048 live on shard 1
    a.on_replies([offer(999, 1030, 5, 20, 42)])
    assert [(r.op, r.conn, job_of(r)) for r in sent(a, 1)] == [(ops.DECLINE, 42, 1030)]


def test_every_command_counter_is_a_stats_key() -> None:
    assert set(handlers.STAT_KEYS.values()) == set(CMD_KEYS)


# --------------------------------------------------------------------------- short polling


def test_a_poll_that_catches_nothing_backs_off_and_a_catch_resets_it(
    serving_proc: ServingProcess,
) -> None:
    serving_proc.sel = selectors.DefaultSelector()  # only the sockets of this test
    serving_proc.spin_s = 1e-4
    skipped = []
    for _ in range(4):  # nothing ever arrives: windows of 1, 2, 4 turns are sat out
        assert serving_proc.poll_briefly() == []
        skipped.append(serving_proc.spin_skip)
        while serving_proc.spin_skip:
            assert serving_proc.poll_briefly() == []  # sat out: no polling at all
    assert skipped == [1, 2, 4, 8]
    mine, theirs = socket.socketpair()
    k = Conn(1, mine, 65535)
    serving_proc.sel.register(mine, selectors.EVENT_READ, k)
    theirs.sendall(b"stats\r\n")
    assert serving_proc.poll_briefly()  # caught: the back-off starts again from 1
    assert serving_proc.spin_backoff == 1 and serving_proc.spin_skip == 0
    serving_proc.sel.unregister(mine)
    mine.close()
    theirs.close()


def test_poll_us_0_never_polls(serving_proc: ServingProcess) -> None:
    serving_proc.sel = selectors.DefaultSelector()  # only the sockets of this test
    serving_proc.spin_s = 0
    serving_proc.worked = True
    mine, theirs = socket.socketpair()
    serving_proc.sel.register(mine, selectors.EVENT_READ, Conn(1, mine, 65535))
    calls = []

    def polled() -> list:
        calls.append(1)
        return []

    serving_proc.poll_briefly = polled  # type: ignore[method-assign]
    theirs.sendall(b"x")
    serving_proc.turn()
    assert calls == []
    serving_proc.sel.unregister(mine)
    mine.close()
    theirs.close()


class Selects:
    """The serving process's selector, with the timeout of every select recorded."""

    def __init__(self, a: ServingProcess) -> None:
        self.sel = a.sel = selectors.DefaultSelector()  # only the sockets of this test
        self.timeouts: list[float | None] = []
        self.pair = socket.socketpair()
        self.sel.register(self.pair[0], selectors.EVENT_READ, Conn(1, self.pair[0], 65535))
        a.sel = self  # type: ignore[assignment]

    def select(self, timeout: float | None = None) -> list:
        self.timeouts.append(timeout)
        return self.sel.select(timeout)

    def close(self) -> None:
        self.sel.unregister(self.pair[0])
        for sock in self.pair:
            sock.close()


def busy(a: ServingProcess) -> Selects:
    """After a turn that did work, one client, no link left unread or to reconnect: the
    loop may poll."""
    a.worked, a.spin_s, a.touched, a.retrying = True, 1e-4, set(), set()
    return Selects(a)


def test_after_a_busy_turn_a_command_already_there_is_taken_without_working_out_a_sleep(
    serving_proc: ServingProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    selects = busy(serving_proc)
    monkeypatch.setattr(serving_proc, "sleep_s", pytest.fail)  # not needed: no sleep
    selects.pair[1].sendall(b"stats\r\n")
    assert serving_proc.wait()
    assert selects.timeouts == [0]
    assert serving_proc.spin_backoff == 1
    selects.close()


def test_with_a_tls_handshake_under_way_every_turn_works_out_the_sleep(
    serving_proc: ServingProcess,
) -> None:
    """expire_handshakes runs there: a busy client must not keep a stalled one alive."""
    selects = busy(serving_proc)
    mine, theirs = socket.socketpair()
    stalled = Conn(2, mine, 65535)
    serving_proc.handshakes[stalled] = 0.0  # its deadline is long past
    selects.pair[1].sendall(b"stats\r\n")
    assert serving_proc.wait()
    assert stalled not in serving_proc.handshakes and stalled.phase is CLOSED
    theirs.close()
    selects.close()


def due_now() -> float:
    """The sleep when a timer is due (or commands are left over): none."""
    return 0.0


def test_with_something_due_now_the_loop_polls_once_and_does_not_spin(
    serving_proc: ServingProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    selects = busy(serving_proc)
    monkeypatch.setattr(serving_proc, "poll_briefly", pytest.fail)
    monkeypatch.setattr(serving_proc, "sleep_s", due_now)
    assert serving_proc.wait() == []
    assert selects.timeouts == [0]
    selects.close()


def test_while_it_sits_out_after_misses_the_loop_sleeps_with_one_select(
    serving_proc: ServingProcess,
) -> None:
    selects = busy(serving_proc)
    serving_proc.spin_skip = 2
    selects.pair[1].sendall(b"stats\r\n")
    assert serving_proc.wait()
    assert len(selects.timeouts) == 1 and selects.timeouts[0]  # no poll before the sleep
    assert serving_proc.spin_skip == 1
    selects.close()


def test_a_window_that_catches_nothing_polls_then_sleeps(serving_proc: ServingProcess) -> None:
    selects = busy(serving_proc)
    serving_proc.retry_soon = True  # sleeps RETRY_S (2 ms), not a whole second
    assert serving_proc.wait() == []  # nothing arrives: the window, then the sleep
    assert selects.timeouts[:2] == [0, 0] and selects.timeouts[-1]
    assert serving_proc.spin_skip == 1
    selects.close()


def test_a_lease_that_arrives_after_its_put_s_connection_closed_resumes_the_others(
    serving_proc: ServingProcess,
) -> None:
    """Found by the randomized checker: a put waiting for an id on a connection that closed
    raised when the lease came, and the puts of other connections waiting for the same lease
    were never resumed."""
    gone, alive = conn(serving_proc, 1), conn(serving_proc, 2)
    serving_proc.dispatch(gone, c.Put(pri=0, delay=0, ttr=60, body=b"x"))
    serving_proc.dispatch(alive, c.Put(pri=0, delay=0, ttr=60, body=b"y"))
    assert gone.phase is BUSY and alive.phase is BUSY  # both wait for the first block
    serving_proc.close(gone)
    lease = [r for r in sent(serving_proc, COORDINATOR) if r.op == wire.LEASE][0]
    serving_proc.on_replies([Reply(lease.rid, Answer(0))])
    puts = [r for r in sent(serving_proc, 0) if r.op == ops.PUT]
    bodies = [(p.conn, ops.PutArgs._make(p.args).body) for p in puts]
    assert bodies == [(2, b"y")]  # only the live connection's put
    assert gone.phase is CLOSED
