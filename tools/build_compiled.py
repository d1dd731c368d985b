"""Build the compiled modules of `shardq.compiled.COMPILED` in place (`make compiled`).

Cython turns each listed .py into C (under build/cython) and gcc into an extension module
beside the .py, which Python then imports instead of the source. Only modules whose source
changed since their last build are built again. The sources stay plain Python: the same
tree runs uncompiled without this step, or with SHARDQ_PURE=1 (shardq/compiled.py).

    python tools/build_compiled.py [-j JOBS]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from shardq.compiled import COMPILED, source_path

ROOT = Path(__file__).resolve().parents[1]

#: Python's semantics exactly: no annotation becomes a C type or a type check, functions
#: bind as methods when a class body takes them (the serving process's rooms).
DIRECTIVES = {
    "language_level": 3,
    "annotation_typing": False,
    "binding": True,
    "nonecheck": True,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    from Cython.Build import cythonize
    from setuptools import Distribution

    os.chdir(ROOT)
    extensions = cythonize(
        [source_path(name) for name in COMPILED],
        build_dir="build/cython",
        compiler_directives=DIRECTIVES,
        nthreads=args.jobs,
        quiet=True,
    )
    for extension in extensions:  # Cython's C, not ours: its warnings say nothing to act on
        extension.extra_compile_args = ["-w"]
    # A Distribution of its own: setup() would read pyproject.toml (shardq's metadata,
    # nothing this build needs) and warn about it
    dist = Distribution({"name": "shardq-compiled", "ext_modules": extensions})
    dist.script_args = ["-q", "build_ext", "--inplace", "-j", str(args.jobs)]
    dist.parse_command_line()
    dist.run_commands()
    return 0


if __name__ == "__main__":
    sys.exit(main())
