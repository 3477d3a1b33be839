"""Plugins that declare configuration keys or add commands to the ``tierlog`` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tierlog
from tierlog.config import REQUIRED, BrokerConfig, ConfigDef, ConfigKey, ConfigType
from tierlog.config.validators import at_least
from tierlog.errors import InvalidConfigError
from tierlog.host import PluginHost
from tierlog.plugins import make_plugin_manager, plugin_config_sections

from .distributions import install_distribution
from .recording import RecordingMetadata, RecordingStorage

DEFINITIONS = ConfigDef(
    keys=(
        ConfigKey("url", ConfigType.STRING, REQUIRED, doc="Where segments go."),
        ConfigKey("chunk.size", ConfigType.INT, 4096, doc="Chunk size.", validator=at_least(1024)),
        ConfigKey("secret.key", ConfigType.PASSWORD, None, doc="Access secret."),
    )
)


class TypedStorage(RecordingStorage):
    @tierlog.hookimpl
    def tierlog_config_definitions(self) -> ConfigDef:
        return DEFINITIONS


def start(settings: dict[str, str]) -> TypedStorage:
    store = TypedStorage("typed", [])
    pm = make_plugin_manager(
        load_entry_points=False, extra_plugins={"typed": store, "meta": RecordingMetadata("m", [])}
    )
    base = {"remote.log.storage.system.enable": "true", "remote.log.storage.manager.name": "typed"}
    host = PluginHost.create(BrokerConfig.from_mapping({**base, **settings}), plugin_manager=pm)
    host.start()
    host.close()
    return store


def test_a_declared_slice_arrives_parsed_with_defaults() -> None:
    store = start({"rsm.config.url": "memory://x", "plugin.typed.chunk.size": "8192"})
    assert store.config is not None
    assert store.config["url"] == "memory://x"
    assert store.config["chunk.size"] == 8192
    assert store.config["secret.key"] is None


@pytest.mark.parametrize(
    "settings,full_key",
    [
        ({"rsm.config.url": "memory://x", "rsm.config.chunk.sise": "1"}, "rsm.config.chunk.sise"),
        (
            {"rsm.config.url": "memory://x", "plugin.typed.chunk.size": "12"},
            "plugin.typed.chunk.size",
        ),
        ({}, "url"),
    ],
)
def test_a_bad_slice_is_rejected_before_configure_naming_the_full_key(
    settings: dict[str, str], full_key: str
) -> None:
    with pytest.raises(InvalidConfigError, match="plugin 'typed'") as caught:
        start(settings)
    assert full_key in str(caught.value)
    assert caught.value.key is not None and caught.value.key.endswith(full_key)


def test_secrets_of_a_plugin_never_reach_the_error_text() -> None:
    with pytest.raises(InvalidConfigError) as caught:
        start(
            {
                "rsm.config.url": "memory://x",
                "rsm.config.secret.key": "hunter2",
                "rsm.config.x": "1",
            }
        )
    assert "rsm.config.x" in str(caught.value) and "hunter2" not in str(caught.value)
    store = start({"rsm.config.url": "memory://x", "rsm.config.secret.key": "hunter2"})
    assert store.config is not None
    assert "hunter2" not in repr(store.config["secret.key"])
    assert store.config["secret.key"].value == "hunter2"


PLUGIN_MODULE = '''
import click
import tierlog
from tierlog.config import ConfigDef, ConfigKey, ConfigType

@tierlog.hookimpl
def tierlog_register_cli_commands(cli):
    @cli.command("acme-hello")
    @click.argument("who")
    def hello(who):
        """Say hello."""
        click.echo(f"hello {who} from acme")

@tierlog.hookimpl
def tierlog_config_definitions():
    return ConfigDef(keys=(
        ConfigKey("colour", ConfigType.STRING, "blue", doc="Favourite colour."),
        ConfigKey("api.token", ConfigType.PASSWORD, "s3cr3t-default", doc="Token."),
    ))
'''


@pytest.fixture
def acme_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    site = tmp_path / "site"
    install_distribution(
        site,
        monkeypatch,
        dist="acme-tierlog",
        entry_points={"acme": "acme_cli"},
        modules={"acme_cli": PLUGIN_MODULE},
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERLOG_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    return env


def run_tierlog(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tierlog", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_plugin_adds_a_command_to_tierlog(acme_site: dict[str, str]) -> None:
    result = run_tierlog(acme_site, "acme-hello", "world")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "hello world from acme"


def test_tierlog_config_lists_plugin_keys_and_hides_their_secrets(
    acme_site: dict[str, str],
) -> None:
    sections = {s.plugin: s for s in plugin_config_sections()}
    assert sections["acme"].prefix == "plugin.acme."
    result = run_tierlog(acme_site, "config", "--json")
    assert result.returncode == 0, result.stderr
    assert "plugin.acme.colour" in result.stdout
    assert "s3cr3t-default" not in result.stdout


def test_tierlog_plugins_json_shows_the_plugin_with_its_hooks(acme_site: dict[str, str]) -> None:
    result = run_tierlog(acme_site, "plugins", "--json")
    assert result.returncode == 0, result.stderr
    rows: dict[str, Any] = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["acme"]["distribution"] == "acme-tierlog"
    assert rows["acme"]["hooks"] == ["tierlog_config_definitions", "tierlog_register_cli_commands"]
