"""Every default that `shardq serve --help` prints in brackets is the one `Config` uses."""

import os
import re

import pytest
import typer

from shardq.cli import app
from shardq.config import Config
from shardq.flags import FLAGS

#: Bracketed defaults that say "there is none" for a field whose default is None or empty.
ABSENT = {"none", "off", "no TLS", "any", "from -V"}
#: Defaults computed from the core count: help text -> {cores: the value it must give}.
COMPUTED = {
    "2; 1 on one core": ("serving", {1: 1, 2: 2, 8: 2, 64: 2}),
    "one per serving process; a -b log keeps its own": ("shards", {1: 1, 2: 2, 8: 2, 16: 2}),
}


def _bracketed_defaults() -> dict[str, str]:
    """Config field -> the text between the last brackets of its flag's help."""
    by_flag = {flag: field for field, flag in FLAGS.items()}
    serve = typer.main.get_command(app).commands["serve"]  # type: ignore[attr-defined]
    found = {}
    for param in serve.params:
        match = re.search(r"\[([^\]]*)\]\.?$", getattr(param, "help", None) or "")
        fields = [by_flag[opt] for opt in param.opts if opt in by_flag]
        if match and fields:
            found[fields[0]] = match.group(1)
    return found


def test_help_shows_defaults_of_the_main_flags():
    shown = _bracketed_defaults()
    assert {"serving", "shards", "port", "poll_us", "fsync_ms", "max_job_size"} <= set(shown)


@pytest.mark.parametrize("field", sorted(_bracketed_defaults()))
def test_help_default_is_the_config_default(field, monkeypatch):
    text = _bracketed_defaults()[field]
    if text in COMPUTED:
        name, by_cores = COMPUTED[text]
        assert name == field
        for cores, want in by_cores.items():
            monkeypatch.setattr(os, "cpu_count", lambda cores=cores: cores)
            assert getattr(Config(), field) == want, (text, cores)
        return
    default = getattr(Config(), field)
    if default in (None, ()):
        assert text in ABSENT, (field, text)
    else:
        assert text == str(default), (field, text, default)
