"""The supervisor's listening sockets (processes/supervision/ports.py): bound before any
child starts, handed to the children, closed together."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from shardq.config import Config
from shardq.processes.supervision.ports import ListenError, Ports


def taken_port() -> socket.socket:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    return holder


def test_a_front_end_port_taken_is_one_line_and_closes_the_ports_bound_before_it(
    tmp_path: Path,
) -> None:
    with taken_port() as holder:
        port = holder.getsockname()[1]
        config = Config(port=0, kestrel_port=0, workq_port=port)
        ports = Ports(config, None)
        with pytest.raises(ListenError) as raised:
            ports.bind_fronts(config, str(tmp_path))
    assert str(raised.value) == (
        f"workq: cannot listen on 127.0.0.1:{port}: Address already in use"
    )
    assert ports.fronts["kestrel"].fileno() == -1  # bound first, closed with the failure
    ports.close()
    assert ports.listener.fileno() == -1


def test_the_serving_processes_get_the_public_port_and_the_private_one(
    tmp_path: Path,
) -> None:
    config = Config(port=0)
    ports = Ports(config, None)
    ports.bind_fronts(config, str(tmp_path))  # no front-end on: no private socket either
    assert (ports.serving_fds(), ports.private_fd()) == ((ports.listener.fileno(),), -1)
    ports.close()
    config = Config(port=0, kestrel_port=0)
    ports = Ports(config, None)
    ports.bind_fronts(config, str(tmp_path))
    assert ports.private is not None
    assert ports.serving_fds() == (ports.listener.fileno(), ports.private.fileno())
    assert ports.private_fd() == ports.private.fileno()
    ports.close()
    assert [s.fileno() for s in (ports.listener, ports.private, *ports.fronts.values())] == [-1] * 3
