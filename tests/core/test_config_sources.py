"""Configuration sources (TOML, .properties, environment, overrides) and their precedence."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tierlog.config import BrokerConfig, env_var_name, load_sources, read_properties, read_toml
from tierlog.config.sources import key_from_env_var
from tierlog.errors import InvalidConfigError

KEY = "remote.fetch.max.wait.ms"
ENV = "TIERLOG_REMOTE_FETCH_MAX_WAIT_MS"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_toml_nested_tables_flatten_to_dotted_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path / "server.toml",
        """
        [remote.log]
        storage.system.enable = true
        storage.manager.name = "fsspec"

        [rsm.config]
        bucket = "logs"
        retries = 3

        [log]
        dirs = ["/a", "/b"]
        """,
    )
    assert read_toml(path) == {
        "remote.log.storage.system.enable": True,
        "remote.log.storage.manager.name": "fsspec",
        "rsm.config.bucket": "logs",
        "rsm.config.retries": 3,
        "log.dirs": ["/a", "/b"],
    }
    config = BrokerConfig.from_file(path)
    assert config["remote.log.storage.system.enable"] is True
    assert config["log.dirs"] == ("/a", "/b")
    assert config.plugin_slice("rsm.config.") == {"bucket": "logs", "retries": "3"}


def test_toml_flat_table_with_quoted_dotted_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path / "server.toml",
        '"remote.log.storage.system.enable" = true\n"remote.fetch.max.wait.ms" = 900\n',
    )
    nested = write(
        tmp_path / "nested.toml",
        "[remote.log]\nstorage.system.enable = true\n[remote.fetch.max.wait]\nms = 900\n",
    )
    flat_config = BrokerConfig.from_file(path)
    assert flat_config.snapshot() == BrokerConfig.from_file(nested).snapshot()
    assert flat_config[KEY] == 900


def test_toml_key_given_twice_through_quoting_and_nesting(tmp_path: Path) -> None:
    path = write(tmp_path / "dup.toml", '"num.partitions" = 1\n[num]\npartitions = 2\n')
    with pytest.raises(InvalidConfigError, match=re.escape("num.partitions is set twice")):
        read_toml(path)


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "broken.toml", "num.partitions = = 3\n")
    with pytest.raises(InvalidConfigError, match=re.escape("broken.toml: invalid TOML")):
        BrokerConfig.from_file(path)


def test_toml_wrong_scalar_type_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path / "server.toml", '[remote.fetch.max.wait]\nms = "soon"\n')
    with pytest.raises(InvalidConfigError, match=re.escape("remote.fetch.max.wait.ms = 'soon'")):
        BrokerConfig.from_file(path)


def test_properties_file_syntax(tmp_path: Path) -> None:
    path = write(
        tmp_path / "server.properties",
        "# a comment\n"
        "! another comment\n"
        "broker.id=7\n"
        "num.partitions : 3\n"
        "log.retention.hours 24\n"
        "log.dirs = /data/one,\\\n"
        "           /data/two\n"
        "   rsm.config.prefix.with\\ space = tab\\there\n"
        "rsm.config.unicode = caf\\u00e9\n"
        "cluster.id =\n",
    )
    assert read_properties(path) == {
        "broker.id": "7",
        "num.partitions": "3",
        "log.retention.hours": "24",
        "log.dirs": "/data/one,/data/two",
        "rsm.config.prefix.with space": "tab\there",
        "rsm.config.unicode": "café",
        "cluster.id": "",
    }
    config = BrokerConfig.from_file(path)
    assert config["broker.id"] == 7
    assert config["num.partitions"] == 3
    assert config["log.dirs"] == ("/data/one", "/data/two")
    assert config["cluster.id"] is None


def test_properties_file_with_a_bad_escape(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.properties", "rsm.config.x = \\u00zz\n")
    with pytest.raises(
        InvalidConfigError, match=re.escape("bad.properties: invalid properties file")
    ):
        BrokerConfig.from_file(path)


def test_unsupported_file_type(tmp_path: Path) -> None:
    path = write(tmp_path / "server.yaml", "num.partitions: 3\n")
    with pytest.raises(InvalidConfigError, match=re.escape("use .toml or .properties")):
        BrokerConfig.from_file(path)


@pytest.mark.parametrize(
    ("key", "variable"),
    [
        ("remote.fetch.max.wait.ms", "TIERLOG_REMOTE_FETCH_MAX_WAIT_MS"),
        ("rsm.config.aws_region", "TIERLOG_RSM_CONFIG_AWS__REGION"),
        ("plugin.my-plugin.root", "TIERLOG_PLUGIN_MY___PLUGIN_ROOT"),
    ],
)
def test_environment_naming_convention(key: str, variable: str) -> None:
    assert env_var_name(key) == variable
    assert key_from_env_var(variable) == key


def test_environment_sets_core_and_plugin_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "1000")
    monkeypatch.setenv("TIERLOG_RSM_CONFIG_AWS__REGION", "eu-west-1")
    monkeypatch.setenv("TIERLOG_LOG_DIRS", "/x,/y")
    config = BrokerConfig.from_sources()
    assert config[KEY] == 1000
    assert config["log.dirs"] == ("/x", "/y")
    assert config.plugin_slice("rsm.config.") == {"aws_region": "eu-west-1"}


def test_environment_is_not_read_by_from_file_or_from_mapping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "1000")
    path = write(tmp_path / "server.toml", "")
    assert BrokerConfig.from_file(path)[KEY] == 500
    assert BrokerConfig.from_mapping({})[KEY] == 500


def test_environment_typo_is_rejected_and_runtime_switches_are_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TIERLOG_TRACE_PLUGINS", "1")
    monkeypatch.setenv("TIERLOG_PLUGINS", "fsspec")
    monkeypatch.setenv("TIERLOG_DISABLE_PLUGIN_AUTOLOAD", "1")
    assert BrokerConfig.from_sources()[KEY] == 500
    monkeypatch.setenv("TIERLOG_REMOTE_FETCH_MAX_WIAT_MS", "1000")
    with pytest.raises(InvalidConfigError) as caught:
        BrokerConfig.from_sources()
    message = str(caught.value)
    assert "TIERLOG_REMOTE_FETCH_MAX_WIAT_MS" in message
    assert f"did you mean {KEY!r}, set by {ENV}?" in message


def test_environment_value_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "abc")
    with pytest.raises(InvalidConfigError, match=re.escape("remote.fetch.max.wait.ms = 'abc'")):
        BrokerConfig.from_sources()


def _sources(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    file_value: int | None,
    env_value: int | None,
    override_value: int | None,
) -> BrokerConfig:
    file = None
    if file_value is not None:
        file = write(tmp_path / "server.properties", f"{KEY}={file_value}\n")
    if env_value is not None:
        monkeypatch.setenv(ENV, str(env_value))
    overrides = {KEY: override_value} if override_value is not None else None
    return BrokerConfig.from_sources(file=file, overrides=overrides)


@pytest.mark.parametrize(
    ("file_value", "env_value", "override_value", "expected"),
    [
        (None, None, None, 500),  # built-in default
        (600, None, None, 600),  # file over default
        (600, 700, None, 700),  # environment over file
        (600, 700, 800, 800),  # overrides over environment
        (None, 700, None, 700),
        (600, None, 800, 800),
        (None, 700, 800, 800),
    ],
)
def test_precedence_defaults_file_environment_overrides(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    file_value: int | None,
    env_value: int | None,
    override_value: int | None,
    expected: int,
) -> None:
    config = _sources(
        tmp_path,
        monkeypatch,
        file_value=file_value,
        env_value=env_value,
        override_value=override_value,
    )
    assert config[KEY] == expected


def test_each_layer_keeps_the_keys_higher_layers_do_not_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = write(
        tmp_path / "server.toml",
        "[num]\npartitions = 2\n[broker]\nid = 2\n[remote.fetch.max.wait]\nms = 600\n",
    )
    monkeypatch.setenv("TIERLOG_BROKER_ID", "3")
    monkeypatch.setenv(ENV, "700")
    config = BrokerConfig.from_sources(file=file, overrides={KEY: 800})
    assert config["num.partitions"] == 2
    assert config["broker.id"] == 3
    assert config[KEY] == 800
    assert config["request.timeout.ms"] == 30000


def test_precedence_holds_across_synonyms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = write(tmp_path / "server.properties", f"{KEY}=600\n")
    monkeypatch.setenv("TIERLOG_FETCH_REMOTE_MAX_WAIT_MS", "700")
    assert BrokerConfig.from_sources(file=file)[KEY] == 700
    config = BrokerConfig.from_sources(file=file, overrides={"fetch.remote.max.wait.ms": 800})
    assert config[KEY] == 800


def test_load_sources_returns_the_raw_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = write(tmp_path / "server.properties", "num.partitions=2\nfetch.remote.max.wait.ms=600\n")
    monkeypatch.setenv("TIERLOG_BROKER_ID", "3")
    raw = load_sources(file, overrides={"cluster.id": "c1"})
    assert raw == {"num.partitions": "2", KEY: "600", "broker.id": "3", "cluster.id": "c1"}
    config = BrokerConfig.from_sources(file, overrides={"cluster.id": "c1"})
    assert config.originals() == raw


def test_a_value_only_valid_together_with_a_higher_layer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = write(tmp_path / "server.properties", f"{KEY}=40000\n")
    with pytest.raises(InvalidConfigError, match=re.escape("must be below request.timeout.ms")):
        BrokerConfig.from_sources(file=file)
    monkeypatch.setenv("TIERLOG_REQUEST_TIMEOUT_MS", "60000")
    assert BrokerConfig.from_sources(file=file)[KEY] == 40000
