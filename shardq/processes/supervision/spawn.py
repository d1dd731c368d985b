"""How shardq starts Python processes of its own, so none imports from the working directory.

``python -m shardq...`` normally puts the working directory first on ``sys.path``: started
from a directory holding a ``shardq/`` folder (the clone's parent, say), a re-executed
supervisor or a child would import that folder instead of the installed package. Every
command line built here starts with ``python -P`` (Python 3.11: no working directory or
script directory on ``sys.path``), which still honours PYTHONPATH.

`pin_import_root` covers the one case -P would break: a process that itself imported
shardq from the working directory (``python -m shardq`` in an uninstalled checkout). It
puts that directory on PYTHONPATH, so every process it starts runs the same code it runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from pathlib import Path

import shardq

#: Python 3.11's "safe path" flag: sys.path gets neither the working nor the script directory.
SAFE_PATH = "-P"


def python_m(module: str, *args: str) -> list[str]:
    """``[python, -P, -m, module, *args]``: run `module` of the installed (or pinned) code."""
    return [sys.executable, SAFE_PATH, "-m", module, *args]


def import_root() -> Path:
    """The directory this process imported the shardq package from (its parent)."""
    return Path(shardq.__file__).resolve().parent.parent


def imported_from_first_path_entry() -> bool:
    """True if shardq came from the directory Python put first on sys.path (the working
    directory for ``-m``, the script's directory otherwise): a ``-P`` child would miss it."""
    if sys.flags.safe_path or not sys.path:
        return False
    first = Path(sys.path[0] or os.getcwd()).resolve()
    return first == import_root()


def pin_import_root(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Put `import_root` first on PYTHONPATH in `environ` when a ``-P`` child would not find
    shardq there otherwise; True if it did."""
    if not imported_from_first_path_entry():
        return False
    root = str(import_root())
    entries = [e for e in environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    environ["PYTHONPATH"] = os.pathsep.join([root, *(e for e in entries if e != root)])
    return True
