"""An epoll selector whose `select` is compiled: the serving loop's wait, once per event.

`selectors.EpollSelector.select` is Python: for every ready descriptor of a wake-up it
looks the key up and builds the pair in the interpreter, which under 50 busy connections is
one pass of Python code per command. `Poller` is that selector with `select` written again
as the same loop, compiled (shardq/compiled.py); registering, closing and the rest are
`selectors`' own. The loop reads the state its base keeps (`_selector`: the epoll,
`_fd_to_key`), as the base's own `select` does.
"""

from __future__ import annotations

import math
import select
import selectors
from selectors import EVENT_READ, EVENT_WRITE, SelectorKey
from typing import TYPE_CHECKING

if TYPE_CHECKING or __file__.endswith(".py"):  # the pure build: no-op decorators
    from shardq.nocython import cython
else:  # compiled: Cython reads the decorators (and imports nothing at run time)
    import cython

EPOLLIN, EPOLLOUT = select.EPOLLIN, select.EPOLLOUT


class Poller(selectors.EpollSelector):
    """`selectors.EpollSelector`, its per-event work compiled."""

    if TYPE_CHECKING:  # the base's state, which typeshed leaves out
        _selector: select.epoll
        _fd_to_key: dict[int, SelectorKey]

    @cython.locals(
        events=cython.long, mask=cython.long, epollin=cython.long, epollout=cython.long, keys=dict
    )
    def select(self, timeout: float | None = None) -> list[tuple[SelectorKey, int]]:
        """The ready keys and what each is ready for (an error or hang-up as both, as
        `selectors` reports them); [] after a signal interrupted it."""
        if timeout is None:
            wait = -1.0
        elif timeout <= 0:
            wait = 0.0
        else:  # whole milliseconds, rounded up: no wake-up before the timeout
            wait = math.ceil(timeout * 1e3) * 1e-3
        keys = self._fd_to_key
        ready: list[tuple[SelectorKey, int]] = []
        try:
            fired = self._selector.poll(wait, max(len(keys), 1))
        except InterruptedError:
            return ready
        epollin, epollout = EPOLLIN, EPOLLOUT
        for fd, mask in fired:
            events = 0
            if mask & ~epollin:
                events |= EVENT_WRITE
            if mask & ~epollout:
                events |= EVENT_READ
            key = keys.get(fd)
            if key is not None:
                ready.append((key, events & key.events))
        return ready
