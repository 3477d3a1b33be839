"""Dynamic updates of the live broker configuration, listeners and thread safety."""

from __future__ import annotations

import logging
import re
import threading

import pytest
from tierlog.config import BrokerConfig
from tierlog.errors import InvalidConfigError

KEY = "remote.fetch.max.wait.ms"
COPY_RATE = "remote.log.manager.copy.max.bytes.per.second"
FETCH_RATE = "remote.log.manager.fetch.max.bytes.per.second"


def test_update_applies_a_dynamic_key_and_notifies_its_listener() -> None:
    config = BrokerConfig.from_mapping({})
    calls: list[tuple[str, object, object]] = []
    config.add_listener(KEY, lambda key, old, new: calls.append((key, old, new)))
    changed = config.update({KEY: "800"})
    assert changed == {KEY: (500, 800)}
    assert config[KEY] == 800
    assert calls == [(KEY, 500, 800)]


def test_listeners_see_the_new_values_when_called() -> None:
    config = BrokerConfig.from_mapping({})
    seen: list[object] = []
    config.add_listener(KEY, lambda key, old, new: seen.append(config[KEY]))
    config.update({KEY: 800})
    assert seen == [800]


def test_listener_only_hears_about_its_own_keys_and_real_changes() -> None:
    config = BrokerConfig.from_mapping({})
    calls: list[str] = []
    config.add_listener([COPY_RATE, FETCH_RATE], lambda key, old, new: calls.append(key))
    config.update({KEY: 800})
    config.update({COPY_RATE: 1000, FETCH_RATE: 2000})
    config.update({COPY_RATE: 1000})
    assert calls == [COPY_RATE, FETCH_RATE]


def test_update_and_listeners_accept_synonyms() -> None:
    config = BrokerConfig.from_mapping({})
    calls: list[tuple[str, object, object]] = []
    config.add_listener("fetch.remote.max.wait.ms", lambda *args: calls.append(args))
    config.update({"fetch.remote.max.wait.ms": 900})
    assert config[KEY] == 900
    assert calls == [(KEY, 500, 900)]


def test_removed_listener_is_not_called() -> None:
    config = BrokerConfig.from_mapping({})
    calls: list[object] = []
    remove = config.add_listener(KEY, lambda *args: calls.append(args))
    remove()
    config.update({KEY: 800})
    assert calls == []


def test_static_key_update_is_rejected_and_nothing_changes() -> None:
    config = BrokerConfig.from_mapping({})
    calls: list[object] = []
    config.add_listener(KEY, lambda *args: calls.append(args))
    before = dict(config.snapshot())
    with pytest.raises(InvalidConfigError) as caught:
        config.update({KEY: 800, "log.segment.bytes": 1024})
    assert str(caught.value) == "'log.segment.bytes' is not dynamic; restart to change it"
    assert caught.value.key == "log.segment.bytes"
    assert dict(config.snapshot()) == before
    assert config[KEY] == 500
    assert calls == []


def test_plugin_keys_are_not_dynamic() -> None:
    config = BrokerConfig.from_mapping({"rsm.config.bucket": "a"})
    with pytest.raises(InvalidConfigError, match=re.escape("'rsm.config.bucket' is not dynamic")):
        config.update({"rsm.config.bucket": "b"})
    assert config.plugin_slice("rsm.config.") == {"bucket": "a"}


def test_update_validates_like_loading() -> None:
    config = BrokerConfig.from_mapping({})
    with pytest.raises(InvalidConfigError, match=re.escape("remote.fetch.max.wait.ms = 'abc'")):
        config.update({KEY: "abc"})
    with pytest.raises(InvalidConfigError, match=re.escape("must be at least 1")):
        config.update({KEY: 0})
    with pytest.raises(
        InvalidConfigError, match=re.escape("did you mean 'remote.fetch.max.wait.ms'")
    ):
        config.update({"remote.fetch.max.wiat.ms": 800})
    assert config[KEY] == 500


