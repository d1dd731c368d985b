"""Pulls that wait without holding their client's other commands, as bunqueue runs up to
50 commands of a connection at once (answered by reqId, in any order).

A PULL or PULLB with a ``timeout`` first takes what its queue has now, on the client's
own connection. If it has nothing, it is *parked*: it waits on a beanstalk connection of
its own (an internal session, its *waiter*), in the shard as every waiting reserve (woken
by a put through any door, a job given back, a Resume), and the client's next commands run
meanwhile. What the waiter pulls is held by the client (its session id: a disconnect
gives it back); the waiter deletes it from its tube before it answers, then goes. A
client with `MAX_IN_FLIGHT` pulls parked runs no more commands until one is answered
(bunqueue's bound); when the client goes, its waiters go with it (what they had reserved
goes back to its tube). A waiter whose connection goes (or is refused: the server's
``limits.max_connections`` counts it) answers its pull empty at its timeout.
"""

from __future__ import annotations

import heapq
import logging
import time
from typing import TYPE_CHECKING

from shardq.processes.frontends.bunqueue.pulls import Pull, answer, pull, pull_of
from shardq.processes.frontends.bunqueue.tubes import flush_deletes
from shardq.processes.frontends.session import CLOSED, Session, Task
from shardq.protocol import bunqueue as b
from shardq.protocol import bunqueue_args as a

if TYPE_CHECKING:
    from .loop import Frontend

MAX_IN_FLIGHT = 50  #: a connection's commands under way at once (bunqueue's)

log = logging.getLogger(__name__)


def do_pull(front: Frontend, s: Session, req: b.Request) -> Task:
    """A pull that may wait takes what is there now; if there is nothing, it waits on a
    connection of its own and the client's next commands go on."""
    p = pull_of(req)
    if p.wait_ms and s.sock is not None:
        jobs = yield from pull(front, s, p, wait=False)
        if jobs or not park(front, s, p):
            return answer(p, jobs)
        return None  # its waiter answers it
    return answer(p, (yield from pull(front, s, p)))


def park(front: Frontend, s: Session, p: Pull) -> bool:
    """Start `p`'s waiter (False: no connection to the server now)."""
    w = front.internal_session()
    if w is None:
        return False
    front.parked.setdefault(s.id, set()).add(w)
    front.waiting_for[w.id] = (s, p)
    front.start(w, wait_for(front, w, s, p))
    return True


def full(front: Frontend, s: Session) -> bool:
    """The client has as many pulls parked as it may have commands under way."""
    return len(front.parked.get(s.id, ())) >= MAX_IN_FLIGHT


def wait_for(front: Frontend, w: Session, s: Session, p: Pull) -> Task:
    """The waiter's task: the pull, its jobs out of their tube, the answer to the client."""
    try:
        jobs = yield from pull(front, w, p, holder=s.id)
        yield from flush_deletes(front, w)
        reply = answer(p, jobs)
    except a.BadRequest as e:
        reply = b.error(str(e), p.req.req_id)
    except Exception:  # (as the loop does for a client's command: answered, logged)
        log.exception("session %d: a waiting pull failed", s.id)
        reply = b.error("Internal server error", p.req.req_id)
    finally:
        unpark(front, w, s)
    front.waiting_for.pop(w.id, None)
    front.answer(s, reply)
    front.pump(s)  # (it may have stopped at MAX_IN_FLIGHT)
    front.close(w)
    return None


def unpark(front: Frontend, w: Session, s: Session) -> None:
    waiters = front.parked.get(s.id)
    if waiters is not None:
        waiters.discard(w)
        if not waiters:
            del front.parked[s.id]


def lost(front: Frontend, w: Session) -> None:
    """A waiter closed before it answered (its connection to the server went, or the
    server refused it: `limits.max_connections`): its pull is answered as one that found
    nothing, at its timeout."""
    got = front.waiting_for.pop(w.id, None)
    if got is None:
        return
    s, p = got
    unpark(front, w, s)
    if s.phase is not CLOSED:  # answered at its timeout (`deliver_late`)
        heapq.heappush(front.late, (p.deadline, w.id, s, answer(p, [])))


def deliver_late(front: Frontend) -> None:
    """The answers of lost waiters whose pulls' time has come."""
    now = time.monotonic()
    while front.late and front.late[0][0] <= now:
        _, _, s, data = heapq.heappop(front.late)
        if s.phase is not CLOSED:
            front.answer(s, data)
            front.pump(s)


def late_due(front: Frontend) -> float | None:
    """Seconds until the next answer of a lost waiter (None: none)."""
    return max(0.0, front.late[0][0] - time.monotonic()) if front.late else None


def cancel(front: Frontend, s: Session) -> list[int]:
    """The client went: its waiters go; the beanstalk jobs they had reserved and not
    deleted (back in their tubes as their connections close)."""
    reserved: list[int] = []
    for w in front.parked.pop(s.id, set()):
        reserved += front.undeleted.pop(w.id, [])
        front.close(w)
    return reserved
