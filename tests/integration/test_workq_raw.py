"""Raw Workq sessions: every command of the Workq protocol document, its examples replayed
byte for byte (only the times that must be in the future, and the ``created`` times the
server chooses, differ), and every error the document names, each answered while the
connection goes on."""

from __future__ import annotations

import re
import time

import pytest
from workq_server import Workq, add, new_id, workq_server_fixture  # noqa: F401  (the fixture)

DOC_ID = "6ba7b810-9dad-41d1-80b4-00c04fd430c4"  # the document's id, as a version-4 UUID
CREATED = re.compile(rb"created \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\r\n")


def later(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + seconds))


@pytest.mark.parametrize("shards", [1, 4])
def test_the_documents_examples(workq_server, shards: int) -> None:
    server = workq_server(shards)
    c, worker = Workq(server.workq), Workq(server.workq)
    assert (
        c.cmd(
            f"add {DOC_ID} ping 1000 60000 4 -priority=10 -max-attempts=3 -max-fails=1\r\n"
            "pong\r\n".encode()
        )
        == b"+OK\r\n"
    )
    job = c.cmd(f"inspect job {DOC_ID}\r\n".encode())
    assert CREATED.sub(b"", job) == (
        f"+OK 1\r\n{DOC_ID} 12\r\nname ping\r\nttr 1000\r\nttl 60000\r\npayload-size 4\r\n"
        "payload pong\r\nmax-attempts 3\r\nattempts 0\r\nmax-fails 1\r\nfails 0\r\n"
        "priority 10\r\nstate 0\r\n".encode()
    )
    assert (
        c.cmd(b"inspect queue ping\r\n") == b"+OK 1\r\nping 2\r\nready-len 1\r\nscheduled-len 0\r\n"
    )
    assert worker.cmd(b"lease ping1 ping2 ping 60000\r\n") == (
        f"+OK 1\r\n{DOC_ID} ping 1000 4\r\npong\r\n".encode()
    )
    assert worker.cmd(f"complete {DOC_ID} 4\r\npong\r\n".encode()) == b"+OK\r\n"
    assert c.cmd(f"result {DOC_ID} 60000\r\n".encode()) == (
        f"+OK 1\r\n{DOC_ID} 1 4\r\npong\r\n".encode()
    )
    assert c.cmd(f"delete {DOC_ID}\r\n".encode()) == b"+OK\r\n"
    # schedule: the document's time is in the past now; the same command a minute ahead
    sched = "6ba7b810-9dad-41d1-80b4-00c04fd430c7"
    line = f"schedule {sched} ping 1000 60000 {later(60)} 4\r\npong\r\n"
    assert c.cmd(line.encode()) == b"+OK\r\n"
    listed = c.cmd(b"inspect scheduled-jobs ping 0 10\r\n")
    assert listed.startswith(f"+OK 1\r\n{sched} 13\r\nname ping\r\n".encode())
    assert f"time {later(60)[:-3]}".encode() in listed or b"time " in listed
    assert c.cmd(b"inspect jobs ping 0 10\r\n") == b"+OK 0\r\n"  # scheduled: not ready
    assert (
        c.cmd(b"inspect queue ping\r\n") == b"+OK 1\r\nping 2\r\nready-len 0\r\nscheduled-len 1\r\n"
    )
    # run: blocks until a worker completes it
    run_id = new_id()
    c.send(f"run {run_id} ping 1000 60000 4\r\nping\r\n".encode())
    assert (
        worker.cmd(b"lease ping 60000\r\n") == f"+OK 1\r\n{run_id} ping 1000 4\r\nping\r\n".encode()
    )
    assert worker.cmd(f"complete {run_id} 4\r\npong\r\n".encode()) == b"+OK\r\n"
    assert c.reply() == f"+OK 1\r\n{run_id} 1 4\r\npong\r\n".encode()
    assert (
        c.cmd(f"inspect job {run_id}\r\n".encode()) == b"-NOT-FOUND\r\n"
    )  # a run's job ends with it
    server_info = c.cmd(b"inspect server\r\n")
    assert re.fullmatch(
        rb"\+OK 1\r\nserver 3\r\nactive-clients 2\r\nevicted-jobs 0\r\n"
        rb"started \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\r\n",
        server_info,
    ), server_info


def test_fail_and_the_failed_result(workq_server) -> None:
    server = workq_server(1)
    c = Workq(server.workq)
    ident = new_id()
    assert add(c, ident, "q", b"x") == b"+OK\r\n"
    assert c.cmd(b"lease q 1000\r\n") == f"+OK 1\r\n{ident} q 1000 1\r\nx\r\n".encode()
    assert c.cmd(f"fail {ident} 4\r\noops\r\n".encode()) == b"+OK\r\n"
    assert c.cmd(f"result {ident} 0\r\n".encode()) == f"+OK 1\r\n{ident} 0 4\r\noops\r\n".encode()
    assert c.cmd(f"fail {ident} 0\r\n\r\n".encode()) == b"-CLIENT-ERROR Duplicate result\r\n"
    assert c.cmd(f"complete {ident} 0\r\n\r\n".encode()) == b"-CLIENT-ERROR Duplicate result\r\n"
    job = c.cmd(f"inspect job {ident}\r\n".encode())
    assert b"state 2\r\n" in job and b"fails 1\r\n" in job and b"attempts 1\r\n" in job


