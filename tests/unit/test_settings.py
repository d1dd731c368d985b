"""Each role's settings (processes/common/settings.py) come from the config in one place
(supervision/children.py): a settings field named as a `Config` field takes its value,
whatever the role; a SIGHUP's live settings and a restart change what a child started
later is handed."""

from __future__ import annotations

import pytest

from shardq.config import FIELDS, Config, load_config
from shardq.processes.common import live
from shardq.processes.common.settings import (
    Common,
    Door,
    KestrelSettings,
    MetricsSettings,
    RoleSettings,
    ServingSettings,
    ShardSettings,
    Store,
    WorkqSettings,
)
from shardq.processes.supervision import children

CONFIG = """
shards: 4
serving: 2
poll_us: 7
max_job_size: 1234
server: box
wal: {dir: /var/q, fsync: 0, segment_bytes: 4096}
limits: {max_connections: 9, max_jobs: 3, max_memory: 2M}
allow: [10.0.0.0/8]
kestrel: {port: 0, admin: true}
workq: {port: 0}
"""


def every_role(cfg: Config) -> list[RoleSettings]:
    return [
        children.coordinator_settings(cfg, "/run", "/state"),
        children.shard_settings(cfg, "/run", 3),
        children.serving_settings(cfg, "/run", 1, (5, 6, 7), "spread"),
        children.front_settings(KestrelSettings, cfg, "/run", 8),
        children.front_settings(WorkqSettings, cfg, "/run", 9),
        children.metrics_settings(cfg, "/run", 10, ["coordinator", "shard 3"]),
    ]


def parts(settings: object) -> list[object]:
    """The settings object and the parts it holds (Common, Door, Store)."""
    found = [settings]
    for name in settings.__match_args__:  # type: ignore[attr-defined]
        value = getattr(settings, name)
        if isinstance(value, (Common, Door, Store)):
            found.append(value)
    return found


@pytest.mark.parametrize("settings", every_role(load_config(CONFIG, {})), ids=lambda s: s.label)
def test_a_field_named_as_a_config_field_has_its_value(settings: RoleSettings) -> None:
    cfg = load_config(CONFIG, {})
    for part in parts(settings):
        for name in part.__match_args__:  # type: ignore[attr-defined]
            # given by the supervisor: the run directory it made, each shard's log directory
            if name in FIELDS and name not in ("run_dir", "wal_dir"):
                assert getattr(part, name) == getattr(cfg, name), (part, name)


def test_what_each_role_is_told() -> None:
    cfg = load_config(CONFIG, {})
    coordinator, shard, serving, kestrel, workq, metrics = every_role(cfg)
    assert [s.label for s in every_role(cfg)] == [
        "coordinator",
        "shard 3",
        "serving 1",
        "kestrel",
        "workq",
        "metrics",
    ]
    assert isinstance(shard, ShardSettings) and shard.store.wal_dir == "/var/q/shard-3"
    assert isinstance(serving, ServingSettings)
    assert (serving.listen_fd, serving.private_fd, serving.ready_fd) == (5, 6, 7)
    assert serving.hosted is not None and serving.hosted.index == 1
    assert (serving.poll_us, serving.max_job_size, serving.door.allow) == (7, 1234, ("10.0.0.0/8",))
    assert isinstance(kestrel, KestrelSettings) and kestrel.journal and kestrel.sync_journal
    assert kestrel.kestrel_admin and kestrel.backend == "/run/beanstalk.sock"
    assert isinstance(workq, WorkqSettings) and workq.journal_dir == "/var/q"
    assert isinstance(metrics, MetricsSettings) and metrics.roles == ("coordinator", "shard 3")


def test_live_settings_and_a_restart_reach_a_later_start() -> None:
    cfg = load_config(CONFIG, {})
    new = live.of(load_config(CONFIG, {"verbose": 2, "max_connections": 1}))
    for settings in every_role(cfg):
        later = settings.with_live(new)
        assert later.common.verbose == 2
        door = getattr(later, "door", None)
        assert door is None or door.max_connections == 1
    shard = children.shard_settings(cfg, "/run", 3).restarted((0, 1))
    assert isinstance(shard, ShardSettings) and shard.store.settle_from == (0, 1)
    serving = children.serving_settings(cfg, "/run", 1, (5, -1, -1)).restarted((0,))
    assert isinstance(serving, ServingSettings) and serving.hosted is not None
    assert serving.hosted.settle_from == (0,)
    assert serving.drained().draining and serving.started().ready_fd == -1


def test_settings_are_frozen_records_made_by_keyword() -> None:
    """Plain slotted classes (`record.Frozen`), not dataclasses (≈ 15 ms of every start):
    frozen, every field given by keyword (defaults from the class body), a dataclass's
    equality and repr, `replace` for a changed copy."""
    cfg = load_config(CONFIG, {})
    shard = children.shard_settings(cfg, "/run", 3)
    assert isinstance(shard, ShardSettings)
    with pytest.raises(AttributeError):
        shard.store.index = 4
    assert not hasattr(shard, "__dict__") and not hasattr(shard.store, "__dict__")
    assert shard.store.settle_from == ()  # the body's default
    assert ShardSettings.__match_args__ == ("common", "store")
    assert ServingSettings.__match_args__[:2] == ("common", "door")  # inherited fields first
    assert shard == children.shard_settings(cfg, "/run", 3) != shard.restarted((0,))
    assert repr(shard.store).startswith("Store(index=3, events_dir=None, server_id='box'")
    with pytest.raises(TypeError, match="needs"):
        Store(index=1)
    with pytest.raises(TypeError, match="no field"):
        shard.store.replace(nonsense=1)
