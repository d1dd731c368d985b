"""An epoll selector whose `select` is compiled: the serving loop's wait, once per event.

`selectors.EpollSelector.select` is Python: for every ready descriptor of a wake-up it
looks the key up and builds the pair in the interpreter, which under 50 busy connections is
one pass of Python code per command. `Poller` is that selector with `select` written again
as the same loop, compiled (shardq/compiled.py); registering, closing and the rest are
`selectors`' own. The loop reads the state its base keeps (`_selector`: the epoll,
`_fd_to_key`), as the base's own `select` does. Compiled, the wait itself is the C
library's `epoll_wait` into a C array (poller.pxd), not `select.epoll.poll`, which builds a
list of tuples for the loop to take apart again; a wait that may sleep lets the GIL go, as
`poll` does. The pure build keeps `poll`.
"""

from __future__ import annotations

import math
import os
import select
import selectors
from selectors import EVENT_READ, EVENT_WRITE, SelectorKey
from typing import TYPE_CHECKING, Any

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

    def __init__(self) -> None:
        super().__init__()
        self.epfd = self._selector.fileno()  #: the epoll's descriptor, for `epoll_wait`

    @cython.locals(
        events=cython.long,
        mask=cython.long,
        epollin=cython.long,
        epollout=cython.long,
        readable=cython.long,
        writable=cython.long,
        keys=dict,
        ms=cython.long,
        n=cython.long,
        i=cython.long,
        most=cython.long,
        epfd=cython.long,
    )
    def select(self, timeout: float | None = None) -> list[tuple[SelectorKey, int]]:
        """The ready keys and what each is ready for (an error or hang-up as both, as
        `selectors` reports them). A signal's handlers run within the wait."""
        if timeout is None:
            wait, ms = -1.0, -1
        elif timeout <= 0:
            wait, ms = 0.0, 0
        else:  # whole milliseconds, rounded up: no wake-up before the timeout
            ms = math.ceil(timeout * 1e3)
            wait = ms * 1e-3
        keys = self._fd_to_key
        ready: list[tuple[SelectorKey, int]] = []
        epollin, epollout = EPOLLIN, EPOLLOUT
        readable, writable = EVENT_READ, EVENT_WRITE  # (compiled: C integers, not globals)
        if not cython.compiled:
            try:
                fired = self._selector.poll(wait, max(len(keys), 1))
            except InterruptedError:
                return ready
            for fd, mask in fired:
                events = 0
                if mask & ~epollin:
                    events |= writable
                if mask & ~epollout:
                    events |= readable
                key = keys.get(fd)
                if key is not None:
                    ready.append((key, events & key.events))
            return ready
        most = min(max(len(keys), 1), MAX_EVENTS)  # type: ignore[name-defined]  # noqa: F821
        epfd = self.epfd
        if ms == 0:
            n = epoll_wait(epfd, FIRED, most, 0)  # type: ignore[name-defined]  # noqa: F821
        else:
            with cython.nogil:  # type: ignore[attr-defined]
                n = epoll_wait(epfd, FIRED, most, ms)  # type: ignore[name-defined]  # noqa: F821
        if n < 0:
            if errno != EINTR:  # type: ignore[name-defined]  # noqa: F821
                raise OSError(errno, os.strerror(errno))  # type: ignore[name-defined]  # noqa: F821
            # a signal: its handlers run now (one that raises ends the wait with its error),
            # then what is ready is what a wait returns (the loop's wake-up descriptor, which
            # the signal wrote: as `poll`, which waits again and finds it at once)
            PyErr_CheckSignals()  # type: ignore[name-defined]  # noqa: F821
            return self.select(0)
        for i in range(n):
            mask = FIRED[i].events  # type: ignore[name-defined]  # noqa: F821
            events = 0
            if mask & ~epollin:
                events |= writable
            if mask & ~epollout:
                events |= readable
            key = keys.get(FIRED[i].data.fd)  # type: ignore[name-defined]  # noqa: F821
            if key is not None:
                ready.append((key, events & item(key, 2)))  # key.events
        return ready


@cython.boundscheck(False)  # its callers' keys: SelectorKey has four fields
@cython.wraparound(False)
def item(key: SelectorKey, i: int) -> Any:
    """A selector key's i-th field (1 fd, 2 events, 3 data). Compiled, the tuple's item read
    as a C array's: `key.data` on the namedtuple is a look-up by name (≈ 270 instructions;
    `key[3]` from C, through the generic item protocol, ≈ 660)."""
    if not cython.compiled:
        return key[i]
    return cython.cast(tuple, key)[i]
