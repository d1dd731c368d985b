"""What `shardq serve` checks before it binds anything, and `-u USER` after it has bound.

`check_start` looks at every directory the server was given (`-b`, `--run-dir`,
`--events`) and at `-u`'s user (it exists, this
process may become it, and it can run this Python and read shardq), and raises
`StartupError` with ONE line naming the option and the problem. A directory that does not
exist yet is created to prove it can be, probed with a temporary file, and removed again
(the server creates it for real later), so a refused start leaves nothing behind. With
`-u` the directories are checked as that user (in a forked process that has become it),
since that is who will write there.

`become` is beanstalkd's `-u`: after the listening socket is bound, take the user's group
and then its user id, so every file and process from then on belongs to that user.
Unlike beanstalkd it also replaces root's supplementary groups with the user's.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import stat
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from shardq.processes.supervision.spawn import import_root


class StartupError(Exception):
    """A start-up check failed; str() is one line naming the option and the problem."""


class Account:
    __slots__ = ("name", "uid", "gid")

    name: str
    uid: int
    gid: int

    def __init__(self, name: str, uid: int, gid: int) -> None:
        self.name = name
        self.uid = uid
        self.gid = gid


def find_user(name: str) -> Account:
    """The account of user `name`; StartupError if there is none."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise StartupError(f"no such user {name!r}") from None
    return Account(entry.pw_name, entry.pw_uid, entry.pw_gid)


def become(account: Account) -> None:
    """Take `account`'s groups, group id and user id (in that order: once the user id is
    gone, so is the right to change groups). A no-op if this process already is it."""
    if (os.getuid(), os.geteuid(), os.getgid()) == (account.uid, account.uid, account.gid):
        return
    try:
        if os.geteuid() == 0:
            os.initgroups(account.name, account.gid)
        os.setgid(account.gid)
        os.setuid(account.uid)
    except OSError as e:
        raise StartupError(f"cannot become user {account.name!r}: {e.strerror}") from None


def check_user(name: str) -> Account:
    """`find_user`, and refuse early what `become` could not do (not root)."""
    account = find_user(name)
    if os.geteuid() not in (0, account.uid):
        raise StartupError(f"only root can become another user ({account.name!r})")
    return account


def check_can_run(account: Account) -> None:
    """As `account`: it can run this interpreter and read the shardq it imports (the server's
    children are started as that user)."""
    package = import_root() / "shardq"
    for path, mode, what in (
        (sys.executable, os.X_OK, "run"),
        (package, os.R_OK | os.X_OK, "read"),
    ):
        if not os.access(path, mode):
            raise StartupError(f"user {account.name!r} cannot {what} {path}")


def check_dir(path: str) -> str | None:
    """Why the server could not use `path` as a directory it writes in, or None if it can.
    Directories created to find out are removed again."""
    target = Path(os.path.abspath(path))
    missing = []
    existing = target
    while not os.path.lexists(existing):
        missing.append(existing)
        existing = existing.parent
    if not existing.is_dir():
        if not missing:
            return f"{path} exists but is not a directory"
        return f"{path} cannot be created: {existing} is not a directory"
    created: list[Path] = []
    try:
        for directory in reversed(missing):
            try:
                directory.mkdir()
            except OSError as e:
                where = "" if directory == target else f"{directory}: "
                return f"{path} cannot be created: {where}{e.strerror}"
            created.append(directory)
        import tempfile  # here, with a directory to check: not at every start (≈ 5 ms)

        try:
            with tempfile.TemporaryFile(dir=target):
                pass
        except OSError as e:
            return f"{path} is not writable: {e.strerror}"
        return None
    finally:
        for directory in reversed(created):
            # fails only if something else put a file there meanwhile: not ours to remove
            with contextlib.suppress(OSError):
                directory.rmdir()


def check_dirs(dirs: Sequence[tuple[str, str]]) -> None:
    """Each of (where, path) usable, else StartupError "<where>: <problem>" for the first."""
    for where, path in dirs:
        problem = check_dir(path)
        if problem is not None:
            raise StartupError(f"{where}: {problem}")


