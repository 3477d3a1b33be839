"""Plugin discovery, the switches, and choosing a provider per role."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pluggy
import pytest
import tierlog
from tierlog.config import BrokerConfig
from tierlog.errors import (
    BackendNotFoundError,
    DuplicateProviderError,
    PluginError,
    PluginLoadError,
)
from tierlog.host import PluginHost
from tierlog.plugins import make_plugin_manager

from .distributions import install_distribution
from .recording import RecordingMetadata, RecordingStorage

GOOD_PLUGIN = """
import tierlog

class Plugin:
    instances = 0

    def __init__(self):
        Plugin.instances += 1

    @tierlog.hookimpl
    def tierlog_close(self):
        pass
"""


def test_entry_point_plugins_are_discovered_with_their_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_distribution(
        tmp_path,
        monkeypatch,
        dist="acme-tierlog",
        version="2.5",
        entry_points={"acme": "acme_plugin:Plugin"},
        modules={"acme_plugin": GOOD_PLUGIN},
    )
    first = make_plugin_manager()
    second = make_plugin_manager()
    rows = {row.name: row for row in first.info()}
    assert rows["acme"].distribution == "acme-tierlog"
    assert rows["acme"].version == "2.5"
    assert rows["acme"].hooks == ("tierlog_close",)
    # a class entry point gives every runtime its own instance
    assert first.get_plugin("acme") is not second.get_plugin("acme")


def test_a_broken_entry_point_names_itself_and_its_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_distribution(
        tmp_path,
        monkeypatch,
        dist="broken-dist",
        entry_points={"broken": "broken_plugin"},
        modules={"broken_plugin": "import no_such_module_x\n"},
    )
    with pytest.raises(
        PluginLoadError, match=r"'broken' from distribution 'broken-dist'.*no_such_module_x"
    ):
        make_plugin_manager()


def test_blocked_plugins_are_never_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_distribution(
        tmp_path,
        monkeypatch,
        dist="broken-dist",
        entry_points={"broken": "broken_plugin"},
        modules={"broken_plugin": "raise SystemError('imported')\n"},
    )
    monkeypatch.setenv("TIERLOG_DISABLED_PLUGINS", "broken")
    pm = make_plugin_manager()
    assert "broken" not in dict(pm.list_name_plugin()) or pm.get_plugin("broken") is None
    assert pm.is_blocked("broken")


def test_autoload_switch_loads_only_named_entry_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_distribution(
        tmp_path,
        monkeypatch,
        dist="two-plugins",
        entry_points={"wanted": "acme_plugin:Plugin", "unwanted": "never_imported"},
        modules={"acme_plugin": GOOD_PLUGIN, "never_imported": "raise SystemError('imported')\n"},
    )
    monkeypatch.setenv("TIERLOG_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("TIERLOG_PLUGINS", "wanted")
    pm = make_plugin_manager()
    assert pm.get_plugin("wanted") is not None
    assert pm.get_plugin("unwanted") is None


def test_two_distributions_with_the_same_plugin_name_is_an_error_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_distribution(
        tmp_path / "a",
        monkeypatch,
        dist="first-dist",
        entry_points={"same": "acme_plugin:Plugin"},
        modules={"acme_plugin": GOOD_PLUGIN},
    )
    install_distribution(
        tmp_path / "b",
        monkeypatch,
        dist="second-dist",
        entry_points={"same": "acme_plugin:Plugin"},
        modules={},
    )
    with pytest.raises(
        DuplicateProviderError, match=r"first-dist.*second-dist|second-dist.*first-dist"
    ):
        make_plugin_manager()


def test_a_misspelled_hook_fails_at_startup() -> None:
    class Typo:
        @tierlog.hookimpl
        def tierlog_on_broker_redy(self, broker: Any) -> None:
            pass

    with pytest.raises(pluggy.PluginValidationError, match="unknown hook 'tierlog_on_broker_redy'"):
        make_plugin_manager(load_entry_points=False, extra_plugins={"typo": Typo()})


def test_a_provider_missing_required_hooks_is_rejected() -> None:
    class HalfStorage:
        @tierlog.hookimpl
        def tierlog_fetch_index(self, remote_log_segment_metadata: Any, index_type: Any) -> Any:
            return None

    with pytest.raises(
        PluginError,
        match=r"'half' provides RemoteStorageManager but does not implement: "
        r"tierlog_copy_log_segment_data",
    ):
        make_plugin_manager(load_entry_points=False, extra_plugins={"half": HalfStorage()})


def test_tracing_prints_hook_calls(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIERLOG_TRACE_PLUGINS", "1")
    calls: list[Any] = []
    pm = make_plugin_manager(
        load_entry_points=False,
        extra_plugins={
            "store": RecordingStorage("store", calls),
            "meta": RecordingMetadata("meta", calls),
        },
    )
    host = PluginHost.create(
        BrokerConfig.from_mapping({"remote.log.storage.system.enable": "true"}), plugin_manager=pm
    )
    host.start()
    host.close()
    err = capsys.readouterr().err
    assert "tierlog_configure" in err and "tierlog_close" in err


def both(calls: list[Any], *storage_names: str) -> dict[str, Any]:
    plugins: dict[str, Any] = {name: RecordingStorage(name, calls) for name in storage_names}
    plugins["meta"] = RecordingMetadata("meta", calls)
    return plugins


def host_for(plugins: dict[str, Any], **settings: str) -> PluginHost:
    pm = make_plugin_manager(load_entry_points=False, extra_plugins=plugins)
    config = BrokerConfig.from_mapping({"remote.log.storage.system.enable": "true", **settings})
    return PluginHost.create(config, plugin_manager=pm)


def test_the_named_provider_is_used_and_the_other_stays_dormant(tmp_path: Path) -> None:
    calls: list[Any] = []
    host = host_for(both(calls, "s3like", "local"), **{"remote.log.storage.manager.name": "local"})
    host.start()
    # the built-in topic-based metadata manager is the default, registered like any plugin
    assert host.chosen == {"RemoteStorageManager": "local", "RemoteLogMetadataManager": "topic"}
    assert ("s3like", "configure") not in calls and ("meta", "configure") not in calls
    assert host.plugin_manager.sources["topic"].builtin
    assert host.storage.provider == "local"
    host.close()


def test_an_unknown_provider_name_lists_the_installed_ones() -> None:
    with pytest.raises(
        BackendNotFoundError, match=r"'gcs'.*installed RemoteStorageManager plugins: s3like, local"
    ):
        host_for(both([], "s3like", "local"), **{"remote.log.storage.manager.name": "gcs"})


def test_two_providers_and_no_choice_is_an_error_naming_both() -> None:
    with pytest.raises(
        DuplicateProviderError, match=r"\(s3like, local\).*remote.log.storage.manager.name"
    ):
        host_for(both([], "s3like", "local"))


def test_the_class_name_synonym_selects_by_plugin_name() -> None:
    host = host_for(
        both([], "s3like", "local"), **{"remote.log.storage.manager.class.name": "s3like"}
    )
    assert host.chosen["RemoteStorageManager"] == "s3like"


def test_with_tiering_off_no_provider_is_configured() -> None:
    calls: list[Any] = []
    pm = make_plugin_manager(load_entry_points=False, extra_plugins=both(calls, "local"))
    host = PluginHost.create(BrokerConfig.from_mapping({}), plugin_manager=pm)
    host.start()
    assert calls == []
    with pytest.raises(BackendNotFoundError, match=r"remote\.log\.storage\.system\.enable"):
        _ = host.storage
    host.close()
