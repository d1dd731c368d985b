"""The shard's compaction in a forked child (`Wal.start_compaction`, `poll_compaction`;
storage/forked_write.py): the log keeps being written while the child writes the snapshot,
and whatever moment a crash comes, a replay gives the same jobs.

Real forks and files under tmp_path; the engine on a fake clock, as in test_wal_restore.py.
A test waits for its child to end (the child's real work), never by a sleep.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import poll_for
from test_wal_restore import Shard, restart
from wal_helpers import segment_files

from shardq.storage import wal as walmod

BODY = b"z" * 3000


class Background(Shard):
    """A Shard whose compaction runs in a child, started as ShardCore.write_log starts it.
    The tests say when a turn looks at it (`poll_compaction`): a commit does not, so that
    a test decides whether the child is done by then, not the machine's speed."""

    def compact(self) -> None:
        self.wal.start_compaction(self.e.snapshot, len(self.e.jobs))


def churn_until_compacting(s: Background, live: list[int]) -> None:
    """Puts and deletes around the `live` jobs until a compaction is under way."""
    while s.wal.compacting is None:
        j = s.put(BODY)
        s.do("delete", 1, j)


def child_done(s: Shard) -> None:
    """Wait for the compaction's child to end (its result stays for `poll_compaction`)."""
    writer = s.wal.compacting
    assert writer is not None
    writer.poll(block=True)


def jobs_of(s: Shard) -> dict[int, tuple[bytes, int, int]]:
    return {j: (job.body, job.state, job.pri) for j, job in s.e.jobs.items()}


def test_the_log_goes_on_while_the_child_writes_and_the_old_segments_go(tmp_path: Path) -> None:
    s = Background(tmp_path)
    live = [s.put(BODY) for _ in range(5)]
    churn_until_compacting(s, live)
    kept = s.wal.compacting_at
    assert s.wal.index == kept + 1  # written on after the kept index meanwhile
    late = s.put(b"put while the child writes")
    s.do("delete", 1, live[0])  # deleted after the fork: the snapshot still has it
    child_done(s)
    assert s.wal.poll_compaction() is True  # the turn that finds it done
    assert s.wal.compacting is None
    assert [int(p.stem) for p in segment_files(tmp_path)] == [kept, kept + 1]
    assert s.wal.stats()["binlog-oldest-index"] == kept
    assert not list(tmp_path.glob("*" + walmod.NEW))
    want = jobs_of(s)
    assert late in want and live[0] not in want
    assert jobs_of(restart(s)) == want


def test_a_crash_before_the_snapshot_is_in_place_replays_the_same_jobs(tmp_path: Path) -> None:
    s = Background(tmp_path)
    live = [s.put(BODY) for _ in range(5)]
    churn_until_compacting(s, live)
    s.put(b"after the fork")
    child_done(s)  # written and synced, never renamed: the parent died first
    assert list(tmp_path.glob("*" + walmod.NEW))
    want = jobs_of(s)
    s.wal.compacting = None  # (the crash: nothing more of this process runs)
    r = restart(s)
    assert jobs_of(r) == want
    assert not list(tmp_path.glob("*" + walmod.NEW))  # the cut-short snapshot is removed


def test_a_crash_between_the_rename_and_the_drop_replays_the_same_jobs(tmp_path: Path) -> None:
    """The snapshot in place, the older segments not yet deleted: they replay first, and
    the snapshot's whole jobs then say the same again."""
    s = Background(tmp_path)
    live = [s.put(BODY) for _ in range(5)]
    churn_until_compacting(s, live)
    s.do("delete", 1, live[1])
    child_done(s)
    writer = s.wal.compacting
    assert writer is not None
    os.rename(writer.path, s.wal._path(s.wal.compacting_at))
    s.wal.compacting = None
    want = jobs_of(s)
    assert jobs_of(restart(s)) == want


def failing_snapshot() -> Sequence[Sequence[Any]]:
    raise RuntimeError("the child fails")


def test_a_failed_child_leaves_the_log_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(walmod, "COMPACT_RETRY_S", 3600.0)  # no second try within the test
    s = Shard(tmp_path)
    live = [s.put(BODY) for _ in range(3)]
    for _ in range(60):
        s.do("delete", 1, s.put(BODY))
    before = {p.name for p in segment_files(tmp_path)}
    s.wal.start_compaction(failing_snapshot, len(s.e.jobs))
    child_done(s)
    assert s.wal.poll_compaction() is False
    assert not list(tmp_path.glob("*" + walmod.NEW))
    assert before <= {p.name for p in segment_files(tmp_path)}  # nothing dropped
    assert not s.wal.needs_compaction(s.e.live_bytes)  # not again at once
    assert sorted(restart(s).e.jobs) == sorted(live)


@pytest.fixture
def pair() -> Any:
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_the_child_holds_none_of_the_parents_descriptors(tmp_path: Path, pair: Any) -> None:
    """A peer of a shard that dies must see its sockets close then, not when the child ends."""
    s = Shard(tmp_path)
    s.put(BODY)
    fd = pair[0].fileno()

    def snapshot() -> Sequence[Sequence[Any]]:
        try:
            os.fstat(fd)
        except OSError:
            return []  # closed in the child, as it should be
        raise RuntimeError("the child holds the parent's socket")

    s.wal.start_compaction(snapshot, 0)
    child_done(s)
    assert s.wal.poll_compaction() is True


def test_failures_in_a_row_wait_longer_each_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk that stays full, or a child the kernel kills for its memory, is tried again
    after 1, 2, 4... s (at most COMPACT_RETRY_MAX_S), not every second; a success resets it."""
    clock = [1000.0]
    monkeypatch.setattr(walmod.time, "monotonic", lambda: clock[0])
    s = Shard(tmp_path)
    s.put(BODY)
    waits = []
    for _ in range(8):
        s.wal.start_compaction(failing_snapshot, len(s.e.jobs))
        child_done(s)
        assert s.wal.poll_compaction() is False
        waits.append(s.wal.compact_after - clock[0])
        clock[0] = s.wal.compact_after
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    s.wal.start_compaction(s.e.snapshot, len(s.e.jobs))
    child_done(s)
    assert s.wal.poll_compaction() is True
    assert s.wal.compact_failures == 0


PARENT = """
import sys, time
from shardq.storage.forked_write import ForkedWrite

def chunks():
    time.sleep(60)  # a long write: the child is still at it when its parent dies
    return []

writer = ForkedWrite(sys.argv[1], chunks)
print(writer.pid, flush=True)
time.sleep(60)
"""


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # dead, not yet reaped
    except FileNotFoundError:
        return True


def test_the_child_is_named_and_dies_with_its_parent(tmp_path: Path) -> None:
    """A shard killed mid-compaction leaves no child writing on: PR_SET_PDEATHSIG."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(tmp_path / "out.new")], stdout=subprocess.PIPE
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        comm = Path(f"/proc/{child}/comm")
        poll_for(lambda: comm.read_text().strip() == "sq compaction", 10)  # set as it starts
    finally:
        parent.kill()
        parent.wait()
    poll_for(lambda: gone(child), 10)
