"""The ports the supervisor holds for its children, bound before any of them starts: the
beanstalk listening socket (so `-p 0` is resolved first and a restarted serving process
keeps the port), the protocol front-ends' (Kestrel, Workq, bunqueue) with the run
directory's private socket through which they reach the serving processes, and the
metrics endpoint's; which of them each child is given, and the lines on stdout that name
them (an interface: tests and tools parse them, `shardq.bench.procs`)."""

from __future__ import annotations

import os
import socket

from shardq.config import Config, split_host_port
from shardq.log import output_line
from shardq.metrics import ADDRESS_FILE
from shardq.processes.common.listener import (
    bind_listener,
    close_listener,
    describe,
    listening_address,
    why,
)
from shardq.processes.common.sockpath import socket_path
from shardq.processes.supervision.children import PRIVATE_SOCKET

#: The line on stdout that says the server serves (`shardq.bench.procs.listening_port`).
LISTENING = "shardq listening on {host}:{port}"
#: The next lines, one per protocol front-end that is on (`shardq.bench.procs.kestrel_port`,
#: `workq_port`): "shardq kestrel listening on ...", then "shardq workq listening on ...".
FRONT_LISTENING = "shardq {name} listening on {host}:{port}"
#: The metrics endpoint's line, after those (`shardq.bench.procs.metrics_port`).
METRICS_LISTENING = "shardq metrics listening on {host}:{port}"


class ListenError(Exception):
    """A front-end's (Kestrel) or the metrics endpoint's address cannot be listened on
    (str(): one line)."""


class Ports:
    """The server's listening sockets."""

    def __init__(self, config: Config, listen_fd: int | None) -> None:
        """The beanstalk port (`listen_fd`: bound by the CLI before the exec; None: bound
        here) and the metrics endpoint's: both before -u, which `Supervisor` applies next.
        The front-ends' come once the run directory is made (`bind_fronts`)."""
        if listen_fd is None:
            self.listener = bind_listener(config.listen, config.port)  # first: it may fail
        else:
            self.listener = socket.socket(fileno=listen_fd)
        self.metrics: socket.socket | None = None  # the metrics endpoint's HTTP port
        if config.metrics_listen is not None:  # bound before -u, as the beanstalk port
            self.metrics = bind_metrics(config.metrics_listen)
        #: the protocol front-ends' listening sockets, by name (kestrel, workq, bunqueue)
        self.fronts: dict[str, socket.socket] = {}
        self.private: socket.socket | None = None  # the run dir's socket they reach us on

    def bind_fronts(self, config: Config, run_dir: str) -> None:
        """Each protocol front-end's listening socket that is on (kestrel.listen/port,
        workq..., bunqueue...), and the unix socket in `run_dir` through which the
        front-ends reach the serving processes whatever the public port asks (TLS,
        allow-list). ListenError: one cannot be bound (those bound so far are closed)."""
        for name, host, port in (
            ("kestrel", config.kestrel_listen, config.kestrel_port),
            ("workq", config.workq_listen, config.workq_port),
            ("bunqueue", config.bunqueue_listen, config.bunqueue_port),
        ):
            if port is None:
                continue
            try:
                self.fronts[name] = bind_listener(host, port)
            except OSError as e:
                for sock in self.fronts.values():
                    close_listener(sock)
                raise ListenError(
                    f"{name}: cannot listen on {describe(host, port)}: {why(e)}"
                ) from None
            if self.private is None:
                path = socket_path(os.path.join(run_dir, PRIVATE_SOCKET))
                self.private = bind_listener(f"unix:{path}", 0)

    def serving_fds(self) -> tuple[int, ...]:
        """What every serving process is given: the public socket, and the private one."""
        fds = (self.listener.fileno(),)
        return fds if self.private is None else (*fds, self.private.fileno())

    def private_fd(self) -> int:
        """The private socket's descriptor (-1: none, no front-end is on)."""
        return -1 if self.private is None else self.private.fileno()

    def write_metrics_address(self, run_dir: str) -> None:
        """The metrics port in RUN_DIR/metrics-address (with port 0: which one)."""
        assert self.metrics is not None
        host, port = listening_address(self.metrics)
        path = os.path.join(run_dir, ADDRESS_FILE)
        with open(path + ".tmp", "w") as f:
            f.write(f"{host}:{port}\n")
        os.replace(path + ".tmp", path)

    def say_listening(self, log_format: str) -> None:
        """``shardq listening on HOST:PORT`` on stdout, and one line per other port."""
        lines = [LISTENING.format(host=h, port=p) for h, p in [listening_address(self.listener)]]
        for name, sock in self.fronts.items():
            host, port = listening_address(sock)
            lines.append(FRONT_LISTENING.format(name=name, host=host, port=port))
        if self.metrics is not None:
            host, port = listening_address(self.metrics)
            lines.append(METRICS_LISTENING.format(host=host, port=port))
        for line in lines:
            print(output_line(line, "supervisor", log_format), flush=True)

    def close(self) -> None:
        """Every listening socket (a unix socket's file with it)."""
        close_listener(self.listener)
        for extra in (*self.fronts.values(), self.private, self.metrics):
            if extra is not None:
                close_listener(extra)


def bind_metrics(address: str) -> socket.socket:
    """The metrics endpoint's listening socket (start.py tried it already: this fails only
    if the address was taken meanwhile)."""
    try:
        return bind_listener(*split_host_port(address))
    except OSError as e:
        raise ListenError(f"metrics.listen: cannot listen on {address}: {why(e)}") from None
