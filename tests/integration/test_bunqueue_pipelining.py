"""A connection's commands under way at once, differentially (shardq's bunqueue door and the
real bunqueue 2.9.5): a PULL that waits does not hold the commands sent after it, answers
go by reqId, and at most 50 commands of a connection are under way (the next waits for
one of them to be answered)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from bunqueue_server import bunqueue_server_fixture, real_bunqueue_fixture  # noqa: F401  (fixtures)
from bunqueue_wire import Raw

SHARDS = [1, 4]


def replies(c: Raw, n: int) -> list[dict[str, Any]]:
    return [c.recv() for _ in range(n)]


def a_waiting_pull_lets_later_commands_by(port: int) -> None:
    c = Raw(port)
    started = time.monotonic()
    c.send({"cmd": "PULL", "queue": "pw", "timeout": 20_000, "reqId": "pull"})
    c.send({"cmd": "Ping", "reqId": "ping"})
    c.send({"cmd": "PUSH", "queue": "pw", "data": {"x": 1}, "reqId": "push"})
    got = {r["reqId"]: (at, r) for at, r in enumerate(replies(c, 3))}
    assert got["ping"][0] < got["pull"][0]  # answered while the pull waited
    assert got["pull"][1]["job"]["id"] == got["push"][1]["id"]  # woken by the push
    assert time.monotonic() - started < 20  # not at its timeout
    c.close()


def fifty_commands_are_under_way_at_most(port: int) -> None:
    c = Raw(port)
    for i in range(51):
        c.send({"cmd": "PULL", "queue": "empty", "timeout": 1000, "reqId": f"w{i}"})
    c.send({"cmd": "Ping", "reqId": "ping"})
    order = [r["reqId"] for r in replies(c, 52)]
    # the Ping waits for a slot: answered after a pull's timeout, before the 51st pull's
    assert 1 <= order.index("ping") < order.index("w50")
    c.close()


@pytest.mark.parametrize("shards", SHARDS)
def test_a_waiting_pull_does_not_hold_the_connection(bunqueue_server, real_bunqueue, shards):
    a_waiting_pull_lets_later_commands_by(real_bunqueue())
    a_waiting_pull_lets_later_commands_by(bunqueue_server(shards).bunqueue)


def test_fifty_commands_of_a_connection_are_under_way_at_most(bunqueue_server, real_bunqueue):
    fifty_commands_are_under_way_at_most(real_bunqueue())
    fifty_commands_are_under_way_at_most(bunqueue_server(1).bunqueue)


def test_a_parked_pull_of_a_client_that_went_takes_no_job(bunqueue_server) -> None:
    """Its waiter goes with it: a job pushed after is pulled by the next client."""
    port = bunqueue_server(1).bunqueue
    gone = Raw(port)
    gone.send({"cmd": "PULL", "queue": "pg", "timeout": 20_000, "reqId": "p"})
    assert gone.call("Ping")["ok"] is True  # (the pull is parked)
    gone.close()
    c = Raw(port)
    pushed = c.call("PUSH", queue="pg", data={"y": 2})["id"]
    assert c.call("PULL", queue="pg", timeout=5000)["job"]["id"] == pushed
    assert c.call("GetJobCounts", queue="pg")["counts"]["active"] == 1
    c.close()


def test_a_pull_whose_waiter_is_refused_is_answered_at_its_timeout(bunqueue_server) -> None:
    """With the server's connections at their limit the waiter's own is refused: the pull
    is answered as one that found nothing, at its timeout, and the connection goes on."""
    port = bunqueue_server(1, ("--max-connections", "1", "--serving", "1")).bunqueue
    c = Raw(port)
    started = time.monotonic()
    assert c.call("PULL", queue="mc", timeout=1500) == {"ok": True, "job": None}
    assert time.monotonic() - started >= 1.5
    pushed = c.call("PUSH", queue="mc", data={"z": 1})["id"]
    assert c.call("PULL", queue="mc", timeout=5000)["job"]["id"] == pushed
    c.close()
