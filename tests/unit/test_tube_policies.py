"""Per-tube policies: the `tubes:` config section (one-line errors naming the key) and how a
tube finds its policy (shardq/config/tubes.py, shardq/engine/policy.py)."""

from __future__ import annotations

import json

import pytest

from shardq.config import Config, ConfigError, load_config
from shardq.engine.engine import RESERVED, Engine
from shardq.engine.policy import Policies, Policy
from shardq.processes.common import live

SECTION = """
tubes:
  defaults:
    max_jobs: 100
  orders:
    max_reserves: 3
  "orders*":
    max_jobs: 7
  "log.*":
    max_bytes: 64K
    discard_old: true
  "log.audit.*":
    max_bytes: 1M
  "l*":
    max_timeouts: 2
"""


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(text, {}, origin="shardq.yaml")
    message = str(info.value)
    assert "\n" not in message
    return message


def test_no_section_means_no_policies() -> None:
    assert load_config("port: 1\n", {}).tubes == {}
    assert load_config("tubes:\n", {}).tubes == {}
    assert Config().tubes == {}


def test_section_is_validated_into_a_plain_mapping() -> None:
    tubes = load_config(SECTION, {}).tubes
    assert tubes == {
        "defaults": {"max_jobs": 100},
        "orders": {"max_reserves": 3},
        "orders*": {"max_jobs": 7},
        "log.*": {"max_bytes": 64 * 1024, "discard_old": True},
        "log.audit.*": {"max_bytes": 1 << 20},
        "l*": {"max_timeouts": 2},
    }
    assert json.loads(json.dumps(tubes)) == tubes  # it crosses to the shards as JSON


def test_expired_to_names_a_tube_of_the_family() -> None:
    text = "tubes:\n  orders: {expired_to: orders+late}\n  '*': {expired_to: +dead}\n"
    assert load_config(text, {}).tubes == {
        "orders": {"expired_to": "orders+late"},
        "*": {"expired_to": "+dead"},
    }


