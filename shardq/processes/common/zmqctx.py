"""Each process's one ZeroMQ context, with the reconnect timing every socket of it gets,
and the server's token that every message between its processes carries.

The processes of a server start side by side, so a socket often connects to an ipc path
its peer has not bound yet. libzmq then tries again after ZMQ_RECONNECT_IVL, 100 ms by
default: one such miss made the first answer of a fresh server 0.1 s late (seen with strace:
the `stats` of a client that connected at once waited for a serving process to reach
another one's hosted shard). Here the first retry comes after 1 ms and the interval doubles
up to 4 ms while the peer stays away (a shard being restarted), as libzmq does with
ZMQ_RECONNECT_IVL_MAX set: a peer that binds while others already try is reached within
4 ms (with 2 ms doubling up to 100 ms, the coordinator reached the last serving process's
shard 4-8 ms after it bound, and the first `stats` of a fresh server waited for it), and a
peer that stays away costs a failed connect to a unix path 250 times a second.

The token: the supervisor makes 16 random bytes (os.urandom) when it imports this module (before it
forks anything), so every process of one server, restarted ones included, holds the same
token in memory and no other process has it (it is in no file and no command line). Every
DEALER of a server names itself ``TOKEN + 8 random bytes`` (ZMQ_ROUTING_ID: unique per
socket, as a ROUTER needs), and a ROUTER hands each message over with that name, so a shard
or the coordinator drops, at the cost of one prefix comparison, every message from a socket
that is not one of its own server's — a process of another server that reached its ipc
path, or anything else that connected there. The run directory is already private (0700);
this also holds for its own user and for root.
"""

from __future__ import annotations

import logging
import os

import zmq

RECONNECT_IVL_MS = 1  #: first retry after a failed or lost connection
RECONNECT_IVL_MAX_MS = 4  #: the retry interval doubles up to this


def context() -> zmq.Context[zmq.Socket[bytes]]:
    """This process's context (`zmq.Context.instance`); sockets made from it afterwards
    retry connections as described above."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    ctx.setsockopt(zmq.RECONNECT_IVL, RECONNECT_IVL_MS)
    ctx.setsockopt(zmq.RECONNECT_IVL_MAX, RECONNECT_IVL_MAX_MS)
    return ctx


#: this server's token (see above): the same in every process forked from the supervisor
TOKEN = os.urandom(16)  # what secrets.token_bytes returns, without importing hmac and hashlib
ROUTING_SUFFIX_BYTES = 8

log = logging.getLogger(__name__)
_reported: set[bytes] = set()  #: strangers already logged (once each)


def dealer(ctx: zmq.Context[zmq.Socket[bytes]]) -> zmq.Socket[bytes]:
    """A DEALER socket that names itself with this server's token (linger 0)."""
    s = ctx.socket(zmq.DEALER)
    s.linger = 0
    s.setsockopt(zmq.ROUTING_ID, TOKEN + os.urandom(ROUTING_SUFFIX_BYTES))
    return s


def stranger(peer: bytes) -> bool:
    """True (and logged once per peer) for a message a ROUTER got from a socket that is not
    one of this server's: drop it."""
    if peer.startswith(TOKEN):
        return False
    if peer not in _reported and len(_reported) < 1000:
        _reported.add(peer)
        log.warning("dropped a message from a socket of another server (%s)", peer.hex())
    return True
