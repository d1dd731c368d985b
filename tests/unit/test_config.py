"""shardq.config: defaults, file and flag precedence, and one-line errors that name the key."""

import os
from pathlib import Path

import pytest

from shardq.config import (
    JOB_SIZE_LIMIT_MAX,
    Config,
    ConfigError,
    ConfigWarning,
    load_config,
)

REPO = Path(__file__).resolve().parents[2]


def error_of(text, overrides=None, **kw) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(text, overrides or {}, **kw)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_defaults_without_file_or_flags():
    config = load_config(None, {})
    assert config == Config()
    assert (config.listen, config.port, config.max_job_size) == ("127.0.0.1", 11300, 65535)
    serving = 2 if (os.cpu_count() or 1) >= 2 else 1
    assert config.serving == config.shards == serving
    assert (config.verbose, config.run_dir, config.wal_dir) == (0, None, None)
    assert (config.fsync_ms, config.segment_bytes) == (50, 10485760)
    assert config.server_id
    assert config.colocate is True


@pytest.mark.parametrize(("cores", "shards"), [(1, 1), (2, 2), (8, 2), (16, 2), (128, 2)])
def test_the_default_shard_count_does_not_grow_with_the_cores(monkeypatch, cores, shards):
    """One shard per serving process: more cores only added shard processes (and hops)."""
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    config = load_config(None, {})
    assert (config.shards, config.serving) == (shards, shards)
    assert load_config(None, {"serving": 4}).shards == 4  # more serving processes: more shards
    # fewer too: one serving process hosts the one shard (no shard process behind a hop)
    assert (load_config(None, {"serving": 1}).shards, load_config("serving: 1\n", {}).shards) == (
        1,
        1,
    )
    assert load_config(None, {"serving": 1, "shards": 4}).shards == 4  # set: kept
    assert load_config(None, {"serving": 1}, written=(3, "/q")).shards == 3  # the log's count


def test_a_log_s_shard_count_replaces_the_default_and_a_disagreeing_setting_is_named():
    written = (3, "/var/lib/q")
    assert (load_config(None, {}, written=written).shards, Config().serving) == (3, 2)
    assert load_config("shards: 3\n", {"shards": 3}, written=written).shards == 3
    assert load_config(None, {}, written=(1, "/q")).serving == 1  # the default fits the log
    message = error_of("shards: 2\n", origin="q.yaml", written=written)
    assert message.startswith("q.yaml: shards: /var/lib/q holds the log of 3 shards, not 2: ")
    message = error_of(None, {"shards": "4"}, flag_names={"shards": "--shards"}, written=written)
    assert message.startswith("flag --shards (shards): /var/lib/q holds the log of 3 shards, ")


@pytest.mark.parametrize("text", ["", "# only a comment\n", "wal:\n"])
def test_empty_file_means_defaults(text):
    assert load_config(text, {}) == Config()


def test_every_yaml_key_overrides_its_default():
    text = """
listen: 0.0.0.0
port: 0
max_job_size: 1024
shards: 3
serving: 1
colocate: false
poll_us: 0
verbose: 2
run_dir: /tmp/run
server: queue-1
wal:
  dir: /var/lib/shardq
  fsync: always
  segment_bytes: 4096
"""
    assert load_config(text, {}) == Config(
        listen="0.0.0.0",
        port=0,
        max_job_size=1024,
        shards=3,
        serving=1,
        colocate=False,
        poll_us=0,
        verbose=2,
        run_dir="/tmp/run",
        server_id="queue-1",
        wal_dir="/var/lib/shardq",
        fsync_ms=0,
        segment_bytes=4096,
    )


def test_flags_beat_the_file():
    text = "port: 1234\nshards: 2\nwal: {fsync: every 10}\n"
    config = load_config(text, {"port": "4321", "fsync_ms": None, "verbose": 1})
    assert (config.port, config.shards, config.fsync_ms, config.verbose) == (4321, 2, None, 1)


