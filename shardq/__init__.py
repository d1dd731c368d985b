"""shardq: a multi-process work-queue server that speaks the beanstalk protocol."""

import os as _os

__version__ = "0.1.0"

# shardq.compiled.PURE_ENV, read here without importing that module unless it is set
if _os.environ.get("SHARDQ_PURE"):  # the pure build, though the compiled one is built
    from shardq.compiled import use_pure as _use_pure

    _use_pure()
