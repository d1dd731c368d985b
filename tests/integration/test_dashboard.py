"""The dashboard (``/`` of --metrics) in a real browser: headless Chromium loads the page,
which polls /api/summary; the numbers it rendered (elements with stable ids and data
attributes) are the ones `stats` and `stats-tube` give over the protocol, in one format;
each tube names its shard and the process that runs it; the charts fill from the left and
their lines differ in colour and dash. Chromium is installed by `make test`; missing, this
test skips locally and fails under CI."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from zlib import crc32

from helpers import connect, metrics_port, read_replies, send, skip_or_fail, tube_on_shard
from test_metrics import ask, put, reserve, yaml_of

CHROMIUM_HINT = "Chromium is required under CI: apt-get install -y chromium (make test does)"
CHROMIUM_TIMEOUT_S = 90.0
#: the flags every run needs here: no sandbox (root), nothing fetched but the page
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
#: the totals shown as cards, by stats key
CARDS = (
    "current-jobs-ready",
    "current-jobs-reserved",
    "current-jobs-delayed",
    "current-jobs-buried",
    "current-connections",
    "current-waiting",
    "total-jobs",
)
#: The one number format: thousands separators; a decimal only below 10, never a 0 one.
NUMBER = re.compile(r"-|0|\d\.[1-9]|[1-9]\d{0,2}(,\d{3})*")
#: What the rate chart's lines are called (data-series), put over reserve over delete.
RATE_LINES = {"put", "reserve", "delete"}
#: SVG user units across a chart (its viewBox)
CHART_W = 600.0
TUBE_FIELDS = (
    "current-jobs-ready",
    "current-jobs-urgent",
    "current-jobs-reserved",
    "current-jobs-delayed",
    "current-jobs-buried",
    "current-waiting",
    "current-watching",
    "total-jobs",
)


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        skip_or_fail(CHROMIUM_HINT)
    return path


def run_chromium(url: str, *extra: str) -> str:
    """Load `url` for 5 s of virtual time, with `extra` flags (--dump-dom, --screenshot);
    what Chromium printed (with --dump-dom: the DOM as it then is)."""
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        argv = [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
        argv += ["--virtual-time-budget=5000", *extra, url]
        done = subprocess.run(
            argv, capture_output=True, timeout=CHROMIUM_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done.stdout.decode()


class Page(HTMLParser):
    """What the dashboard rendered: text by element id, tube rows and process rows (their
    cells by data-field), and the body's data-updates."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.by_id: dict[str, str] = {}
        self.tubes: dict[str, dict[str, str]] = {}
        self.roles: dict[str, dict[str, str]] = {}
        #: chart svg id -> its polylines' attributes
        self.charts: dict[str, list[dict[str, str]]] = {}
        self.legend: dict[str, str] = {}  #: chart legend: series -> its text
        self.updates = 0
        self._chart: str | None = None
        self._series: str | None = None
        self._id: str | None = None
        self._row: dict[str, str] | None = None
        self._field: str | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "body":
            self.updates = int(a.get("data-updates", "0"))
        if "id" in a:
            self._id = a["id"]
            self.by_id[self._id] = ""
        if tag == "svg" and a.get("id", "").startswith("chart-"):
            self._chart = a["id"]
            self.charts[self._chart] = []
        if tag == "polyline" and self._chart is not None:
            self.charts[self._chart].append(a)
        if tag == "span" and "data-series" in a:
            self._series = a["data-series"]
            self.legend[self._series] = ""
        if tag == "tr" and "data-tube" in a:
            self._row = self.tubes[a["data-tube"]] = {}
        elif tag == "tr" and "data-role" in a:
            self._row = self.roles[a["data-role"]] = {"@pid": a.get("data-pid", "")}
        if tag == "td" and self._row is not None:
            self._field = a.get("data-field")

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self._chart = None
        if tag == "span":
            self._series = None
        if tag == "tr":
            self._row = None
        if tag == "td":
            self._field = None
        self._id = None

    def handle_data(self, data: str) -> None:
        if self._series is not None:
            self.legend[self._series] += data
        if self._id is not None:
            self.by_id[self._id] += data
        if self._row is not None and self._field is not None:
            self._row[self._field] = self._row.get(self._field, "") + data


def number(text: str) -> int:
    return int(text.replace(",", ""))


def xs(line: dict[str, str]) -> list[float]:
    return [float(point.split(",")[0]) for point in line["points"].split()]


