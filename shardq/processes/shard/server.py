"""A shard's shell: the Router end (common/links.py) around a `ShardCore` (core.py), and the
loop of a shard process.

Each message is a batch of requests from a serving process or the coordinator; the replies
to one batch, plus whatever the engine has to say on its own (a waiter served, a reserve
timing out), go back as one batch per peer. Timers are the engine's: the loop sleeps until
the engine's next wake-up or the next message, whichever comes first. A serving process
that hosts the shard drives the same Router from its own loop (serving/loop.py).

Out of memory (processes/common/outofmemory.py) nothing is lost: a message is not taken
from the Router until it is decoded (links.py keeps it until `taken`), a batch that cannot
be unpacked whole is decoded request by request, a request that still cannot be is
answered OUT_OF_MEMORY (`wire.unpack_requests`), the requests of a turn that ran out of
memory before they were applied are applied in the next (`pending`), and replies that
cannot be packed wait for the next turn.
"""

from __future__ import annotations

import logging
import select
import time
from collections.abc import Sequence
from typing import Any

from shardq.cluster import wire
from shardq.cluster.wire import Request
from shardq.processes.common import collector, lifeline, outofmemory, wakeup
from shardq.processes.common.links import TOKEN, Again, Router
from shardq.processes.shard.core import ShardCore
from shardq.processes.shard.holding import Outbox

log = logging.getLogger(__name__)

#: a peer and the requests of one of its messages, each as it came off the wire
Batch = tuple[bytes, list[Sequence[Any] | wire.Unread]]

MAX_MESSAGES_PER_TURN = 256  #: bound the work between two timer checks
MAX_SLEEP_S = lifeline.CHECK_EVERY_S  #: poll at least this often
RETRY_SEND_S = 0.05  #: how soon replies that memory was short to pack are tried again


class ShardServer:
    """A shard process: a Router around a ShardCore (compiled, a C struct: server.pxd)."""

    core: ShardCore
    router: Router
    poll: select.epoll
    wakeup: int
    pending: list[Batch]
    out: Outbox

    def __init__(self, core: ShardCore, path: str) -> None:
        """`path`: the unix socket its peers reach it on (links.Router)."""
        self.core = core
        self.router = Router(path, TOKEN)
        self.poll = select.epoll()
        self.poll.register(self.router.fd, select.EPOLLIN)
        self.wakeup = -1  # see `watch_signals`
        #: batches received and not handled yet: a turn that ran out of memory leaves the
        #: requests it had not applied to the next
        self.pending = []
        #: replies not sent yet: a turn that ran out of memory leaves them to the next
        self.out = {}

    def watch_signals(self) -> None:
        """Let a signal end the poll at once (`wakeup`): for a process of its own, not a
        shard hosted in a serving process (whose loop polls its own pipe)."""
        self.wakeup = wakeup.install()
        self.poll.register(self.wakeup, select.EPOLLIN)

    def receive(self) -> list[Batch]:
        """The batches not handled yet, with those the socket holds now (a bounded number
        of messages) after them; a request that memory was short to decode comes as
        `wire.Unread`."""
        pending, router = self.pending, self.router
        for _ in range(MAX_MESSAGES_PER_TURN):
            try:
                peer, data = router.peek()
            except Again:
                break
            try:
                pending.append((peer, wire.unpack_requests(data)))
            except ValueError:
                log.warning("shard %d: dropped a malformed message", self.core.index)
            router.taken()
        return pending

    def held(self) -> bool:
        """Requests taken from the sockets and not applied yet (a turn ran out of memory,
        or it stopped at MAX_MESSAGES_PER_TURN): the Router's fd may not fire for them."""
        return bool(self.pending) or self.router.held()

    def handle(self, batches: list[Batch], now: int, out: Outbox) -> None:
        """Apply `batches` in order, emptying the list. Out of memory before a request is
        applied, it and what follows stay in `batches` for the next turn; a request is
        never applied twice (`ShardCore.handle_into` answers what runs out in it)."""
        handle_into = self.core.handle_into
        make = Request._make
        for b, (peer, batch) in enumerate(batches):
            done = 0
            try:
                for raw in batch:
                    try:
                        req = make(raw)
                    except TypeError:  # not four fields: memory was short to read it, or no rid
                        done += 1
                        if isinstance(raw, wire.Unread):
                            handle_into(peer, raw, now, out)
                        else:
                            log.warning("shard %d: dropped a malformed request", self.core.index)
                        continue
                    done += 1
                    handle_into(peer, req, now, out)
            except MemoryError:
                del batch[:done]
                del batches[:b]
                raise
        batches.clear()

    def take_messages(self, now: int, out: Outbox) -> None:
        """Handle what the socket holds (a bounded number of messages) into `out`."""
        self.handle(self.receive(), now, out)

    def send_replies(self, out: Outbox) -> None:
        """Each peer's replies as one batch; out of memory, one reply a batch, and what
        still cannot be packed stays in `out` for the next turn (no reply is lost)."""
        send = self.router.send
        for peer in list(out):
            replies = out[peer]
            try:
                if replies:
                    send(peer, wire.pack(replies))
                del out[peer]
            except MemoryError:
                while replies:
                    send(peer, wire.pack(replies[:1]))
                    del replies[0]

    def turn(self, timeout_s: float) -> None:
        core = self.core
        out = self.out  # kept across a turn that ran out of memory
        if self.poll.poll(timeout_s) or self.held():
            if self.wakeup >= 0:
                wakeup.drain(self.wakeup)
            now = time.monotonic_ns()
            core.engine.tick(now)  # timers first: a pause that ended serves its oldest waiter
            self.take_messages(now, out)
        core.take_events(time.monotonic_ns(), out)
        core.commit()  # before any reply: an answered change is in the log
        self.send_replies(out)

    def serve_forever(self) -> None:
        while True:
            lifeline.check()
            outofmemory.guard(self.next_turn)

    def next_turn(self) -> None:
        """A turn that sleeps until the next message or timer, or until replies that a
        turn out of memory left are tried again."""
        collector.settle()  # no collection pause that grows with the jobs held
        wake = self.core.next_wakeup()
        timeout = RETRY_SEND_S if self.out else MAX_SLEEP_S
        if self.held():
            timeout = 0
        if wake is not None:
            timeout = min(timeout, max(0.0, (wake - time.monotonic_ns()) / 1e9))
        self.turn(timeout)

    def close(self) -> None:
        self.router.close()
        self.poll.close()
