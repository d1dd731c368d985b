"""supervision.startup: becoming another user (-u) and the directory checks' wording."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from shardq.processes.supervision.startup import (
    LOCK_FILE,
    StartupError,
    as_user,
    become,
    check_dir,
    find_user,
    lock_dirs,
)


def ids() -> None:
    """A check that reports who runs it, through the StartupError as_user passes back."""
    raise StartupError(repr((os.getuid(), os.geteuid(), os.getgid(), os.getegid(), os.getgroups())))


def test_as_user_becomes_the_user_in_a_fork_and_leaves_this_process_alone() -> None:
    nobody = find_user("nobody")
    me = (os.getuid(), os.geteuid(), os.getgid())
    with pytest.raises(StartupError) as caught:
        as_user(nobody, ids)
    if os.geteuid() == 0:
        groups = sorted(os.getgrouplist("nobody", nobody.gid))
        uid, euid, gid, egid, got_groups = eval(str(caught.value))  # noqa: S307 - our own repr
        assert (uid, euid, gid, egid) == (nobody.uid, nobody.uid, nobody.gid, nobody.gid)
        assert sorted(got_groups) == groups
    else:
        assert str(caught.value).startswith("cannot become user 'nobody': ")
    assert (os.getuid(), os.geteuid(), os.getgid()) == me


def test_become_oneself_changes_nothing() -> None:
    me = pwd.getpwuid(os.getuid())
    become(find_user(me.pw_name))  # no error, even without root
    assert os.getuid() == me.pw_uid


def test_find_user_names_an_unknown_user() -> None:
    with pytest.raises(StartupError, match="^no such user 'no-such-user-here'$"):
        find_user("no-such-user-here")


def test_check_dir_creates_nothing_it_leaves(tmp_path: Path) -> None:
    assert check_dir(str(tmp_path / "a" / "b")) is None
    assert list(tmp_path.iterdir()) == []
    assert check_dir(str(tmp_path)) is None


def test_a_locked_directory_is_refused_with_the_holders_pid(tmp_path):
    wal, run = tmp_path / "wal", tmp_path / "run"
    held = lock_dirs([("-b", str(wal)), ("--run-dir", str(run)), ("same", str(wal))])
    try:
        assert len(held) == 2  # the same directory twice is locked once
        assert (wal / LOCK_FILE).read_text() == f"{os.getpid()}\n"
        for where, path in (("-b", wal), ("--run-dir", run)):
            with pytest.raises(StartupError) as info:
                lock_dirs([(where, str(path))])
            assert str(info.value) == (
                f"{where}: {path} is in use by another shardq server (pid {os.getpid()})"
            )
    finally:
        for fd in held:
            os.close(fd)
    for fd in lock_dirs([("-b", str(wal))]):  # free again once the holder let go
        os.close(fd)
