"""The Kestrel front-end process: memcache-dialect clients in, beanstalk out.

The loop is the front-ends' own (`frontends/loop.py`); this module adds what is Kestrel's:
pipelined sets sent to the server as one batch, the commands' table (commands.py), and the
janitor that deletes items past their expiry (expiry.py).
"""

from __future__ import annotations

import logging
import signal
import socket
from collections import Counter

from shardq.engine.policy import Policies
from shardq.processes.common import live, wakeup
from shardq.processes.common.door import Gate
from shardq.processes.common.settings import KestrelSettings
from shardq.processes.frontends.kestrel import commands
from shardq.processes.frontends.kestrel.expiry import ExpiryBook
from shardq.processes.frontends.kestrel.fanout import Fanout
from shardq.processes.frontends.kestrel.policy_config import server_config
from shardq.processes.frontends.kestrel.session import KestrelSession
from shardq.processes.frontends.loop import FrontendLoop
from shardq.processes.frontends.session import Session, Task, gather
from shardq.protocol import kestrel as k
from shardq.protocol import kestrel_replies as r

log = logging.getLogger(__name__)


def is_set(cmd: object) -> bool:
    return isinstance(cmd, k.Set)


def next_parsed(s: Session) -> k.Command | None:
    return s.parser.next_command()


class Frontend(FrontendLoop):
    UNAVAILABLE = r.UNAVAILABLE
    OUT_OF_MEMORY = r.OUT_OF_MEMORY

    def __init__(self, settings: KestrelSettings, supervisor: int) -> None:
        """`supervisor`: who gets SIGHUP on `reload`."""
        s = settings
        max_item, max_output = s.max_job_size, s.door.max_output_bytes
        super().__init__(s.listen_fd, s.backend, k.MAX_LINE + max_item + 2, max_output)
        self.max_item = max_item
        #: what dump_config shows for every queue
        self.queue_config = server_config(
            s.max_jobs, s.max_memory, max_item, s.journal, s.sync_journal
        )
        self.supervisor = supervisor
        self.expired: Counter[str] = Counter()  # queue -> items expired
        self.expiry = ExpiryBook()
        self.fanout = Fanout()
        self.fanout.policies = Policies(s.common.tubes)
        live.on_change(self.fanout.take_live)
        if s.journal_dir is not None:
            self.expiry.keep(s.journal_dir, s.sync_journal, self.fanout)
        #: kestrel.admin: flush_all, reload and shutdown are served (off: they are unknown)
        self.admin = s.kestrel_admin
        self.open_ids: set[int] = set()  # jobs open (reserved) by a Kestrel client
        self.janitor: KestrelSession | None = None
        self.janitor_jobs: list[int] = []  # the janitor's last batch of expired jobs

    def new_session(self, sid: int, sock: socket.socket | None, backend: socket.socket) -> Session:
        return KestrelSession(sid, sock, backend, self.max_item)

    def internal_error(self) -> bytes:
        return r.server_error("internal error")

    def next_task(self, s: Session) -> Task | None:
        assert isinstance(s, KestrelSession)
        cmd, s.held = s.held or s.parser.next_command(), None
        if cmd is None:
            return None
        if not self.admin and commands.is_admin(cmd):
            return commands.not_enabled(self, s, cmd)
        if isinstance(cmd, k.Set):  # the sets that follow go with it, in one round trip
            return commands.do_sets(self, s, gather(s, cmd, is_set, next_parsed))
        if isinstance(cmd, k.Simple):
            return commands.SIMPLE[cmd.name](self, s, cmd)
        return commands.HANDLERS[type(cmd)](self, s, cmd)

    def closed(self, s: Session) -> None:
        """The server releases the jobs a closed session held open: they go back to the
        head of their queues."""
        assert isinstance(s, KestrelSession)
        if s is self.janitor:
            self.janitor = None
            self.expiry.again(self.janitor_jobs)  # its connection may have gone midway
            self.janitor_jobs = []
        self.open_ids.difference_update(s.open.values())
        s.open.clear()

    def unsynced(self) -> bool:
        return self.expiry.unsynced()

    def sync(self) -> None:
        self.expiry.sync()

    def count_expired(self, queue: str) -> None:
        if queue:
            self.expired[queue] += 1

    def housekeeping(self) -> None:
        """The janitor: delete jobs past their expiry, a batch at a time, on a connection
        of its own; and the journal's rewrite."""
        self.expiry.tend()
        due = self.expiry.next_due()
        if due is None or due > commands.now_ms():
            return
        if self.janitor is None:
            janitor = self.internal_session()
            if janitor is None:
                return
            assert isinstance(janitor, KestrelSession)
            self.janitor = janitor
        if self.janitor.task is not None:
            return
        jobs = self.expiry.due(commands.now_ms(), commands.EXPIRE_BATCH)
        if jobs:
            self.janitor_jobs = jobs
            self.start(self.janitor, commands.expire(self, self.janitor, jobs))

    def next_due(self) -> float | None:
        due = self.expiry.next_due()
        return None if due is None else (due - commands.now_ms()) / 1000


def main(settings: KestrelSettings, gate: Gate, supervisor: int) -> None:
    """`gate`: who may connect (allow, max_connections, TLS); `supervisor`: who gets
    SIGHUP on `reload`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, wakeup.exit_on_sigterm)
    front = Frontend(settings, supervisor)
    front.gate = gate
    front.serve_forever()