def test_update_checks_cross_key_rules_against_the_merged_config() -> None:
    config = BrokerConfig.from_mapping({"request.timeout.ms": 10000})
    calls: list[object] = []
    config.add_listener(KEY, lambda *args: calls.append(args))
    with pytest.raises(InvalidConfigError) as caught:
        config.update({KEY: 20000})
    assert str(caught.value) == (
        "remote.fetch.max.wait.ms = 20000 must be below request.timeout.ms (10000)"
    )
    assert config[KEY] == 500
    assert calls == []
    config.update({KEY: 9999})
    assert config[KEY] == 9999


def test_a_failing_listener_is_logged_and_does_not_stop_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = BrokerConfig.from_mapping({})
    calls: list[str] = []

    def broken(key: str, old: object, new: object) -> None:
        calls.append("broken")
        raise RuntimeError("listener bug")

    config.add_listener(KEY, broken)
    config.add_listener(KEY, lambda *args: calls.append("healthy"))
    with caplog.at_level(logging.ERROR, logger="tierlog.config.live"):
        config.update({KEY: 800, COPY_RATE: 1000})
    assert calls == ["broken", "healthy"]
    assert config[KEY] == 800
    assert config[COPY_RATE] == 1000
    assert any("listener bug" in (record.exc_text or "") for record in caplog.records)
    assert KEY in caplog.text


def test_listening_to_a_static_or_unknown_key_is_refused() -> None:
    config = BrokerConfig.from_mapping({})
    with pytest.raises(InvalidConfigError, match=re.escape("'log.segment.bytes' is not dynamic")):
        config.add_listener("log.segment.bytes", lambda *args: None)
    with pytest.raises(InvalidConfigError, match=re.escape("unknown configuration key")):
        config.add_listener("remote.fetch.max.wiat.ms", lambda *args: None)


def test_readers_never_see_half_an_update() -> None:
    config = BrokerConfig.from_mapping({})
    stop = threading.Event()
    torn: list[tuple[object, object]] = []

    def read() -> None:
        while not stop.is_set():
            snapshot = config.snapshot()
            if snapshot[COPY_RATE] != snapshot[FETCH_RATE]:
                torn.append((snapshot[COPY_RATE], snapshot[FETCH_RATE]))

    def write(offset: int) -> None:
        for value in range(1 + offset, 2000, 4):
            config.update({COPY_RATE: value, FETCH_RATE: value})

    readers = [threading.Thread(target=read) for _ in range(3)]
    writers = [threading.Thread(target=write, args=(offset,)) for offset in range(4)]
    for thread in readers + writers:
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    for thread in readers:
        thread.join()
    assert torn == []
    assert config[COPY_RATE] == config[FETCH_RATE]


def test_concurrent_updates_are_each_reported_once_in_order() -> None:
    config = BrokerConfig.from_mapping({})
    seen: list[tuple[object, object]] = []
    config.add_listener(COPY_RATE, lambda key, old, new: seen.append((old, new)))
    threads = [
        threading.Thread(target=config.update, args=({COPY_RATE: value},))
        for value in range(1, 201)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 200
    assert all(seen[i][1] == seen[i + 1][0] for i in range(len(seen) - 1))
    assert seen[-1][1] == config[COPY_RATE]


def test_lookup_of_an_unknown_key_is_a_key_error_with_a_suggestion() -> None:
    config = BrokerConfig.from_mapping({})
    with pytest.raises(KeyError, match=re.escape("did you mean 'remote.fetch.max.wait.ms'")):
        config["remote.fetch.max.wiat.ms"]
    assert config.get("rsm.config.absent", "fallback") == "fallback"
    assert "fetch.remote.max.wait.ms" in config
    assert "remote.fetch.max.wiat.ms" not in config


def test_typed_getters() -> None:
    config = BrokerConfig.from_mapping({"cluster.id": "c1"})
    assert config.get_int(KEY) == 500
    assert config.get_bool("auto.create.topics.enable") is True
    assert config.get_float("remote.log.manager.task.retry.jitter") == 0.2
    assert config.get_str("cluster.id") == "c1"
    assert config.get_list("log.dirs") == ("/tmp/tierlog-logs",)
    with pytest.raises(TypeError, match=re.escape("log.roll.ms is null, not an integer")):
        config.get_int("log.roll.ms")
