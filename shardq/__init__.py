"""shardq: a multi-process work-queue server that speaks the beanstalk protocol."""

__version__ = "0.1.0"
