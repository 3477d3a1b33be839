"""``tierlog config``: listing every key, and ``--check`` of configuration files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from tierlog import plugins
from tierlog.cli.config_cmd import config_command
from tierlog.config import BROKER_CONFIG, TOPIC_CONFIG, ConfigDef, ConfigKey, ConfigType, at_least

DEMO_DEFINITION = ConfigDef(
    keys=(
        ConfigKey("root", ConfigType.STRING, "memory://demo", doc="Where segments go."),
        ConfigKey("api.secret", ConfigType.PASSWORD, "default-s3cr3t", doc="API secret."),
        ConfigKey("api.token.ttl", ConfigType.INT, 60, validator=at_least(1), doc="Token TTL."),
    )
)


@pytest.fixture
def demo_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed plugin declaring keys, as the plugin manager would report it."""
    section = plugins.ConfigSection(
        plugin="demo", prefix="plugin.demo.", definition=DEMO_DEFINITION
    )
    monkeypatch.setattr(plugins, "plugin_config_sections", lambda: [section])


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(config_command, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_table_lists_remote_fetch_max_wait_with_default_and_dynamic_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run()
    assert code == 0
    lines = out.splitlines()
    index = next(i for i, line in enumerate(lines) if "│ remote.fetch.max.wait.ms " in line)
    assert "int, default 500, dynamic" in lines[index + 1]
    segment = next(i for i, line in enumerate(lines) if "│ log.segment.bytes " in line)
    assert "int, default 1073741824, static" in lines[segment + 1]


def test_wide_table_has_a_column_per_fact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run()
    assert code == 0
    row = next(line for line in out.splitlines() if "│ remote.fetch.max.wait.ms " in line)
    cells = [cell.strip() for cell in row.strip("│").split("│")]
    assert cells[:5] == ["remote.fetch.max.wait.ms", "int", "500", "dynamic", "at least 1"]


def test_sections_are_broker_then_topic_then_plugins(
    demo_plugin: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run()
    assert code == 0
    titles = [
        line.strip() for line in out.splitlines() if re.match(r"^(broker|topic|plugin)", line)
    ]
    assert titles == ["broker", "topic", "plugin demo (keys under plugin.demo.)"]
    assert "plugin.demo.root" in out


def test_json_output(demo_plugin: None) -> None:
    code, out, _ = run("--json")
    assert code == 0
    document = json.loads(out)
    assert [section["section"] for section in document] == ["broker", "topic", "plugin demo"]
    broker = {key["name"]: key for key in document[0]["keys"]}
    assert len(broker) == len(BROKER_CONFIG)
    assert broker["remote.fetch.max.wait.ms"] == {
        "name": "remote.fetch.max.wait.ms",
        "type": "int",
        "default": 500,
        "required": False,
        "valid": "at least 1",
        "dynamic": True,
        "importance": "medium",
        "synonyms": ["fetch.remote.max.wait.ms"],
        "inherited_from": None,
        "doc": BROKER_CONFIG["remote.fetch.max.wait.ms"].doc,
    }
    assert broker["log.dirs"]["default"] == ["/tmp/tierlog-logs"]
    topic = {key["name"]: key for key in document[1]["keys"]}
    assert len(topic) == len(TOPIC_CONFIG)
    assert topic["retention.ms"]["inherited_from"] == "log.retention.ms"
    demo = {key["name"]: key for key in document[2]["keys"]}
    assert demo["plugin.demo.root"]["default"] == "memory://demo"
    assert demo["plugin.demo.api.secret"]["default"] == "[hidden]"


def test_secret_defaults_never_print(demo_plugin: None, monkeypatch: pytest.MonkeyPatch) -> None:
    for columns in ("80", "200"):
        monkeypatch.setenv("COLUMNS", columns)
        _, out, _ = run()
        assert "default-s3cr3t" not in out
        assert "[hidden]" in out
    _, out, _ = run("--json")
    assert "default-s3cr3t" not in out


def test_core_sections_only_while_plugins_cannot_be_listed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(plugins, "plugin_config_sections")
    code, out, _ = run("--json")
    assert code == 0
    assert [section["section"] for section in json.loads(out)] == ["broker", "topic"]


def test_check_accepts_a_valid_file(tmp_path: Path) -> None:
    path = tmp_path / "server.toml"
    path.write_text('[remote.fetch.max.wait]\nms = 900\n[rsm.config]\nbucket = "b"\n')
    code, out, _ = run("--check", str(path))
    assert code == 0
    assert out.strip() == f"OK: {path}"


def test_check_rejects_a_bad_key_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=3\nremote.fetch.max.wiat.ms=900\n")
    code, out, err = run("--check", str(path))
    assert code == 2
    assert "OK" not in out
    assert "unknown configuration key 'remote.fetch.max.wiat.ms'" in err
    assert "did you mean 'remote.fetch.max.wait.ms'?" in err


def test_check_applies_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "server.properties"
    path.write_text("remote.fetch.max.wait.ms=20000\n")
    assert run("--check", str(path))[0] == 0
    monkeypatch.setenv("TIERLOG_REQUEST_TIMEOUT_MS", "10000")
    code, _, err = run("--check", str(path))
    assert code == 2
    assert "remote.fetch.max.wait.ms = 20000 must be below request.timeout.ms (10000)" in err


def test_check_validates_plugin_keys_and_hides_secrets(tmp_path: Path, demo_plugin: None) -> None:
    path = tmp_path / "server.properties"
    path.write_text("plugin.demo.rooot=memory://x\n")
    code, _, err = run("--check", str(path))
    assert code == 2
    assert "unknown configuration key 'plugin.demo.rooot'" in err
    assert "did you mean 'plugin.demo.root'?" in err

    path.write_text("plugin.demo.api.token.ttl=tok-9f8e7d\n")
    code, _, err = run("--check", str(path))
    assert code == 2
    assert "plugin.demo.api.token.ttl = [hidden]: expected an integer" in err
    assert "tok-9f8e7d" not in err

    path.write_text("plugin.demo.api.secret=s3cr3t\nplugin.demo.root=memory://y\n")
    assert run("--check", str(path))[0] == 0


def test_check_of_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = run("--check", str(tmp_path / "absent.toml"))
    assert code == 2
    assert "does not exist" in err
