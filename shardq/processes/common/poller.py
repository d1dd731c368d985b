"""An epoll selector whose `select` is compiled: the serving loop's wait, once per event.

`selectors.EpollSelector.select` is Python: for every ready descriptor of a wake-up it
looks the key up and builds the pair in the interpreter, which under 50 busy connections is
one pass of Python code per command. `Poller` is the same selector (the `selectors`
interface: `register`, `unregister`, `modify`, `select`, `get_map`, `close`; the same
`SelectorKey`s and event masks, an error or hang-up reported as both read and write, as
`selectors` does), with that loop compiled (shardq/compiled.py). It owns its epoll and
its keys.
"""

from __future__ import annotations

import contextlib
import math
import select
import selectors
from collections.abc import Mapping
from selectors import EVENT_READ, EVENT_WRITE, SelectorKey
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike as FileObj

if TYPE_CHECKING or __file__.endswith(".py"):  # the pure build: no-op decorators
    from shardq.nocython import cython
else:  # compiled: Cython reads the decorators (and imports nothing at run time)
    import cython

EPOLLIN, EPOLLOUT = select.EPOLLIN, select.EPOLLOUT


def _fd(fileobj: FileObj) -> int:
    """The descriptor of a file object or of an int (ValueError: none)."""
    fd = fileobj if isinstance(fileobj, int) else int(fileobj.fileno())
    if fd < 0:
        raise ValueError(f"Invalid file descriptor: {fd}")
    return fd


class Poller(selectors.BaseSelector):
    """`selectors.EpollSelector`, its per-event work compiled."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._keys: dict[int, SelectorKey] = {}  # fd -> key

    def _lookup(self, fileobj: FileObj) -> int:
        """The registered descriptor of `fileobj`, also once it is closed (its fileno -1):
        found by the object itself, as `selectors` does."""
        try:
            return _fd(fileobj)
        except ValueError:
            for key in self._keys.values():
                if key.fileobj is fileobj:
                    return key.fd
            raise

    def register(self, fileobj: FileObj, events: int, data: Any = None) -> SelectorKey:
        if not events or events & ~(EVENT_READ | EVENT_WRITE):
            raise ValueError(f"Invalid events: {events!r}")
        fd = self._lookup(fileobj)
        if fd in self._keys:
            raise KeyError(f"{fileobj!r} (FD {fd}) is already registered")
        key = SelectorKey(fileobj, fd, events, data)
        self._epoll.register(fd, _epoll_mask(events))
        self._keys[fd] = key
        return key

    def unregister(self, fileobj: FileObj) -> SelectorKey:
        try:
            key = self._keys.pop(self._lookup(fileobj))
        except KeyError:
            raise KeyError(f"{fileobj!r} is not registered") from None
        with contextlib.suppress(OSError):  # closed already: the kernel forgot it
            self._epoll.unregister(key.fd)
        return key

    def modify(self, fileobj: FileObj, events: int, data: Any = None) -> SelectorKey:
        fd = self._lookup(fileobj)
        key = self._keys.get(fd)
        if key is None:
            raise KeyError(f"{fileobj!r} is not registered")
        if events != key.events:
            if not events or events & ~(EVENT_READ | EVENT_WRITE):
                raise ValueError(f"Invalid events: {events!r}")
            self._epoll.modify(fd, _epoll_mask(events))
        elif data is key.data:
            return key
        key = self._keys[fd] = SelectorKey(fileobj, fd, events, data)
        return key

    @cython.locals(events=cython.long, mask=cython.long, epollin=cython.long, epollout=cython.long)
    def select(self, timeout: float | None = None) -> list[tuple[SelectorKey, int]]:
        """The ready keys and what each is ready for; [] after a signal interrupted it."""
        if timeout is None:
            wait = -1.0
        elif timeout <= 0:
            wait = 0.0
        else:  # whole milliseconds, rounded up: no wake-up before the timeout
            wait = math.ceil(timeout * 1e3) * 1e-3
        keys = self._keys
        ready: list[tuple[SelectorKey, int]] = []
        try:
            fired = self._epoll.poll(wait, max(len(keys), 1))
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

    def get_map(self) -> Mapping[FileObj, SelectorKey]:
        return {key.fileobj: key for key in self._keys.values()}

    def close(self) -> None:
        self._epoll.close()
        self._keys.clear()


def _epoll_mask(events: int) -> int:
    return (EPOLLIN if events & EVENT_READ else 0) | (EPOLLOUT if events & EVENT_WRITE else 0)
