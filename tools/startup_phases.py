"""`shardqd` with a time stamp at each step of its start-up, for `startup_time.py --phases`.

Run as ``python tools/startup_phases.py -l ADDR -p PORT`` (shardqd's flags). An audit hook
(`sys.addaudithook`: it costs next to nothing, and changes no import order) notes the
monotonic clock and this process's CPU time when the interpreter has started (this file
runs), when the listening socket is bound, when ``shardq.start`` (the config, the checks)
and the supervisor begin to be imported, and at the first fork (everything the children run
is imported by then). At the first fork it writes one line to stderr:
``phases NAME=MONOTONIC_S/CPU_S ...``; the launcher subtracts its own launch time.
"""

from __future__ import annotations

import os
import sys
import time

#: the module whose import starts a phase -> the phase's name
IMPORTS = {"shardq.start": "config", "shardq.processes.supervision.supervisor": "supervisor"}
stamps: dict[str, tuple[float, float]] = {}


def stamp(name: str) -> None:
    if name not in stamps:
        stamps[name] = (time.monotonic(), time.process_time())


def on_event(event: str, args: tuple[object, ...]) -> None:
    if event == "import" and args[0] in IMPORTS:
        stamp(IMPORTS[str(args[0])])
    elif event == "socket.bind":
        stamp("bound")
    elif event == "os.fork" and "fork" not in stamps:
        stamp("fork")
        line = " ".join(f"{name}={wall:.6f}/{cpu:.6f}" for name, (wall, cpu) in stamps.items())
        os.write(2, f"phases {line}\n".encode())


def main() -> None:
    stamp("python")
    sys.addaudithook(on_event)
    sys.argv = ["shardqd", *sys.argv[1:]]
    from shardq.dropin import main as shardqd

    sys.exit(shardqd())


if __name__ == "__main__":
    main()
