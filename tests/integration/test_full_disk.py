"""A nearly full disk takes puts while room is left, and refuses only what does not fit
(issue 22, item 12).

Each test mounts a small tmpfs (root: `make test` runs as root in CI) and fills it with a
file, leaving a few MiB, less than one segment (`wal.segment_bytes`, 10 MiB by default),
free. Segments used to be preallocated whole, so every shard refused every put there. Now
a segment's preallocation grows as it is written: every shard takes puts until the disk is
full up to the room a put needs (plus the headroom kept for deletes), the rest is served,
space freed is used at once, and after a kill -9 and a restart on the full disk every
acknowledged job is there.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import connect, put_body, read_replies, ready_ids, send, skip_or_fail, tube_on_shard

from shardq.bench.procs import wait_group_gone
from shardq.storage.wal import HEADROOM

MIB = 1 << 20
DISK_BYTES = 16 * MIB  #: the small file system
FREE_BYTES = 3 * MIB  #: left free by the filler: less than one 10 MiB segment
BODY = b"x" * 4000
#: free space left once every shard refuses a put: less than what one more put needs
#: (its record and the headroom every segment keeps), rounded up to tmpfs's pages
FULL_BELOW = len(BODY) + 2 * HEADROOM


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A DISK_BYTES tmpfs with all but FREE_BYTES taken by the file `filler`."""
    if os.geteuid() != 0:
        skip_or_fail("mounting a small tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    mount_tmpfs = ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount)]
    subprocess.run(mount_tmpfs, check=True)
    try:
        filler = mount / "filler"
        with open(filler, "wb") as f:
            os.posix_fallocate(f.fileno(), 0, free_bytes(mount) - FREE_BYTES)
        yield mount
    finally:
        subprocess.run(["umount", "--lazy", str(mount)], check=True)


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def clients_by_tube(port: int, tubes: list[str]) -> dict[str, Any]:
    """A connection using each tube."""
    clients = {}
    for tube in tubes:
        sock = connect(port)
        send(sock, f"use {tube}\r\n".encode())
        assert read_replies(sock, 1) == [f"USING {tube}\r\n".encode()]
        clients[tube] = sock
    return clients


def fill(clients: dict[str, Any]) -> dict[str, set[int]]:
    """Put into every tube in turn until each refuses: the ids each one took."""
    taken: dict[str, set[int]] = {tube: set() for tube in clients}
    open_tubes = list(clients)
    while open_tubes:
        for tube in list(open_tubes):
            reply = put_body(clients[tube], BODY)
            if reply == b"OUT_OF_MEMORY\r\n":
                open_tubes.remove(tube)
            else:
                assert reply.startswith(b"INSERTED "), reply
                taken[tube].add(int(reply.split()[1]))
    return taken


@pytest.mark.parametrize("shards", [1, 4])
def test_a_nearly_full_disk_takes_puts_until_it_is_full(
    shards: int, small_disk: Path, shardq_server: Callable[..., Any]
) -> None:
    wal = small_disk / "wal"
    server = shardq_server(shards=shards, extra=("-b", str(wal)))
    tubes = [tube_on_shard(i, shards) for i in range(shards)]
    clients = clients_by_tube(server.port, tubes)

    taken = fill(clients)
    assert all(taken.values()), {tube: len(ids) for tube, ids in taken.items()}
    left = free_bytes(small_disk)
    assert left < FULL_BELOW, f"{left} bytes free, yet every shard refused a put"
    stored = sum(len(ids) for ids in taken.values()) * len(BODY)
    assert stored > FREE_BYTES // 2, stored  # the log's own bytes are the rest

    # the rest is served: a reserve and a delete on every shard
    for tube, sock in clients.items():
        send(sock, f"watch {tube}\r\nreserve-with-timeout 0\r\n".encode())
        reserved = read_replies(sock, 2)[1]
        assert reserved.startswith(b"RESERVED "), reserved
        gone = int(reserved.split()[1])
        send(sock, b"delete %d\r\n" % gone)
        assert read_replies(sock, 1) == [b"DELETED\r\n"]
        taken[tube].discard(gone)

    (small_disk / "filler").unlink()  # room again: taken at once, with no retry to wait for
    for tube, sock in clients.items():
        reply = put_body(sock, BODY)
        assert reply.startswith(b"INSERTED "), reply
        taken[tube].add(int(reply.split()[1]))
        sock.close()

    os.killpg(server.proc.pid, signal.SIGKILL)  # a crash: nothing gets to sync or close
    assert wait_group_gone(server.proc)
    again = shardq_server(shards=shards, extra=("-b", str(wal)))
    for tube in tubes:
        assert ready_ids(again.port, tube) == taken[tube], tube
