"""`getopt`: the standard library's ``getopt.getopt`` (POSIX: options end at the first
argument that is not one, or at ``--``), the same results and error messages, without its
import of `gettext` (with `locale`: ≈ 3 ms before `shardqd` binds, docs/BENCHMARKS.md,
"Start-up").

``-VV`` is two -V, ``-f0`` is -f with 0, ``-l ADDR`` takes the next word; a long option
is spelled whole or by a unique prefix, with its value after ``=`` or as the next word.
"""

from __future__ import annotations


class GetoptError(Exception):
    """A flag that is not known, or misses its value (str(): getopt's message)."""


def getopt(
    args: list[str], shortopts: str, longopts: list[str]
) -> tuple[list[tuple[str, str]], list[str]]:
    """(option, value) pairs in order (value "" for a flag without one) and the arguments
    left after them, as ``getopt.getopt(args, shortopts, longopts)``."""
    opts: list[tuple[str, str]] = []
    args = list(args)
    while args and args[0].startswith("-") and args[0] != "-":
        if args[0] == "--":
            return opts, args[1:]
        word = args.pop(0)
        if word.startswith("--"):
            long_option(opts, word[2:], longopts, args)
        else:
            short_options(opts, word[1:], shortopts, args)
    return opts, args


def long_option(
    opts: list[tuple[str, str]], word: str, longopts: list[str], args: list[str]
) -> None:
    name, eq, value = word.partition("=")
    takes_value, name = long_name(name, longopts)
    if takes_value:
        if not eq:
            if not args:
                raise GetoptError(f"option --{name} requires argument")
            value = args.pop(0)
    elif eq:
        raise GetoptError(f"option --{name} must not have an argument")
    opts.append((f"--{name}", value))


def long_name(name: str, longopts: list[str]) -> tuple[bool, str]:
    """(whether it takes a value, its whole name) of a long option spelled whole or by a
    unique prefix."""
    if name + "=" in longopts:
        return True, name
    if name in longopts:
        return False, name
    matches = [o for o in longopts if o.startswith(name)]
    if not matches:
        raise GetoptError(f"option --{name} not recognized")
    if len(matches) > 1:
        raise GetoptError(f"option --{name} not a unique prefix")
    whole = matches[0]
    return whole.endswith("="), whole.rstrip("=")


def short_options(
    opts: list[tuple[str, str]], letters: str, shortopts: str, args: list[str]
) -> None:
    while letters:
        letter, letters = letters[0], letters[1:]
        at = shortopts.find(letter)
        if letter == ":" or at < 0:
            raise GetoptError(f"option -{letter} not recognized")
        value = ""
        if shortopts.startswith(":", at + 1):
            if not letters:
                if not args:
                    raise GetoptError(f"option -{letter} requires argument")
                letters = args.pop(0)
            value, letters = letters, ""
        opts.append((f"-{letter}", value))