def test_inspect_queues_pages_in_name_order(workq_server) -> None:
    server = workq_server(1)
    c = Workq(server.workq)
    for name in ("b", "a", "c"):
        assert add(c, new_id(), name, b"1") == b"+OK\r\n"
    page = c.cmd(b"inspect queues 1 2\r\n")
    assert page == (
        b"+OK 2\r\nb 2\r\nready-len 1\r\nscheduled-len 0\r\n"
        b"c 2\r\nready-len 1\r\nscheduled-len 0\r\n"
    )
    assert c.cmd(b"inspect queues 50 10\r\n") == b"+OK 0\r\n"
    ids = [new_id() for _ in range(3)]
    for i, ident in enumerate(ids):
        assert add(c, ident, "p", b"%d" % i, flags=f"-priority={i}") == b"+OK\r\n"
    listed = c.cmd(b"inspect jobs p 0 2\r\n")  # highest priority first
    heads = re.findall(rb"^([0-9a-f-]{36}) 12\r$", listed, re.M)
    assert heads == [ids[2].encode(), ids[1].encode()]


ERRORS = [
    (b"bogus\r\n", b"-CLIENT-ERROR Unknown command\r\n"),
    (b"\r\n", b"-CLIENT-ERROR Unknown command\r\n"),
    (b"inspect nothing\r\n", b"-CLIENT-ERROR Unknown command\r\n"),
    (b"add x\r\n", b"-CLIENT-ERROR Invalid command args\r\n"),
    (b"delete\r\n", b"-CLIENT-ERROR Invalid command args\r\n"),
    (b"lease 100\r\n", b"-CLIENT-ERROR Invalid command args\r\n"),
    (b"result " + DOC_ID.encode() + b"\r\n", b"-CLIENT-ERROR Invalid command args\r\n"),
    (b"inspect\r\n", b"-CLIENT-ERROR Invalid command args\r\n"),
    (b"inspect queue\r\n", b"-CLIENT-ERROR Invalid command args\r\n"),
    (b"lease q 100 -x=1\r\n", b"-CLIENT-ERROR Invalid command args\r\n"),
    (b"lease q 100 -x=\r\n", b"-CLIENT-ERROR Invalid command flags\r\n"),
    (
        b"add %s q 1 1 1 -priority=1 -priority=2\r\na\r\n" % DOC_ID.encode(),
        b"-CLIENT-ERROR Invalid command flags\r\n",
    ),
    (b"add %s q 1000 1000 x\r\n" % DOC_ID.encode(), b"-CLIENT-ERROR Invalid payload size\r\n"),
    (
        b"add %s q 1000 1000 3\r\nabcd\r\n" % DOC_ID.encode(),
        b"-CLIENT-ERROR Invalid payload size\r\n",
    ),
    (b"fail %s x\r\n" % DOC_ID.encode(), b"-CLIENT-ERROR Invalid result size\r\n"),
    (b"add 1234 q 1000 1000 1\r\na\r\n", b"-CLIENT-ERROR Invalid ID\r\n"),
    (
        b"add 6ba7b810-9dad-11d1-80b4-00c04fd430c4 q 1000 1000 1\r\na\r\n",
        b"-CLIENT-ERROR Invalid ID\r\n",
    ),
    (b"add %s q/r 1000 1000 1\r\na\r\n" % DOC_ID.encode(), b"-CLIENT-ERROR Invalid Name\r\n"),
    (b"add %s q 0 1000 1\r\na\r\n" % DOC_ID.encode(), b"-CLIENT-ERROR Invalid TTR\r\n"),
    (b"add %s q 86400001 1000 1\r\na\r\n" % DOC_ID.encode(), b"-CLIENT-ERROR Invalid TTR\r\n"),
    (b"add %s q 1000 0 1\r\na\r\n" % DOC_ID.encode(), b"-CLIENT-ERROR Invalid TTL\r\n"),
    (b"add %s q 1000 2592000001 1\r\na\r\n" % DOC_ID.encode(), b"-CLIENT-ERROR Invalid TTL\r\n"),
    (
        b"add %s q 1000 1000 1 -priority=x\r\na\r\n" % DOC_ID.encode(),
        b"-CLIENT-ERROR Invalid Priority\r\n",
    ),
    (
        b"add %s q 1000 1000 1 -priority=2147483648\r\na\r\n" % DOC_ID.encode(),
        b"-CLIENT-ERROR Invalid Priority\r\n",
    ),
    (
        b"add %s q 1000 1000 1 -max-attempts=256\r\na\r\n" % DOC_ID.encode(),
        b"-CLIENT-ERROR Invalid Max Attempts\r\n",
    ),
    (
        b"add %s q 1000 1000 1 -max-fails=-1\r\na\r\n" % DOC_ID.encode(),
        b"-CLIENT-ERROR Invalid Max Fails\r\n",
    ),
    (
        b"schedule %s q 1000 1000 2016-06-14T06:46:46Z 1\r\na\r\n" % DOC_ID.encode(),
        b"-CLIENT-ERROR Invalid Time\r\n",
    ),
    (
        b"schedule %s q 1000 1000 tomorrow 1\r\na\r\n" % DOC_ID.encode(),
        b"-CLIENT-ERROR Invalid Time\r\n",
    ),
    (b"lease q 86400001\r\n", b"-CLIENT-ERROR Invalid wait timeout\r\n"),
    (b"result %s soon\r\n" % DOC_ID.encode(), b"-CLIENT-ERROR Invalid wait timeout\r\n"),
    (b"inspect queues x 10\r\n", b"-CLIENT-ERROR Invalid cursor offset\r\n"),
    (b"inspect queues 0 0\r\n", b"-CLIENT-ERROR Invalid limit\r\n"),
    (b"inspect jobs q 0 101\r\n", b"-CLIENT-ERROR Invalid limit\r\n"),
    (b"inspect job %s\r\n" % DOC_ID.encode(), b"-NOT-FOUND\r\n"),
    (b"inspect queue nosuch\r\n", b"-NOT-FOUND\r\n"),
    (b"delete %s\r\n" % DOC_ID.encode(), b"-NOT-FOUND\r\n"),
    (b"complete %s 1\r\nr\r\n" % DOC_ID.encode(), b"-NOT-FOUND\r\n"),
    (b"fail %s 1\r\nr\r\n" % DOC_ID.encode(), b"-NOT-FOUND\r\n"),
    (b"result %s 10\r\n" % DOC_ID.encode(), b"-NOT-FOUND\r\n"),
    (b"lease nothing-here 20\r\n", b"-TIMEOUT\r\n"),
    (b"run %s q 1000 20 1\r\nx\r\n" % DOC_ID.encode(), b"-TIMEOUT\r\n"),
]