def check_charts(page: Page) -> None:
    """Both charts span the width from the first answer on (the jobs chart from x 0: it has
    a value from the first answer; rates from the second); the rate lines are told apart."""
    jobs = page.charts["chart-jobs"]
    assert jobs and all(min(xs(line)) == 0 and max(xs(line)) == CHART_W for line in jobs)
    rates = page.charts["chart-rates"]
    step = CHART_W / (page.updates - 1)
    for line in rates:
        assert min(xs(line)) <= step + 0.1 and max(xs(line)) == CHART_W, line["data-series"]
    assert {line["data-series"] for line in rates} == RATE_LINES
    assert len({line["stroke"] for line in rates}) == len(RATE_LINES)
    assert len({line["stroke-dasharray"] for line in rates}) == len(RATE_LINES)
    assert set(page.legend) >= RATE_LINES


def load(sock: socket.socket, shards: int) -> list[str]:
    """A few tubes with jobs in every state, one reservation held by `sock`."""
    tubes = [tube_on_shard(i % shards, shards, f"dash{i}-") for i in range(3)]
    for i, tube in enumerate(tubes):
        put(sock, tube, 4 + i)
    put(sock, tubes[1], 2, delay=300)
    job = reserve(sock, tubes[0])
    assert ask(sock, f"delete {job}") == b"DELETED\r\n"
    job = reserve(sock, tubes[2])
    assert ask(sock, f"bury {job} 0") == b"BURIED\r\n"
    reserve(sock, tubes[2])  # held
    send(sock, f"watch {tubes[0]}\r\n".encode())
    read_replies(sock, 1)
    return tubes


def test_dashboard_shows_what_stats_says(shardq_server: Callable[..., Any], tmp_path: Path) -> None:
    chromium()
    server = shardq_server(shards=4, extra=("--serving", "2", "--metrics", "127.0.0.1:0"))
    port = metrics_port(server.run_dir)
    sock = connect(server.port)
    tubes = load(sock, 4)
    shot = tmp_path / "dashboard.png"
    run_chromium(f"http://127.0.0.1:{port}/", f"--screenshot={shot}", "--window-size=1200,800")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = Page(run_chromium(f"http://127.0.0.1:{port}/", "--dump-dom"))
    stats = yaml_of(ask(sock, "stats"))
    assert page.updates >= 2, "the page polled /api/summary more than once"
    for key in CARDS:
        assert number(page.by_id[f"stat-{key}"]) == int(stats[key]), key
    assert page.by_id["server-pid"] == stats["pid"] == str(server.pid)
    assert page.by_id["server-version"] == stats["version"].strip('"')
    assert page.by_id["server-shards"] == "4" and page.by_id["server-serving"] == "2"
    assert page.by_id["health"] == "healthy"
    assert set(page.tubes) == set(tubes) | {"default"}
    for tube in tubes:
        fields = yaml_of(ask(sock, f"stats-tube {tube}"))
        row = page.tubes[tube]
        for key in TUBE_FIELDS:
            assert number(row[key]) == int(fields[key]), (tube, key)
    assert page.tubes[tubes[0]]["wait-p50"].endswith("ms")  # one job waited, put → reserve
    hosts = ["serving 0", "serving 1", "shard 2"]  # 2 serving processes host shards 0 and 1
    for i, tube in enumerate(tubes):
        assert (page.tubes[tube]["shard"], page.tubes[tube]["host"]) == (str(i), hosts[i])
    default = crc32(b"default") % 4  # as the server routes it
    assert page.tubes["default"]["shard"] == str(default)
    host = hosts[default] if default < 2 else f"shard {default}"
    assert page.tubes["default"]["host"] == host
    shown = [page.by_id[f"stat-{key}"] for key in CARDS]
    shown += [page.by_id[f"rate-{key}"] for key in ("cmd-put", "reserves", "cmd-delete")]
    shown += [row[key] for row in page.tubes.values() for key in ("put-rate", "delete-rate")]
    shown += [row[key] for row in page.roles.values() for key in ("cpu-percent", "cpu", "rss")]
    shown += [text.split()[-1] for text in page.legend.values()]
    assert [text for text in shown if not NUMBER.fullmatch(text)] == []
    check_charts(page)
    roles = server.wait_all_children()
    assert set(page.roles) == set(roles) | {"supervisor", "metrics"}
    for role, pid in roles.items():
        assert page.roles[role]["@pid"] == page.roles[role]["pid"] == str(pid)
        assert float(page.roles[role]["rss"]) > 1.0  # MiB
    sock.close()
