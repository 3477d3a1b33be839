"""The plugin lifecycle: order, failure handling and configuration slices, through PluginHost."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from tierlog.config import BrokerConfig
from tierlog.errors import LifecycleError, PluginCallError
from tierlog.host import LifecycleState, PluginHost
from tierlog.metrics import MetricName, MetricsRegistry
from tierlog.plugins import make_plugin_manager

from .recording import RecordingMetadata, RecordingPlugin, RecordingStorage

TIERED = {
    "remote.log.storage.system.enable": "true",
    "remote.log.storage.manager.name": "store",
    "remote.log.metadata.manager.name": "meta",
}


def make_host(
    plugins: dict[str, Any], settings: dict[str, Any] | None = None, **kwargs: Any
) -> PluginHost:
    pm = make_plugin_manager(load_entry_points=False, extra_plugins=plugins)
    return PluginHost.create(
        BrokerConfig.from_mapping(settings if settings is not None else TIERED),
        plugin_manager=pm,
        **kwargs,
    )


def recording_set(calls: list[Any], fail: dict[str, str] | None = None) -> dict[str, Any]:
    fail = fail or {}
    return {
        "store": RecordingStorage("store", calls, fail.get("store")),
        "meta": RecordingMetadata("meta", calls, fail.get("meta")),
        "watcher": RecordingPlugin("watcher", calls, fail.get("watcher")),
    }


def test_full_lifecycle_runs_each_phase_for_every_plugin_in_order() -> None:
    calls: list[Any] = []
    host = make_host(recording_set(calls))
    host.start()
    host.broker_ready(broker="the-broker")
    host.close()
    names = ["store", "meta", "watcher"]
    assert calls == (
        [(n, "configure") for n in names]
        + [(n, "register_metrics") for n in names]
        + [(n, "on_broker_ready") for n in names]
        + [(n, "close") for n in reversed(names)]
    )
    assert host.state is LifecycleState.CLOSED


def test_configure_failure_stops_everything_and_closes_only_the_configured() -> None:
    calls: list[Any] = []
    host = make_host(recording_set(calls, fail={"meta": "configure"}))
    with pytest.raises(PluginCallError, match=r"plugin 'meta' failed in configure") as caught:
        host.start()
    assert caught.value.plugin == "meta"
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert calls == [("store", "configure"), ("meta", "configure"), ("store", "close")]
    assert host.state is LifecycleState.CLOSED


def test_metrics_failure_stops_before_broker_ready_and_closes_all() -> None:
    calls: list[Any] = []
    host = make_host(recording_set(calls, fail={"meta": "register_metrics"}))
    with pytest.raises(PluginCallError, match="'meta' failed in register_metrics"):
        host.start()
    assert calls == [
        ("store", "configure"),
        ("meta", "configure"),
        ("watcher", "configure"),
        ("store", "register_metrics"),
        ("meta", "register_metrics"),
        ("watcher", "close"),
        ("meta", "close"),
        ("store", "close"),
    ]
    with pytest.raises(LifecycleError):
        host.broker_ready(broker=None)


def test_close_reaches_every_plugin_when_one_raises() -> None:
    calls: list[Any] = []
    host = make_host(recording_set(calls, fail={"meta": "close"}))
    host.start()
    with pytest.raises(PluginCallError, match="'meta' failed in close"):
        host.close()
    assert [c for c in calls if c[1] == "close"] == [
        ("watcher", "close"),
        ("meta", "close"),
        ("store", "close"),
    ]
    host.close()  # idempotent: nothing is closed twice
    assert len([c for c in calls if c[1] == "close"]) == 3


def test_broker_ready_failure_is_logged_and_does_not_stop_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[Any] = []
    host = make_host(recording_set(calls, fail={"store": "on_broker_ready"}))
    host.start()
    with caplog.at_level(logging.ERROR, logger="tierlog.host"):
        host.broker_ready(broker="b")
    assert [c for c in calls if c[1] == "on_broker_ready"] == [
        ("store", "on_broker_ready"),
        ("meta", "on_broker_ready"),
        ("watcher", "on_broker_ready"),
    ]
    assert "'store' failed in on_broker_ready" in caplog.text
    assert isinstance(host.broker_ready_errors["store"], RuntimeError)
    assert host.state is LifecycleState.READY
    host.close()


def test_phases_out_of_order_are_refused() -> None:
    host = make_host(recording_set([]))
    with pytest.raises(LifecycleError, match="cannot broker_ready"):
        host.broker_ready(broker=None)
    host.start()
    with pytest.raises(LifecycleError, match="cannot start"):
        host.start()
    host.close()
    with pytest.raises(LifecycleError, match="not available"):
        _ = host.storage


def test_each_plugin_gets_only_its_own_configuration_slice() -> None:
    calls: list[Any] = []
    plugins = recording_set(calls)
    settings = {
        **TIERED,
        "rsm.config.bucket": "b1",
        "plugin.store.region": "eu",
        "rlmm.config.topic.partitions": "7",
        "plugin.watcher.level": "loud",
        "plugin.nobody.x": "1",
    }
    host = make_host(plugins, settings)
    host.start()
    assert plugins["store"].config == {"bucket": "b1", "region": "eu"}
    assert plugins["meta"].config == {"topic.partitions": "7"}
    assert plugins["watcher"].config == {"level": "loud"}
    assert plugins["store"].context.roles == ("RemoteStorageManager", "BrokerReadyCallback")
    assert plugins["watcher"].context.roles == ("BrokerReadyCallback",)
    host.close()


def test_plugin_metrics_are_tagged_with_the_plugin_and_removed_at_close() -> None:
    registry = MetricsRegistry()
    plugins = recording_set([])
    host = make_host(plugins, metrics=registry)
    host.start()
    plugins["store"].metrics.counter(MetricName("Store", "Uploads"))
    (name,) = [n for n in registry.names() if n.name == "Uploads"]
    assert dict(name.tags)["plugin"] == "store"
    host.close()
    assert [n for n in registry.names() if n.name == "Uploads"] == []