def test_a_number_is_a_tube_name() -> None:
    assert load_config("tubes:\n  123: {max_jobs: 1}\n", {}).tubes == {"123": {"max_jobs": 1}}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "tubes:\n  orders: {max_jobs: -1}\n",
            "shardq.yaml: tubes.orders.max_jobs: must be a whole number >= 0, got -1",
        ),
        (
            "tubes:\n  orders: {max_jobs: many}\n",
            "shardq.yaml: tubes.orders.max_jobs: must be a whole number >= 0, got 'many'",
        ),
        (
            "tubes:\n  defaults: {max_reserves: 1.5}\n",
            "shardq.yaml: tubes.defaults.max_reserves: must be a whole number >= 0, got 1.5",
        ),
        (
            "tubes:\n  a: {max_timeouts: true}\n",
            "shardq.yaml: tubes.a.max_timeouts: must be a whole number >= 0, got True",
        ),
        (
            "tubes:\n  a: {discard_old: yes please}\n",
            "shardq.yaml: tubes.a.discard_old: must be true or false, got 'yes please'",
        ),
        (
            "tubes:\n  a: {max_bytes: 12Q}\n",
            "shardq.yaml: tubes.a.max_bytes: must be a size like 65536, 512K or 64M, got '12Q'",
        ),
        (
            "tubes:\n  a: {max_job: 1}\n",
            "shardq.yaml: tubes.a.max_job: unknown key (known: max_jobs, max_bytes, "
            "discard_old, max_reserves, max_timeouts, max_age, max_reserved, reserve_rate, fanout, "
            "expired_to)",
        ),
        (
            "tubes:\n  a: {fanout: 1}\n",
            "shardq.yaml: tubes.a.fanout: must be true or false, got 1",
        ),
        (
            "tubes:\n  a: {expired_to: 'no spaces'}\n",
            "shardq.yaml: tubes.a.expired_to: must be a tube name or +NAME, got 'no spaces'",
        ),
        (
            "tubes:\n  a: {expired_to: '+'}\n",
            "shardq.yaml: tubes.a.expired_to: must be a tube name or +NAME, got '+'",
        ),
        (
            "tubes:\n  orders: {expired_to: late}\n",
            "shardq.yaml: tubes.orders.expired_to: must be a tube of the family 'orders' (such as "
            "orders+expired, or +expired), got 'late'",
        ),
        (
            "tubes:\n  'orders*': {expired_to: orders+late}\n",
            "shardq.yaml: tubes.orders*.expired_to: for a glob or defaults, name the tube as "
            "+NAME, got 'orders+late'",
        ),
        (
            "tubes:\n  a: {max_reserved: -2}\n",
            "shardq.yaml: tubes.a.max_reserved: must be a whole number >= 0, got -2",
        ),
        (
            "tubes:\n  a: {max_reserved: 2.5}\n",
            "shardq.yaml: tubes.a.max_reserved: must be a whole number >= 0, got 2.5",
        ),
        (
            "tubes:\n  a: {reserve_rate: -0.5}\n",
            "shardq.yaml: tubes.a.reserve_rate: must be a number of jobs per second >= 0, got -0.5",
        ),
        (
            "tubes:\n  a: {reserve_rate: fast}\n",
            "shardq.yaml: tubes.a.reserve_rate: must be a number of jobs per second >= 0, "
            "got 'fast'",
        ),
        (
            "tubes:\n  a: {reserve_rate: .inf}\n",
            "shardq.yaml: tubes.a.reserve_rate: must be a number of jobs per second >= 0, got inf",
        ),
        (
            "tubes:\n  a: {reserve_rate: true}\n",
            "shardq.yaml: tubes.a.reserve_rate: must be a number of jobs per second >= 0, got True",
        ),
        ("tubes: [a, b]\n", "shardq.yaml: tubes: must be a mapping of tube names and globs"),
        ("tubes:\n  a: 5\n", "shardq.yaml: tubes.a: must be a mapping of max_jobs"),
        ("tubes:\n  -a: {}\n", "shardq.yaml: tubes.-a: is not a valid tube name"),
        ("tubes:\n  a b: {}\n", "shardq.yaml: tubes.a b: is not a valid tube name"),
        ('tubes:\n  "a*%": {}\n', "shardq.yaml: tubes.a*%: must be a glob of tube-name"),
    ],
)
def test_bad_values_name_their_key(text: str, message: str) -> None:
    assert error_of(text).startswith(message)


def test_rate_and_concurrency_limits_are_read() -> None:
    text = "tubes:\n  a: {reserve_rate: 0.5, max_reserved: 3}\n  b: {reserve_rate: 20}\n"
    tubes = load_config(text, {}).tubes
    assert tubes == {"a": {"reserve_rate": 0.5, "max_reserved": 3}, "b": {"reserve_rate": 20}}
    policies = Policies(json.loads(json.dumps(tubes)))  # as a shard gets them
    assert policies.resolve("a") == Policy(max_reserved=3, reserve_rate=0.5)
    assert policies.resolve("b") == Policy(reserve_rate=20)
    assert Policies({"a": {"reserve_rate": 0, "max_reserved": 0}}).resolve("a") is None


def test_exact_name_beats_globs_and_longest_glob_beats_shorter() -> None:
    policies = Policies(load_config(SECTION, {}).tubes)
    assert policies.entry("orders") == "orders"  # exact, though "orders*" matches too
    assert policies.entry("orders-eu") == "orders*"
    assert policies.entry("log.audit.x") == "log.audit.*"  # longer than "log.*" and "l*"
    assert policies.entry("log.x") == "log.*"
    assert policies.entry("lx") == "l*"
    assert policies.entry("other") is None


def test_an_entry_is_laid_over_the_defaults_key_by_key() -> None:
    policies = Policies(load_config(SECTION, {}).tubes)
    assert policies.resolve("orders") == Policy(max_jobs=100, max_reserves=3)
    assert policies.resolve("orders-eu") == Policy(max_jobs=7)
    assert policies.resolve("log.x") == Policy(max_jobs=100, max_bytes=65536, discard_old=True)
    assert policies.resolve("other") == Policy(max_jobs=100)


