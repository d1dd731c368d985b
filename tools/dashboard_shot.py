#!/usr/bin/env python3
"""docs/dashboard.png: a screenshot of the metrics dashboard of a server under some load.

Starts ``shardq serve --shards 4 --serving 2 --metrics 127.0.0.1:0`` on a free port with a
temporary run directory, runs producers and consumers on a few tubes (at a bounded rate, for
a bounded time: loopback only), lets headless Chromium keep the page open for `--seconds` of
its virtual time (the page polls /api/summary every second and charts what it saw), then
writes the screenshot and stops the server by its pid.

    .venv/bin/python tools/dashboard_shot.py --out docs/dashboard.png
"""

from __future__ import annotations

import argparse
import logging
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from shardq.bench.procs import terminate, wait_listening

log = logging.getLogger("dashboard_shot")
TUBES = ("emails", "thumbnails", "reports", "webhooks")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def command(sock: socket.socket, line: bytes) -> bytes:
    sock.sendall(line)
    data = b""
    while not data.endswith(b"\r\n") or data.startswith(b"RESERVED") and data.count(b"\r\n") < 2:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed")
        data += chunk
    return data


def producer(port: int, tube: str, rate: float, stop: threading.Event) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        command(sock, f"use {tube}\r\n".encode())
        while not stop.is_set():
            delay = 30 if random.random() < 0.05 else 0
            command(sock, f"put {random.randint(0, 2000)} {delay} 60 5\r\nhello\r\n".encode())
            time.sleep(random.expovariate(rate))


def consumer(port: int, tube: str, work_s: float, stop: threading.Event) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        command(sock, f"watch {tube}\r\n".encode())
        while not stop.is_set():
            reply = command(sock, b"reserve-with-timeout 1\r\n")
            if not reply.startswith(b"RESERVED"):
                continue
            job = int(reply.split()[1])
            time.sleep(random.expovariate(1 / work_s))
            verb = "bury" if random.random() < 0.02 else "delete"
            command(sock, f"{verb} {job}{' 0' if verb == 'bury' else ''}\r\n".encode())


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/dashboard.png"))
    parser.add_argument("--seconds", type=int, default=60, help="page time before the shot")
    args = parser.parse_args()
    run_dir = Path(tempfile.mkdtemp(prefix="shardq-shot-")) / "run"
    cmd = [sys.executable, "-m", "shardq", "serve", "-l", "127.0.0.1", "-p", "0"]
    cmd += ["--shards", "4", "--serving", "2", "--run-dir", str(run_dir)]
    cmd += ["--metrics", "127.0.0.1:0"]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, start_new_session=True)
    try:
        port, _ = wait_listening(server, 20)
        assert port is not None, "the server did not start"
        metrics = int((run_dir / "metrics-address").read_text().strip().rsplit(":", 1)[1])
        stop = threading.Event()
        workers = []
        for i, tube in enumerate(TUBES):
            rate = 40.0 / (i + 1)
            workers.append(threading.Thread(target=producer, args=(port, tube, rate, stop)))
            for _ in range(2):
                work = 0.02 * (i + 1) ** 2
                workers.append(threading.Thread(target=consumer, args=(port, tube, work, stop)))
        for worker in workers:
            worker.daemon = True
            worker.start()
        time.sleep(5)  # some backlog first
        with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
            shot = [
                "chromium",
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                f"--virtual-time-budget={args.seconds * 1000}",
                f"--screenshot={args.out.resolve()}",
                "--window-size=1200,1000",
                f"http://127.0.0.1:{metrics}/",
            ]
            subprocess.run(shot, check=True, capture_output=True, timeout=args.seconds + 120)
        log.info("wrote %s", args.out)
        stop.set()
        for worker in workers:
            worker.join(5)
    finally:
        terminate(server, 10, group=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
