"""`shardq serve` with a flag it does not know offers what the user likely meant, or nothing."""

import pytest
from typer.testing import CliRunner

from shardq.cli import app


def _error(*args: str) -> str:
    result = CliRunner().invoke(app, ["serve", *args])
    assert result.exit_code == 2
    return next(line for line in result.output.splitlines() if line.startswith("Error:"))


@pytest.mark.parametrize(
    ("flag", "meant"), [("--port", "-p"), ("--listen", "-l"), ("--verbose", "-V")]
)
def test_long_form_of_a_beanstalkd_flag_points_at_the_short_one(flag, meant):
    assert _error(flag, "1").endswith(f"(Possible options: {meant})")


def test_a_near_spelling_is_offered():
    assert _error("--shard", "2").endswith("(Possible options: --shards)")


@pytest.mark.parametrize("flag", ["--procs", "--workers", "--duration"])
def test_an_unlike_flag_gets_no_suggestion(flag):
    assert _error(flag, "1") == f"Error: No such option: {flag}"
