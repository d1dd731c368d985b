"""A connection that moves to its home's serving process takes its unwritten replies
along: its client sees a reply only once the connection is where it goes, so whatever the
reply leads to (a `stats` from another connection) finds it counted there. Written first
and moved after, a loaded machine once answered `stats` with 3 connections of 4: the one
moving was in neither process's count. Two serving processes in this process, real
handoff sockets in a temp dir, no peer started."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from shardq.cluster.routing import tube_shard
from shardq.config import load_config
from shardq.processes.serving import handoff
from shardq.processes.serving.conn import Conn
from shardq.processes.serving.loop import ServingProcess
from shardq.processes.supervision.children import serving_settings
from shardq.protocol import proto


def make(run_dir: Path, index: int) -> ServingProcess:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    config = load_config("", {"shards": 2, "serving": 2})
    settings = serving_settings(config, str(run_dir), index, (listener.detach(), -1, -1))
    return ServingProcess(settings, None)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[ServingProcess, ServingProcess]]:
    procs = make(tmp_path, 0), make(tmp_path, 1)
    yield procs
    for a in procs:
        a.close_links()
        a.listener.close()
        moving = [m.conn for m in a.handovers.moving.values()]
        for k in [*a.conns.values(), *moving]:
            k.sock.close()
        for sock in (inbox_of(a).sock, a.handovers.out):
            if sock is not None:
                sock.close()
        a.sel.close()


def away_producer(a: ServingProcess) -> tuple[Conn, socket.socket]:
    """A connection of `a` whose used tube lives on shard 1 (the other process's)."""
    mine, theirs = socket.socketpair()
    mine.setblocking(False)
    theirs.setblocking(False)
    k = Conn(a.next_conn, mine, 65535)
    a.next_conn += 1
    n = 0
    while tube_shard(f"t{n}", 2) != 1:
        n += 1
    k.use = f"t{n}"
    k.producer = True
    a.conns[k.id] = k
    a.interest(k)
    return k, theirs


def inbox_of(a: ServingProcess) -> handoff.HandoffInbox:
    assert a.handovers.inbox is not None
    return a.handovers.inbox


def test_a_moving_connection_s_reply_is_written_by_its_new_owner(
    pair: tuple[ServingProcess, ServingProcess],
) -> None:
    here, home = pair
    k, client = away_producer(here)
    here.reply(k, proto.using(k.use))  # the reply that leaves it at rest, away from home
    here.flush_output()
    with pytest.raises(BlockingIOError):
        client.recv(100)  # not written here: it went along
    assert k.id not in here.conns and k.id in here.handovers.moving
    home.adopt(inbox_of(home))
    (taken,) = home.conns.values()
    assert taken.use == k.use and taken.producer
    home.flush_output()
    assert client.recv(100) == proto.using(k.use)
    here.adopt(inbox_of(here))  # TAKEN: the old owner lets its descriptor go
    assert not here.handovers.moving and here.handovers.handed_off == 1
    client.close()


def test_a_refused_move_s_reply_is_written_where_it_stays(
    pair: tuple[ServingProcess, ServingProcess],
) -> None:
    here, home = pair
    home.conn_limit = 1  # its share of max_connections is taken
    held, other = socket.socketpair()
    home.conns[1] = Conn(1, held, 65535)
    k, client = away_producer(here)
    here.reply(k, proto.using(k.use))
    here.flush_output()
    home.adopt(inbox_of(home))  # REFUSED
    here.adopt(inbox_of(here))
    assert k.id in here.conns and not here.handovers.moving
    here.flush_output()
    assert client.recv(100) == proto.using(k.use)
    for sock in (held, other, client):
        sock.close()


def test_replies_too_long_to_go_along_are_written_and_it_moves_after_a_later_one(
    pair: tuple[ServingProcess, ServingProcess],
) -> None:
    here, home = pair
    k, client = away_producer(here)
    long = b"x" * handoff.HANDOFF_BYTES
    here.reply(k, long)
    here.flush_output()
    assert k.id in here.conns and k.away is not False  # written here, still to move
    got = b""
    while len(got) < len(long):
        got += client.recv(len(long))
    here.reply(k, proto.using(k.use))
    here.flush_output()
    assert k.id in here.handovers.moving
    home.adopt(inbox_of(home))
    here.adopt(inbox_of(here))
    client.close()