def as_user(account: Account | None, check: Callable[[], None]) -> None:
    """Run `check` as `account` (in a forked process that becomes it; here if None); its
    StartupError is raised here."""
    if account is None:
        check()
        return
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: become the user, check, report, and leave at once
        message = ""
        try:
            os.close(read_end)
            become(account)
            check()
        except StartupError as e:
            message = str(e)
        except BaseException as e:  # noqa: BLE001 - reported to the parent, which decides
            message = f"start-up check failed: {e!r}"
        finally:
            os.write(write_end, message.encode(errors="replace"))
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        message = reader.read().decode(errors="replace")
    os.waitpid(pid, 0)
    if message:
        raise StartupError(message)


def check_start(dirs: Sequence[tuple[str, str]], user: tuple[str, str] | None = None) -> None:
    """Every check before binding: `user` (where, name) exists and can be become, and the
    directories (where, path) are usable by it. Raises StartupError naming the first
    problem. (A log of another shard count is the config's to refuse: config.read_config.)"""
    account = None
    if user is not None:
        where, name = user
        try:
            account = check_user(name)
        except StartupError as e:
            raise StartupError(f"{where}: {e}") from None

    def checks() -> None:
        check_dirs(dirs)
        if user is not None and account is not None:
            try:
                check_can_run(account)
            except StartupError as e:
                raise StartupError(f"{user[0]}: {e}") from None

    as_user(account, checks)


#: The file in a locked directory (`-b`, `--run-dir`) that holds the lock and the pid of
#: the server that holds it.
LOCK_FILE = "shardq.lock"


def lock_dirs(dirs: Sequence[tuple[str, str]], user: str | None = None) -> list[int]:
    """One server per directory: take an exclusive advisory lock (flock) on LOCK_FILE in
    each of (where, path), and write this process's pid into it. The descriptors are
    returned inheritable, so the lock survives the exec into the supervisor (same pid)
    and is held for the server's life; the supervisor's children do not inherit them
    (subprocess closes other descriptors), so a restarted child is never refused.
    A directory that does not exist yet is created (as `user`'s with -u).
    Raises StartupError "<where>: <path> is in use by another shardq server (pid N)"."""
    account = find_user(user) if user is not None else None
    held: list[int] = []
    seen: set[str] = set()
    try:
        for where, path in dirs:
            real = os.path.realpath(path)
            if real in seen:  # -b and --run-dir the same: one lock (a second would conflict)
                continue
            seen.add(real)
            held.append(_lock_dir(where, path, account))
    except BaseException:
        for fd in held:
            os.close(fd)
        raise
    return held


def _lock_dir(where: str, path: str, account: Account | None) -> int:
    if not os.path.isdir(path):
        try:
            os.makedirs(path, exist_ok=True)
            if account is not None and os.geteuid() == 0:
                os.chown(path, account.uid, account.gid)
        except OSError as e:
            raise StartupError(f"{where}: {path} cannot be created: {e.strerror}") from None
    lock_path = os.path.join(path, LOCK_FILE)
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise StartupError(f"{where}: cannot open {lock_path}: {e.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise StartupError(
            f"{where}: {path} is in use by another shardq server (pid {holder})"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    if account is not None and os.geteuid() == 0:
        os.fchown(fd, account.uid, account.gid)
    os.set_inheritable(fd, True)
    return fd


def private_temp_dir(prefix: str) -> str:
    """A new directory that only we can use, under $TMPDIR (else $TEMP, $TMP, /tmp), named
    `prefix` and random characters: what tempfile.mkdtemp makes, without importing tempfile
    (≈ 5 ms of every start). OSError if none can be made."""
    base = os.environ.get("TMPDIR") or os.environ.get("TEMP") or os.environ.get("TMP") or "/tmp"
    while True:
        path = os.path.join(base, prefix + os.urandom(6).hex())
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return path


def make_private(where: str, path: str) -> None:
    """Leave the run directory (the inter-process sockets) open to the server's user only,
    whatever the umask: another local user who can reach those sockets can send any
    process of the server anything. A directory of the server's own is set to 0700; a
    shared one (sticky, like /tmp) or another user's is refused."""
    st = os.stat(path)
    if st.st_mode & 0o077 == 0:
        return
    mode = oct(stat.S_IMODE(st.st_mode))
    if st.st_mode & stat.S_ISVTX or (os.geteuid() != 0 and st.st_uid != os.geteuid()):
        raise StartupError(
            f"{where}: {path} is shared with other users (mode {mode}); "
            "give a directory only the server uses"
        )
    try:
        os.chmod(path, 0o700)
    except OSError as e:
        raise StartupError(f"{where}: {path} cannot be made private: {e.strerror}") from None