def test_shipped_config_file_is_valid():
    text = (REPO / "config" / "shardq.yaml").read_text()
    config = load_config(text, {})
    assert (config.listen, config.port, config.shards) == ("127.0.0.1", 11300, Config().shards)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("always", 0),
        ("never", None),
        ("every 50", 50),
        ("every 7ms", 7),
        (0, 0),
        (250, 250),
        (None, None),
    ],
)
def test_fsync_forms_in_the_file(value, expected):
    text = f"wal:\n  fsync: {'null' if value is None else value}\n"
    assert load_config(text, {}).fsync_ms == expected


@pytest.mark.parametrize(("value", "expected"), [("0", 0), ("20", 20), (None, None)])
def test_fsync_forms_from_flags(value, expected):
    assert load_config(None, {"fsync_ms": value}).fsync_ms == expected


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("listen: ''", "listen"),
        ("listen: [a]", "listen"),
        ("port: -1", "port"),
        ("port: 65536", "port"),
        ("port: '11300'", "port"),
        ("port: true", "port"),
        ("max_job_size: -5", "max_job_size"),
        ("max_job_size: 1.5", "max_job_size"),
        ("shards: abc", "shards"),
        ("shards: 0", "shards"),
        ("shards: 65", "shards"),
        ("verbose: -1", "verbose"),
        ("run_dir: 5", "run_dir"),
        ("server: ''", "server"),
        ("server: 'a b'", "server"),
        ("wal: 3", "wal"),
        ("wal: {dir: 7}", "wal.dir"),
        ("wal: {fsync: sometimes}", "wal.fsync"),
        ("wal: {fsync: -1}", "wal.fsync"),
        ("wal: {fsync: '50'}", "wal.fsync"),
        ("wal: {segment_bytes: 0}", "wal.segment_bytes"),
        ("colocate: 1", "colocate"),
        ("poll_us: -1", "poll_us"),
        ("poll_us: 10001", "poll_us"),
        ("poll_us: fast", "poll_us"),
        ("stats_yaml: yes", "stats_yaml"),
        ("stats_yaml: QUOTED", "stats_yaml"),
        ("colocate: 'yes please'", "colocate"),
    ],
)
def test_bad_values_name_their_key(text, key):
    message = error_of(text)
    assert message.startswith(f"config: {key}: "), message


def test_shards_message_is_exact():
    assert error_of("shards: abc") == (
        "config: shards: must be an integer between 1 and 64, got 'abc'"
    )


def test_origin_names_the_file():
    assert error_of("port: x", origin="etc/q.yaml").startswith("etc/q.yaml: port: ")


@pytest.mark.parametrize(
    ("overrides", "flag"),
    [
        ({"port": "99999"}, "-p"),
        ({"port": "abc"}, "-p"),
        ({"shards": "0"}, "--shards"),
        ({"max_job_size": "-1"}, "-z"),
        ({"fsync_ms": "soon"}, "-f"),
        ({"segment_bytes": "0"}, "-s"),
    ],
)
def test_bad_flags_name_the_flag(overrides, flag):
    (name,) = overrides
    flags = {
        "port": "-p",
        "shards": "--shards",
        "max_job_size": "-z",
        "fsync_ms": "-f",
        "segment_bytes": "-s",
    }
    message = error_of(None, overrides, flag_names=flags)
    assert message.startswith(f"flag {flag} ("), message
    assert overrides[name] in message


def test_port_flag_message_is_exact():
    message = error_of(None, {"port": "99999"}, flag_names={"port": "-p"})
    assert message == "flag -p (port): must be an integer between 0 and 65535, got 99999"


def test_unknown_override_is_an_error():
    assert "colour" in error_of(None, {"colour": "red"})


def test_unknown_top_level_key_is_named():
    message = error_of("port: 1\nlisten_addr: 0.0.0.0\n")
    assert message.startswith("config: listen_addr: unknown key"), message
    assert "listen" in message.split("known:")[1]


