"""Unit-test set-up: shardq's warnings reach the test's stderr, as they reach a process's.

Every shardq process sends its log to stderr (shardq/log.py), so a diagnostic such as the
write-ahead log's "torn last record cut off" is something a user reads on stderr, and the
unit tests check it there (capsys). In a unit test no process has set logging up, and
pytest's own log capture keeps records away from logging's last-resort handler (the one
that prints warnings to stderr when nothing else is configured). This fixture stands in
for it: WARNING and above of the `shardq` loggers go, as the bare message, to whatever
``sys.stderr`` is when the record is emitted (capsys's buffer when a test asks for it).
pytest's capture (caplog) still sees every record.

The `q` fixture is the engine harness of tests/unit/test_engine_*.py (engine_helpers.Q).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator

import pytest
from engine_helpers import Q


class CurrentStderr(logging.Handler):
    """Writes each record to the ``sys.stderr`` of the moment, like logging.lastResort."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # a handler must not raise: logging reports the failure itself
            self.handleError(record)


@pytest.fixture(autouse=True)
def shardq_warnings_to_stderr() -> Iterator[None]:
    handler = CurrentStderr(logging.WARNING)
    logger = logging.getLogger("shardq")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


@pytest.fixture
def q() -> Q:
    return Q()
