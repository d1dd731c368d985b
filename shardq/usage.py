"""What `shardq serve` says about a flag it does not know.

Click suggests any option whose name is 60 % alike (`--procs` got `--metrics, --poll-us`,
`--port` got `--kestrel-port, --workq-port`). A user of beanstalkd's flags who types the
long form of one (`--port`, `--listen`, `--verbose`) is told the short flag that does it;
otherwise only near spellings are offered (`--shard` -> `--shards`), or nothing.
"""

from __future__ import annotations

from difflib import get_close_matches
from typing import Any

from typer._click.exceptions import NoSuchOption
from typer.core import TyperCommand

#: How alike (difflib's ratio) a known option must be to be offered for an unknown one.
NEAR = 0.8

#: Long names a beanstalkd or memcached user may try -> the flag `serve` has for it.
MEANT = {
    "--port": "-p",
    "--listen": "-l",
    "--address": "-l",
    "--host": "-l",
    "--verbose": "-V",
    "--binlog": "-b",
    "--binlog-dir": "-b",
    "--wal": "-b",
    "--fsync": "-f",
    "--user": "-u",
    "--max-job-size": "-z",
    "--config-file": "--config",
}


def suggestions(typed: str, known: list[str]) -> list[str]:
    """The options to offer for `typed` (an unknown option) among `known` ones."""
    name = typed.split("=", 1)[0]
    if name in MEANT:
        return [MEANT[name]]
    return get_close_matches(name, [k for k in known if k.startswith("--")], cutoff=NEAR)


class SuggestingCommand(TyperCommand):
    """A typer command whose unknown-option error offers only what the user likely meant."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except NoSuchOption as error:
            known = [opt for param in self.params for opt in getattr(param, "opts", ())]
            error.possibilities = suggestions(error.option_name, known)
            raise
