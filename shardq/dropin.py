"""``shardqd``: shardq with beanstalkd 1.12's own command line, for wherever a ``beanstalkd``
binary is expected (a service unit, a container's command, a client library's test suite
that starts ``$BEANSTALKD_PATH -l ADDR -p PORT``). Same flags, parsed as beanstalkd parses
them (getopt: ``-VV``, ``-f0``), same exit statuses (5 for an unknown flag or argument);
shardq's own settings come from ``--config FILE`` or the long flags of ``shardq serve``.

It imports no CLI library, and when the flags say plainly where to listen (no config file)
it binds the port before it imports the rest of shardq (`bind_early`): ≈ 0.03 s after start
(``shardq serve``: ≈ 0.15 s), so a client that connects right after starting it is queued,
not refused. Every check still runs afterwards; a refusal closes the socket again.
"""

from __future__ import annotations

import gc
import os
import re
import sys

from shardq import __version__
from shardq.flags import EXIT_OK, FLAGS
from shardq.opts import GetoptError, getopt
from shardq.processes.common.bind import bind_listener, bind_tcp, unix_path

TYPE_CHECKING = False  # typing (≈ 3 ms), socket (≈ 3.5 ms) and pathlib: after the bind
if TYPE_CHECKING:
    import socket
    from typing import Any

EXIT_USAGE = 5  #: beanstalkd's status for an unknown flag or a stray argument
#: beanstalkd 1.12's flags: -b -f -F -h -l -p -s -u -V -v -z, and -c -n (ignored)
SHORT = "b:f:Fhl:p:s:u:Vvz:cn"
#: short flag letter -> config field (-V counts, -F has no value: handled apart)
SHORT_FIELDS = {flag[1]: name for name, flag in FLAGS.items() if len(flag) == 2 and flag != "-V"}
#: long flag -> config field, for the flags of `shardq serve` that take a value
LONG_FIELDS = {
    flag: name for name, flag in FLAGS.items() if flag.startswith("--") and name != "colocate"
}
LONG = [f"{flag[2:]}=" for flag in LONG_FIELDS] + ["config=", "no-colocate"]
USAGE = f"""Use: shardqd [OPTIONS]

Options (as beanstalkd 1.12's):
 -b DIR   write-ahead log directory
 -f MS    fsync at most once every MS milliseconds (use -f0 for "always fsync")
 -F       never fsync
 -l ADDR  listen on address (default is 127.0.0.1), or unix:PATH
 -p PORT  listen on port (default is 11300)
 -u USER  become user and group
 -z BYTES set the maximum job size in bytes (default is 65535)
 -s BYTES set the size of each write-ahead log file (default is 10485760)
 -c, -n   ignored, as by beanstalkd 1.12 (the log is always compacted)
 -v       show version information
 -V       increase verbosity
 -h       show this help
shardq's own: --config FILE, {", ".join(sorted(LONG_FIELDS))}, --no-colocate
"""


def usage_error(message: str) -> int:
    sys.stderr.write(f"shardqd: {message}\n{USAGE}")
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    """Parse beanstalkd's flags and start the server; returns only on refusal or -h/-v."""
    args = sys.argv[1:] if argv is None else argv
    try:
        opts, rest = getopt(args, SHORT, LONG)  # getopt's, without its gettext
    except GetoptError as e:
        return usage_error(str(e))
    if rest:
        return usage_error(f"unknown argument: {rest[0]}")
    overrides: dict[str, Any] = {}
    config_file: str | None = None
    no_fsync, ignored = False, []
    for opt, value in opts:
        if opt == "-h":
            sys.stderr.write(USAGE)
            return EXIT_OK
        if opt == "-v":
            sys.stdout.write(f"shardq {__version__}\n")
            return EXIT_OK
        if opt == "-V":
            overrides["verbose"] = overrides.get("verbose", 0) + 1
        elif opt == "-F":
            no_fsync = True
        elif opt in ("-c", "-n"):
            ignored.append(opt)
        elif opt == "--config":
            config_file = value
        elif opt == "--no-colocate":
            overrides["colocate"] = False
        elif opt == "--allow":  # repeatable
            overrides.setdefault("allow", []).append(value)
        elif opt in LONG_FIELDS:
            overrides[LONG_FIELDS[opt]] = value
        else:
            overrides[SHORT_FIELDS[opt[1]]] = value
    bound = bind_early(overrides) if config_file is None else None
    gc.disable()  # start-up makes no garbage worth a pass (on again once the children run)
    from pathlib import Path  # after the bind, as the rest

    from shardq.start import start_server  # it imports the config, yaml, ssl

    config_path = None if config_file is None else Path(config_file)
    return start_server(config_path, overrides, no_fsync, ignored, in_process=True, bound=bound)


#: where the config would come from without --config (a file there may set listen/port)
DEFAULT_CONFIG_FILE = os.path.join("config", "shardq.yaml")


def bind_early(overrides: dict[str, Any]) -> socket.socket | None:
    """Bind `-l`/`-p` (or their defaults) now, when nothing else can decide them (no config
    file) and they are plain; None otherwise, or if binding fails: start-up then binds, or
    reports why it cannot, as it always does."""
    listen = overrides.get("listen", "127.0.0.1")
    port = overrides.get("port", "11300")
    if os.path.isfile(DEFAULT_CONFIG_FILE) or not re.fullmatch(r"\d{1,5}", port):
        return None
    if int(port) > 65535 or not listen or any(c.isspace() for c in listen):
        return None
    try:
        if unix_path(listen) is not None:
            return bind_listener(listen, int(port))
        fd = bind_tcp(listen, int(port))  # before `socket` is imported: see bind.py
    except OSError:
        return None
    import socket

    return socket.socket(fileno=fd)


if __name__ == "__main__":
    sys.exit(main())
