"""TLS on the beanstalk port (``--tls-cert``/``--tls-key``), and mutual TLS
(``--tls-client-ca``): a real client (greenstalk over an ``ssl`` socket) puts and reserves
through it, with one serving process and with several (a TLS connection is never handed
to another process: its state cannot move); a client that speaks plain text, or that has
no certificate when one is required, is closed; bad TLS settings stop start-up with one
line naming the key.

The certificates are made here with the ``openssl`` command (EC keys: fast).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from pathlib import Path

import greenstalk
import pytest
from helpers import LAYOUTS, Layout, make_cert

from shardq.start import EXIT_CONFIG


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("certs")
    server_cert, server_key = make_cert(d, "server", "127.0.0.1")
    client_cert, client_key = make_cert(d, "client", "127.0.0.2")
    return {
        "server_cert": server_cert,
        "server_key": server_key,
        "client_cert": client_cert,
        "client_key": client_key,
    }


def tls_socket(port: int, certs: dict[str, Path], with_cert: bool = False) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(certs["server_cert"]))
    if with_cert:
        context.load_cert_chain(str(certs["client_cert"]), str(certs["client_key"]))
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def tls_args(certs: dict[str, Path], layout: Layout) -> tuple[str, ...]:
    return (
        "--tls-cert",
        str(certs["server_cert"]),
        "--tls-key",
        str(certs["server_key"]),
        "--serving",
        str(layout.serving),
    )


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_a_tls_client_puts_and_reserves(shardq_server, certs, layout: Layout) -> None:
    srv = shardq_server(layout.shards, tls_args(certs, layout))
    with greenstalk.Client(tls_socket(srv.port, certs), use="t1", watch=["t1", "t2"]) as c:
        with greenstalk.Client(tls_socket(srv.port, certs), use="t2") as producer:
            producer.put("over TLS " * 1000, priority=1)  # bigger than one TLS record
        c.put("second")
        first = c.reserve(timeout=5)
        assert first.body == "over TLS " * 1000
        c.delete(first)
        c.delete(c.reserve(timeout=5))
        assert c.stats()["current-connections"] == 1
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as plain:
        plain.sendall(b"stats\r\n")  # not TLS: the handshake fails, the connection closes
        with contextlib.suppress(ConnectionResetError):  # a reset says the same
            assert plain.recv(100) in (b"", b"\x15\x03\x01\x00\x02\x02\x32")  # EOF or an alert


def test_mutual_tls_needs_a_client_certificate(shardq_server, certs) -> None:
    extra = (*tls_args(certs, Layout(1)), "--tls-client-ca", str(certs["client_cert"]))
    srv = shardq_server(1, extra)
    with greenstalk.Client(tls_socket(srv.port, certs, with_cert=True)) as c:
        assert c.put("with a certificate") == 1
        assert c.reserve(timeout=5).body == "with a certificate"
    # TLS 1.3: the handshake completes on the client's side before the server checks the
    # certificate, so the refusal shows on the first read
    refused = (OSError, greenstalk.UnknownResponseError)  # SSL errors, resets, ENOTCONN
    with pytest.raises(refused), greenstalk.Client(tls_socket(srv.port, certs)) as anonymous:
        anonymous.put("no certificate")


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--tls-cert", "server_cert"), "flag --tls-cert (tls.cert): needs tls.key as well"),
        (
            ("--tls-cert", "server_key", "--tls-key", "server_key"),
            "flag --tls-cert (tls.cert): cannot load",
        ),
        (("--tls-client-ca", "client_cert"), "flag --tls-client-ca (tls.client_ca): needs"),
    ],
    ids=["no-key", "not-a-cert", "ca-alone"],
)
def test_bad_tls_settings_are_one_line(shardq_launch, certs, flags, says) -> None:
    args = tuple(str(certs[a]) if a in certs else a for a in flags)
    proc, *_rest, stderr_path = shardq_launch(1, args)
    out, _ = proc.communicate(timeout=20)
    assert (proc.returncode, out) == (EXIT_CONFIG, b"")
    lines = stderr_path.read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"shardq: {says}"), lines


def test_a_handshake_that_stalls_is_closed_after_the_timeout(shardq_server, certs, tmp_path):
    """Clients that open a TLS connection and send nothing, or half a handshake, are closed
    once tls.handshake_timeout passes (they held 48 KB each for ever); one that finishes its
    handshake in time is served, and the server's other clients never notice."""
    config = tmp_path / "tls.yaml"
    config.write_text("tls:\n  handshake_timeout: 1\n")
    srv = shardq_server(1, (*tls_args(certs, Layout(1)), "--config", str(config)))
    silent = [socket.create_connection(("127.0.0.1", srv.port), timeout=30) for _ in range(20)]
    half = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    half.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # the start of a ClientHello
    with greenstalk.Client(tls_socket(srv.port, certs)) as c:
        c.put("in time")
        for sock in [*silent, half]:
            with contextlib.suppress(ConnectionResetError):
                assert sock.recv(100) in (b"", b"\x15\x03\x01\x00\x02\x02\x28")  # EOF or alert
            sock.close()
        assert c.reserve(timeout=5).body == "in time"  # still served after the others went
        assert c.stats()["current-connections"] == 1


def test_handshake_timeout_must_be_a_positive_number(shardq_launch, certs, tmp_path) -> None:
    """A bad tls.handshake_timeout stops the start with one line naming it."""
    config = tmp_path / "tls.yaml"
    config.write_text("tls:\n  handshake_timeout: 0\n")
    proc, *_rest, stderr_path = shardq_launch(
        1, (*tls_args(certs, Layout(1)), "--config", str(config))
    )
    out, _ = proc.communicate(timeout=30)
    assert (proc.returncode, out) == (EXIT_CONFIG, b"")
    lines = stderr_path.read_text().splitlines()
    assert len(lines) == 1 and "tls.handshake_timeout" in lines[0], lines
