"""report.html: the per-tube table and inline SVG charts, from the small aggregated rows.

Plain Python (no pyspark, no plotting library): the inputs are already tiny (one row per
tube, a capped chart series), and SVG drawn here keeps the page one self-contained file
that any browser shows, with no image files beside it and no extra dependency.
"""

from __future__ import annotations

import html
import math
import time
from operator import itemgetter

from shardq.pipeline.svg import bar_chart, line_chart

COLORS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7")
#: Tubes shown in the percentile bar charts (the busiest); the table lists every tube.
BAR_TUBES = 20
#: Throughput chart bins: the narrowest of these (seconds) that gives at most CHART_BINS
#: points over the data's span, so a one-minute run is 60 points, not one.
BIN_SECONDS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600)
CHART_BINS = 150
DAY = 86_400
_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#222}
h1{font-size:22px;margin-bottom:4px} h2{font-size:17px;margin-top:32px}
.note{color:#666;font-size:13px}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin-top:8px}
th,td{padding:4px 10px;border-bottom:1px solid #ddd;text-align:right}
th:first-child,td:first-child{text-align:left} th{background:#f4f4f4}
svg{display:block;margin:8px 0} svg text{font:12px system-ui,sans-serif;fill:#333}
"""


def bin_seconds(span_s: float) -> int:
    """The chart bin for data spanning `span_s` seconds (first to last event): at most
    CHART_BINS bins, each a round length; whole days beyond BIN_SECONDS."""
    for width in BIN_SECONDS:
        if span_s / width <= CHART_BINS:
            return width
    return DAY * math.ceil(span_s / DAY / CHART_BINS)


def render(tubes: list[dict], series: list[dict], bin_s: int) -> str:
    """The whole page; `series` rows are {tube, t (epoch s, a bin's start), puts, reserves,
    deletes, timeouts}, counted over bins of `bin_s` seconds."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        "<title>shardq job analytics</title><style>",
        _CSS,
        "</style></head><body><h1>shardq job analytics</h1>",
        f"<p class='note'>{_summary(tubes, series, bin_s)}</p>",
        "<h2>Tubes</h2>",
        _table(tubes),
        _throughput(series, bin_s),
        _percentiles(tubes),
        "</body></html>",
    ]
    return "\n".join(parts)


def _summary(tubes: list[dict], series: list[dict], bin_s: int) -> str:
    puts = sum(t["puts"] for t in tubes)
    deletes = sum(t["deletes"] for t in tubes)
    text = f"{len(tubes)} tubes, {puts:,} jobs put, {deletes:,} deleted"
    if series:
        lo, hi = min(r["t"] for r in series), max(r["t"] for r in series)
        text += f"; {_when(lo, bin_s < 60)} to {_when(hi + bin_s, bin_s < 60)} UTC"
    return text + ". Wait = first reserve - (put + delay); run = delete - last reserve."


def _table(tubes: list[dict]) -> str:
    heads = ["tube", "puts", "reserves", "releases", "buries", "kicks", "timeouts", "deletes"]
    heads += ["wait p50 ms", "wait p99 ms", "run p50 ms", "run p99 ms"]
    keys = ["tube", "puts", "reserves", "releases", "buries", "kicks", "timeouts", "deletes"]
    keys += ["wait_p50_ms", "wait_p99_ms", "run_p50_ms", "run_p99_ms"]
    head = "".join(f"<th>{h}</th>" for h in heads)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(row[k])}</td>" for k in keys) + "</tr>" for row in tubes
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.1f}" if value >= 100 else f"{value:,.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return html.escape(str(value))


def bin_text(bin_s: int) -> str:
    """`1 s`, `30 s`, `5 min`, `2 h`, `1 d`: a bin's width as the chart note says it."""
    for unit, size in (("d", DAY), ("h", 3600), ("min", 60)):
        if bin_s >= size and bin_s % size == 0:
            return f"{bin_s // size} {unit}"
    return f"{bin_s} s"


def _throughput(series: list[dict], bin_s: int) -> str:
    if not series:
        return "<h2>Throughput</h2><p class='note'>No events with a time.</p>"
    names = sorted({r["tube"] for r in series})
    colors = dict(zip(names, COLORS, strict=False))
    per, scale = ("second", 1) if bin_s < 60 else ("minute", 60)
    unit = f"per {per}" + ("" if bin_s == scale else f" (mean over {bin_text(bin_s)} bins)")
    label = _when_seconds if bin_s < 60 else _when
    out = ["<h2>Throughput</h2>"]
    for field, title in (("puts", "Jobs put"), ("deletes", "Jobs deleted (done)")):
        lines = {
            name: [(r["t"], r[field] * scale / bin_s) for r in series if r["tube"] == name]
            for name in names
        }
        out.append(f"<p class='note'>{title} {unit}, busiest {len(names)} tubes.</p>")
        out.append(line_chart(lines, colors, label, step=bin_s))
    return "".join(out)


def _percentiles(tubes: list[dict]) -> str:
    busiest = sorted(tubes, key=itemgetter("puts"), reverse=True)[:BAR_TUBES]
    busiest.sort(key=itemgetter("tube"))
    out = []
    for kind, title in (("wait", "Queue wait"), ("run", "Run time")):
        bars = [
            (t["tube"], [t[f"{kind}_p50_ms"], t[f"{kind}_p99_ms"]])
            for t in busiest
            if t[f"{kind}_p50_ms"] is not None
        ]
        out.append(f"<h2>{title} (ms)</h2>")
        if not bars:
            out.append(f"<p class='note'>No job has a {kind} time.</p>")
            continue
        out.append(bar_chart(bars, ("p50", "p99"), (COLORS[0], COLORS[1])))
    return "".join(out)


def _when(epoch: float, seconds: bool = False) -> str:
    if not math.isfinite(epoch):
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M", time.gmtime(epoch))


def _when_seconds(epoch: float) -> str:
    if not math.isfinite(epoch):
        return ""
    return time.strftime("%H:%M:%S", time.gmtime(epoch))
