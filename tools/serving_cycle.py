"""The serving process's own cost per command, in one process with no load tool beside it.

A real `ServingProcess` hosting a real shard (its links bound in a temp run dir, no
other process: ids come from one large block given to it up front) serves C client
connections made with socketpair(). Each round every client sends its next command of a
put / reserve-with-timeout 0 / delete cycle (a third of them at each step, so a turn
carries a mix, as under `bload -w mixed`), the serving process runs turns until every client has
its reply, and only the serving process's turns are timed. So the figure is the serving path
(epoll, recv, the commands, the engine, send), without the clients' CPU or a machine's
other load, and repeatable: the best of R repetitions is printed in µs per command, as the
turns' wall time and as CPU time (`time.process_time`, which a busy machine does not distort
much, taken over the whole loop: it includes the clients' send and recv, the same for every
build; read around each turn it would add ≈ 2.6 µs, a system call on this VM). With
`--conns 1` every command is a turn of its own, as for one client that waits for each answer:
the turn's fixed cost is paid per command. The cyclic collector is tuned as in a server
process (`collector.tune`); Python's default would run a young pass every 700 allocations.

    python tools/serving_cycle.py [--conns C] [--rounds N] [--repeat R] [--profile]

`--profile`: run once under cProfile and print the top functions by own time.
"""

from __future__ import annotations

import argparse
import cProfile
import logging
import pstats
import socket
import statistics
import tempfile
import time

from shardq.config import load_config
from shardq.processes.common import collector
from shardq.processes.serving.conn import Conn
from shardq.processes.serving.loop import ServingProcess
from shardq.processes.shard.core import ShardCore
from shardq.processes.supervision.children import serving_settings

BODY = b"x" * 100
PUT = b"put 0 0 60 %d\r\n%s\r\n" % (len(BODY), BODY)
RESERVE = b"reserve-with-timeout 0\r\n"

log = logging.getLogger("serving_cycle")


def make_serving(run_dir: str) -> tuple[ServingProcess, socket.socket]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    config = load_config("", {"shards": 1, "serving": 1})
    settings = serving_settings(config, run_dir, 0, (listener.detach(), -1, -1))
    serving_proc = ServingProcess(settings, ShardCore(0, True))
    serving_proc.ids.give(0, range(1, 1 << 40))  # ids at hand: no coordinator to lease from
    serving_proc.accepting = True
    # Its links have no peers here; a server's are up. Left down, they would be retried in
    # every turn (≈ 7k instructions a turn: a one-connection figure 18 % too high).
    serving_proc.retrying.clear()
    return serving_proc, listener


def connect(serving_proc: ServingProcess, n: int) -> list[socket.socket]:
    """n client connections, registered with the serving process as accepted ones are."""
    clients = []
    for i in range(n):
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        conn = Conn(i + 1, ours, 65535)
        serving_proc.conns[conn.id] = conn
        serving_proc.interest(conn)
        clients.append(theirs)
    return clients


def run(conns: int, rounds: int) -> tuple[float, float]:
    """Seconds of serving process turns per command: wall time, CPU time."""
    with tempfile.TemporaryDirectory() as run_dir:
        serving_proc, _listener = make_serving(run_dir)
        clients = connect(serving_proc, conns)
        step = [i % 3 for i in range(conns)]  # 0 put, 1 reserve, 2 delete
        held: list[bytes] = [b""] * conns
        busy = 0.0
        commands = 0
        cpu_started = time.process_time()
        for _ in range(rounds):
            for i, client in enumerate(clients):
                s = step[i]
                if s == 0:
                    client.send(PUT)
                elif s == 1:
                    client.send(RESERVE)
                else:
                    client.send(b"delete %s\r\n" % held[i] if held[i] else RESERVE)
            commands += conns
            waiting = set(range(conns))
            while waiting:
                started = time.perf_counter()
                serving_proc.turn()
                busy += time.perf_counter() - started
                for i in list(waiting):
                    try:
                        reply = clients[i].recv(65536)
                    except BlockingIOError:
                        continue
                    if reply:
                        waiting.discard(i)
                        if reply.startswith(b"RESERVED"):
                            held[i] = reply.split(b" ", 2)[1]
                        elif reply.startswith(b"DELETED"):
                            held[i] = b""
                        step[i] = (step[i] + 1) % 3
            for client in clients:
                client.setblocking(False)
        cpu = time.process_time() - cpu_started
        for client in clients:
            client.close()
        return busy / commands, cpu / commands


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conns", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    collector.tune()  # the collector as a server process has it (young passes 20,000 apart)
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(run, args.conns, args.rounds)
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)
        return
    runs = [run(args.conns, args.rounds) for _ in range(args.repeat)]
    walls = [wall * 1e6 for wall, _cpu in runs]
    cpus = [cpu * 1e6 for _wall, cpu in runs]
    log.info(
        "serving path, %d connections, put/reserve/delete, us per command: wall best %.2f "
        "median %.2f; CPU best %.2f median %.2f (%d x %d rounds)",
        args.conns,
        min(walls),
        statistics.median(walls),
        min(cpus),
        statistics.median(cpus),
        args.repeat,
        args.rounds,
    )


if __name__ == "__main__":
    main()
