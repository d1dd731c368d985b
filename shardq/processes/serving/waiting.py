"""How a turn of the serving process's loop waits for input: at once when the next command is
already there, else a short poll (`poll_us`) after a busy turn with few clients, else a sleep
in epoll until the next timer.

With one client that waits for each answer every command is a turn of its own, so the wait
is paid per command: after a busy turn the first poll comes before anything else, and the
sleep's timeout (timers, the hosted shard's next wake-up, links that a turn left unread or
that are due to reconnect) is worked out only when that poll found nothing.
"""

from __future__ import annotations

import os
import selectors
import time
from typing import TYPE_CHECKING

from shardq.engine.job import NS
from shardq.processes.common import lifeline
from shardq.processes.serving.state import ServingState

if TYPE_CHECKING:
    from shardq.processes.serving.loop import ServingProcess

if TYPE_CHECKING or __file__.endswith(".py"):  # the pure build: no-op decorators
    from shardq.nocython import cython
else:  # compiled: Cython reads the decorators (and imports nothing at run time)
    import cython

RETRY_S = 0.002  #: how soon a batch the peer could not take yet is tried again
SPIN_MAX_CONNS = 4  #: poll_briefly only with at most this many client connections
SPIN_MAX_SKIP = 64  #: after misses, poll_briefly sits out at most this many busy turns


@cython.locals(self=ServingState)  # (compiled: the state read as a C struct's)
def wait(self: ServingProcess) -> list[tuple[selectors.SelectorKey, int]]:
    """This turn's events: at once if the client's next command is already here (after
    a busy turn, with few clients: what poll_briefly would find first, so the sleep's
    timeout need not be worked out), else after polling briefly or sleeping until the
    next timer. Working out the timeout also does what must not wait for a quiet moment
    (expiring TLS handshakes, accepting again after a pause): while any of that is under
    way, every turn works it out."""
    spin = (
        self.worked
        and self.spin_s
        and not self.spin_skip
        and len(self.conns) <= SPIN_MAX_CONNS
        and not self.touched  # a link a turn left unread: see sleep_s
        and not self.handshakes  # sleep_s expires stalled TLS handshakes
        and not self.accept_paused_until  # and resumes accepting after a pause
    )
    if spin:
        events = self.sel.select(0)
        if events:
            self.spin_backoff = 1  # as poll_briefly's first poll
            return events
    timeout = self.sleep_s()
    if not timeout:
        return [] if spin else self.sel.select(0)  # polled just now: nothing there
    if self.worked and self.spin_s and len(self.conns) <= SPIN_MAX_CONNS:
        events = self.poll_briefly(polled=bool(spin))
        if events:
            return events
    return self.sel.select(timeout)


@cython.locals(self=ServingState)
def sleep_s(self: ServingProcess) -> float:
    """How long the loop may sleep: until the next timer, at most CHECK_EVERY_S; 0 when
    something is left to do now."""
    timeout = lifeline.CHECK_EVERY_S
    if self.timers:
        timeout = min(timeout, max(0.0, (self.timers[0][0] - time.monotonic_ns()) / NS))
    if self.retry_soon:
        timeout = min(timeout, RETRY_S)
    if self.backlog:
        timeout = 0  # commands are left over from the last turn (clients.pump)
    if self.dirty:
        timeout = 0  # output listed while the last turn wrote (a write that failed)
    if self.handshakes:
        timeout = min(timeout, self.expire_handshakes())
    if self.accept_paused_until:
        self.resume_accepting()
        if self.accept_paused_until:
            timeout = min(timeout, max(0.0, self.accept_paused_until - time.monotonic()))
    if self.hosted is not None:
        wake = self.hosted.core.next_wakeup()
        if wake is not None:
            timeout = min(timeout, max(0.0, (wake - time.monotonic_ns()) / NS))
        if self.outq.get(self.hosted_index) or self.hosted.held():
            timeout = 0  # a connection closed last turn: its jobs go back at once; or
            # requests a turn out of memory left
    if self.touched:
        timeout = 0  # a link a turn out of memory left unread: its fd may not fire again
    if self.retrying:  # links down: until the next is due to be tried again
        due = min(dealer.retry_at for dealer in self.retrying)
        timeout = min(timeout, max(0.0, due - time.monotonic()))
    return timeout


@cython.locals(self=ServingState)
def poll_briefly(
    self: ServingProcess, polled: bool = False
) -> list[tuple[selectors.SelectorKey, int]]:
    """Poll without sleeping for up to `spin_s` (poll_us) after a turn that did work. A
    client that waits for each answer sends its next command within tens of µs;
    catching it awake is cheaper than sleeping in epoll and being woken. Only with few
    connections: with many there is nearly always input, and the other core belongs to
    the clients. Adaptive: a poll that catches nothing makes the next 1, 2, 4 … 64 busy
    turns sleep at once, so a client that thinks between commands costs at most one
    wasted window in SPIN_MAX_SKIP turns; a poll that catches input resets it. Between
    two polls it yields the core (sched_yield): on a busy machine the client it waits
    for may be the process waiting for this core, and on a quiet one the yield returns
    at once. `polled`: the first poll was made already (wait), and found nothing."""
    if self.spin_skip:
        self.spin_skip -= 1
        return []
    until = time.monotonic() + self.spin_s
    while True:
        if polled:
            os.sched_yield()
        polled = True
        events = self.sel.select(0)
        if events:
            self.spin_backoff = 1
            return events
        if time.monotonic() >= until:
            self.spin_skip = self.spin_backoff
            self.spin_backoff = min(2 * self.spin_backoff, SPIN_MAX_SKIP)
            return events