def test_unknown_wal_key_is_named():
    message = error_of("wal:\n  directory: /x\n")
    assert message.startswith("config: wal.directory: unknown key"), message
    assert "dir, fsync, segment_bytes" in message


def test_duplicate_key_is_an_error():
    assert error_of("port: 1\nport: 2\n") == "config: port: duplicate key at line 2"


@pytest.mark.parametrize("text", ["port: [1\n", "a: b: c\n", "\tport: 1\n", "{"])
def test_malformed_yaml_is_one_line(text):
    message = error_of(text)
    assert message.startswith("config: malformed YAML"), message


@pytest.mark.parametrize("text", ["- 1\n- 2\n", "just a string\n", "42\n"])
def test_top_level_must_be_a_mapping(text):
    assert error_of(text).startswith("config: top level must be a mapping")


def test_huge_max_job_size_is_clamped_with_a_warning():
    with pytest.warns(ConfigWarning, match=f"maximum job size was set to {JOB_SIZE_LIMIT_MAX}"):
        config = load_config(None, {"max_job_size": str(JOB_SIZE_LIMIT_MAX + 1)})
    assert config.max_job_size == JOB_SIZE_LIMIT_MAX


def test_max_job_size_at_the_limit_is_not_clamped(recwarn):
    assert load_config(f"max_job_size: {JOB_SIZE_LIMIT_MAX}", {}).max_job_size == (
        JOB_SIZE_LIMIT_MAX
    )
    assert not recwarn.list


def test_config_is_frozen():
    with pytest.raises(AttributeError):
        Config().port = 1  # type: ignore[misc]


def test_limits_section_and_flags():
    text = "limits:\n  max_connections: 100\n  max_output_bytes: 1048576\n"
    config = load_config(text, {})
    assert (config.max_connections, config.max_output_bytes) == (100, 1048576)
    config = load_config(text, {"max_connections": "7", "max_output_bytes": "65536"})
    assert (config.max_connections, config.max_output_bytes) == (7, 65536)
    assert (Config().max_connections, Config().max_output_bytes) == (0, 4 << 20)


def test_bad_limits_name_their_key():
    assert error_of("limits:\n  max_connections: -1\n").startswith(
        "config: limits.max_connections: must be an integer >= 0"
    )
    message = error_of(
        None,
        {"max_output_bytes": "100"},
        flag_names={"max_output_bytes": "--max-output-bytes"},
    )
    assert message == (
        "flag --max-output-bytes (limits.max_output_bytes): must be an integer >= 65536, got 100"
    )
    message = error_of("limits:\n  max_jobz: 1\n")
    assert message.startswith("config: limits.max_jobz: unknown key"), message
    assert "max_connections, max_output_bytes" in message


def test_kestrel_is_off_by_default_and_named_in_errors() -> None:
    from shardq.config import ConfigError, load_config

    assert load_config(None).kestrel_port is None
    config = load_config("kestrel:\n  listen: 0.0.0.0\n  port: 22133\n")
    assert (config.kestrel_listen, config.kestrel_port) == ("0.0.0.0", 22133)
    assert load_config(None, {"kestrel_port": "0"}).kestrel_port == 0
    with pytest.raises(ConfigError, match=r"^config: kestrel.port: must be an integer"):
        load_config("kestrel: {port: '22133'}\n")
    with pytest.raises(ConfigError, match=r"kestrel.nope: unknown key"):
        load_config("kestrel: {nope: 1}\n")


def test_kestrel_admin_commands_are_off_unless_enabled() -> None:
    from shardq.config import ConfigError, load_config

    assert load_config(None).kestrel_admin is False
    assert load_config("kestrel:\n  admin: true\n").kestrel_admin is True
    with pytest.raises(ConfigError) as caught:
        load_config("kestrel: {admin: 'yes'}\n")
    assert str(caught.value) == "config: kestrel.admin: must be true or false, got 'yes'"
