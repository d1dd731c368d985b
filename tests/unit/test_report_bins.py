"""The analytics report's throughput charts: bins sized to the span of the data, so a run of
a minute is a line of 60 points, not one dot (shardq/pipeline/report.py; no JVM)."""

import re

import pytest

from shardq.pipeline.report import CHART_BINS, DAY, bin_seconds, bin_text, render


@pytest.mark.parametrize(
    ("span_s", "width"),
    [
        (0, 1),
        (59.5, 1),
        (150, 1),
        (151, 2),
        (900, 10),
        (3600, 30),
        (DAY, 600),
        (30 * DAY, 21_600),
        (100 * DAY, DAY),
    ],
)
def test_bin_is_the_narrowest_round_width_within_the_point_budget(span_s, width):
    assert bin_seconds(span_s) == width
    assert span_s / width <= CHART_BINS


def test_bins_beyond_the_list_are_whole_days():
    assert bin_seconds(1000 * DAY) == 7 * DAY
    assert bin_text(7 * DAY) == "7 d" and bin_text(600) == "10 min" and bin_text(15) == "15 s"


def tube(name: str, puts: int) -> dict[str, object]:
    return (
        {"tube": name, "puts": puts, "deletes": puts, "reserves": puts}
        | dict.fromkeys(("releases", "buries", "kicks", "timeouts"), 0)
        | dict.fromkeys(("wait_p50_ms", "wait_p99_ms", "run_p50_ms", "run_p99_ms"))
    )


def test_a_minute_long_run_is_drawn_per_second():
    start = 1_767_225_600
    series = [
        {"tube": "a", "t": start + i, "puts": 10, "reserves": 10, "deletes": 10, "timeouts": 0}
        for i in range(60)
    ]
    page = render([tube("a", 600)], series, bin_seconds(59))
    lines = re.findall(r"<polyline [^>]*points='([^']*)'", page)
    assert [len(points.split()) for points in lines] == [60, 60]  # puts, deletes
    assert "Jobs put per second, busiest 1 tubes." in page
    assert "00:00:59" in page  # the axis and the summary name seconds