@pytest.mark.parametrize(
    ("sent", "answer"), ERRORS, ids=[a.decode().strip() + " " + s.decode()[:30] for s, a in ERRORS]
)
def test_every_error_and_the_connection_goes_on(workq_server, sent: bytes, answer: bytes) -> None:
    server = workq_server(1)
    c = Workq(server.workq)
    assert c.cmd(sent) == answer
    assert add(c, new_id(), "after", b"ok") == b"+OK\r\n"  # in step: the next command works


def test_duplicates_and_a_too_long_line(workq_server) -> None:
    server = workq_server(1)
    c = Workq(server.workq)
    ident = new_id()
    assert add(c, ident, "q", b"a") == b"+OK\r\n"
    assert add(c, ident, "q", b"b") == b"-CLIENT-ERROR Duplicate job\r\n"
    assert c.cmd(f"run {ident} q 1000 10 1\r\nc\r\n".encode()) == b"-CLIENT-ERROR Duplicate job\r\n"
    big = b"x" * 1_048_577  # past 1 MiB: refused, and the block dropped
    assert c.cmd(b"add %s q 1000 1000 %d\r\n%s\r\n" % (new_id().encode(), len(big), big)) == (
        b"-CLIENT-ERROR Invalid payload size\r\n"
    )
    assert c.cmd(b"inspect queue q\r\n") == b"+OK 1\r\nq 2\r\nready-len 1\r\nscheduled-len 0\r\n"
    c.send(b"lease " + b"q" * 20_000 + b"\r\n")  # too long, but it ends: the stream goes on
    assert c.reply() == b"-CLIENT-ERROR Line too long\r\n"
    assert c.cmd(b"inspect queue q\r\n") == b"+OK 1\r\nq 2\r\nready-len 1\r\nscheduled-len 0\r\n"
    c.send(b"lease " + b"q" * 20_000)  # no end in sight: the next command cannot be found
    assert c.reply() == b"-CLIENT-ERROR Line too long\r\n"
    assert c.eof()


def test_pipelined_adds_are_answered_in_order(workq_server) -> None:
    """Adds sent together go to the server as one batch; a repeat inside the batch, a bad
    one and a command of another kind between them are each answered in their place."""
    server = workq_server(4)
    c = Workq(server.workq)
    first, second = new_id(), new_id()

    def line(ident: str, body: bytes = b"x") -> bytes:
        return f"add {ident} pipe 1000 60000 {len(body)}\r\n".encode() + body + b"\r\n"

    c.send(
        line(first)
        + line(first)  # the same id in the same batch
        + line("nope")
        + b"inspect queue pipe\r\n"
        + line(second, b"yy")
    )
    assert [c.reply() for _ in range(5)] == [
        b"+OK\r\n",
        b"-CLIENT-ERROR Duplicate job\r\n",
        b"-CLIENT-ERROR Invalid ID\r\n",
        b"+OK 1\r\npipe 2\r\nready-len 1\r\nscheduled-len 0\r\n",
        b"+OK\r\n",
    ]
    assert c.cmd(b"lease pipe 1000\r\n") == f"+OK 1\r\n{first} pipe 1000 1\r\nx\r\n".encode()