def test_equally_long_globs_go_in_file_order() -> None:
    policies = Policies({"a?": {"max_jobs": 1}, "?b": {"max_jobs": 2}})
    assert policies.resolve("ab") == Policy(max_jobs=1)
    policies = Policies({"?b": {"max_jobs": 2}, "a?": {"max_jobs": 1}})
    assert policies.resolve("ab") == Policy(max_jobs=2)


def test_a_policy_that_sets_nothing_is_none() -> None:
    policies = Policies({"defaults": {"max_jobs": 0, "discard_old": False}, "a": {}})
    assert policies.resolve("a") is None
    assert policies.resolve("b") is None
    assert Policies().resolve("a") is None
    assert not Policies()


def test_globs_are_case_sensitive_as_tube_names() -> None:
    assert Policies({"A*": {"max_jobs": 1}}).resolve("abc") is None


def test_engine_tubes_take_their_policy_when_made_and_on_reload() -> None:
    engine = Engine()
    engine.set_policies(Policies({"a*": {"max_jobs": 2, "discard_old": True}}))
    tube = engine.ensure_tube("abc", 0)
    assert tube.policy == Policy(max_jobs=2, discard_old=True)
    assert tube.by_age is not None
    assert engine.ensure_tube("xyz", 0).policy is None
    assert engine.tubes["default"].policy is None
    engine.set_policies(Policies({"defaults": {"max_reserves": 1}}))
    assert tube.policy == Policy(max_reserves=1)
    assert tube.by_age is None  # kept only for discard_old
    assert engine.tubes["xyz"].policy == Policy(max_reserves=1)
    engine.set_policies(Policies())
    assert all(t.policy is None for t in engine.tubes.values())


def test_policies_are_live_settings(tmp_path) -> None:
    """A SIGHUP carries them to the shards (live.json), and to children started later."""
    old = load_config("", {})
    new = load_config(SECTION, {})
    applied, refused = live.changes(old, new)
    assert [key for key, _, _ in applied] == ["tubes"]
    assert refused == []
    live.write(str(tmp_path), live.of(new))
    assert live.read(str(tmp_path)).tubes == new.tubes
    from shardq.processes.supervision import children

    later = children.shard_settings(old, str(tmp_path), 0).with_live(live.of(new))
    assert later.common.tubes == new.tubes


def test_shard_children_are_told_the_policies_and_take_new_ones_on_sighup() -> None:
    from shardq.processes.shard.core import ShardCore
    from shardq.processes.supervision import children

    config = load_config(SECTION, {"shards": 2, "serving": 1})
    settings = children.shard_settings(config, "/tmp/run", 1)
    assert settings.common.tubes == config.tubes
    assert children.shard_settings(load_config("", {}), "/tmp/run", 1).common.tubes == {}
    core = ShardCore(1, owns_default=False, policies=Policies(settings.common.tubes))
    assert core.engine.ensure_tube("orders", 0).policy == Policy(max_jobs=100, max_reserves=3)
    core.take_live(live.of(load_config("tubes:\n  orders: {max_jobs: 5}\n", {})))
    assert core.engine.tubes["orders"].policy == Policy(max_jobs=5)
    core.take_live(live.of(load_config("", {})))
    assert core.engine.tubes["orders"].policy is None


def test_a_sighup_raising_max_reserved_serves_the_waiting_reserve_at_once() -> None:
    import time

    from shardq.processes.shard.core import ShardCore

    core = ShardCore(0, owns_default=True, policies=Policies({"p": {"max_reserved": 1}}))
    engine = core.engine
    now = time.monotonic_ns()
    for job_id in (1, 2):
        engine.put(job_id, job_id, "p", 0, 0, 60, b"x", now)
    assert engine.reserve(1, 1, ("p",), now, None, None)[0] == RESERVED
    assert engine.reserve(2, 2, ("p",), now, None, None) is None  # at the limit: waits
    core.take_live(live.of(load_config("tubes:\n  p: {max_reserved: 2}\n", {})))
    assert [(rid, payload[0], payload[2]) for rid, payload in engine.events] == [(2, RESERVED, 2)]
