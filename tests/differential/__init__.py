"""Differential tests: the same scripted sessions against beanstalkd 1.12 and shardq.

Run (shardq --shards 1 and --shards 4 against beanstalkd):
    .venv/bin/pytest tests/differential -n auto
Harness self-check (beanstalkd against beanstalkd):
    SHARDQ_DIFF_SELFTEST=1 .venv/bin/pytest tests/differential -n auto

The session language lives in dsl.py. Cases where shardq deliberately differs
from beanstalkd 1.12 are not compared; they are asserted in test_shardq_fixes.py.
"""
