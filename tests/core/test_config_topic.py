"""Topic configuration: defaults from the broker, overrides, and the tiered-storage rules."""

from __future__ import annotations

import re

import pytest
from tierlog.config import TOPIC_CONFIG, BrokerConfig, TopicConfig, resolve_topic_config
from tierlog.errors import InvalidConfigError

HOUR_MS = 3_600_000
TIERED_BROKER = {"remote.log.storage.system.enable": True}


def test_defaults_are_kafkas_when_the_broker_uses_its_defaults() -> None:
    topic = resolve_topic_config({}, BrokerConfig.from_mapping({}))
    assert topic["retention.ms"] == 168 * HOUR_MS
    assert topic["segment.ms"] == 168 * HOUR_MS
    assert topic["segment.bytes"] == 1073741824
    assert topic["cleanup.policy"] == ("delete",)
    assert topic["local.retention.ms"] == -2
    assert topic["local.retention.bytes"] == -2
    assert topic["flush.ms"] == 2**63 - 1
    assert topic["remote.storage.enable"] is False
    assert topic.overrides == {}
    assert dict(topic.values) == {key.name: key.default for key in TOPIC_CONFIG}


def test_defaults_come_from_the_broker_counterparts() -> None:
    broker = BrokerConfig.from_mapping(
        {
            "log.segment.bytes": 1000,
            "log.roll.hours": 2,
            "log.local.retention.ms": 1000,
            "log.retention.bytes": 5000,
            "message.max.bytes": 2048,
            "log.segment.delete.delay.ms": 5,
            "compression.type": "zstd",
            "log.flush.interval.ms": 99,
        }
    )
    topic = resolve_topic_config({}, broker)
    assert topic["segment.bytes"] == 1000
    assert topic["segment.ms"] == 2 * HOUR_MS
    assert topic["local.retention.ms"] == 1000
    assert topic["retention.bytes"] == 5000
    assert topic["max.message.bytes"] == 2048
    assert topic["file.delete.delay.ms"] == 5
    assert topic["compression.type"] == "zstd"
    assert topic["flush.ms"] == 99
    assert TOPIC_CONFIG["retention.ms"].inherited_from == "log.retention.ms"


@pytest.mark.parametrize(
    ("broker", "expected"),
    [
        ({"log.retention.hours": 2}, 2 * HOUR_MS),
        ({"log.retention.hours": 2, "log.retention.minutes": 3}, 3 * 60_000),
        ({"log.retention.hours": 2, "log.retention.minutes": 3, "log.retention.ms": 4}, 4),
        ({"log.retention.hours": -1}, -1),
        ({"log.retention.ms": -1}, -1),
    ],
)
def test_retention_ms_follows_kafkas_ms_minutes_hours_precedence(
    broker: dict[str, object], expected: int
) -> None:
    assert resolve_topic_config({}, broker)["retention.ms"] == expected


def test_overrides_win_and_are_parsed() -> None:
    topic = resolve_topic_config(
        {"retention.ms": "60000", "cleanup.policy": "compact"}, BrokerConfig.from_mapping({})
    )
    assert topic["retention.ms"] == 60000
    assert topic["cleanup.policy"] == ("compact",)
    assert topic.overrides == {"retention.ms": 60000, "cleanup.policy": ("compact",)}


def test_unknown_and_invalid_topic_keys() -> None:
    broker = BrokerConfig.from_mapping({})
    with pytest.raises(InvalidConfigError, match=re.escape("did you mean 'retention.ms'")):
        resolve_topic_config({"retention.mss": 1}, broker)
    with pytest.raises(
        InvalidConfigError, match=re.escape("segment.bytes = 10: must be at least 14")
    ):
        resolve_topic_config({"segment.bytes": 10}, broker)
    with pytest.raises(
        InvalidConfigError, match=re.escape("unknown configuration key 'rsm.config.x'")
    ):
        resolve_topic_config({"rsm.config.x": 1}, broker)


def test_remote_storage_needs_the_broker_switch() -> None:
    with pytest.raises(
        InvalidConfigError, match=re.escape("needs remote.log.storage.system.enable")
    ):
        resolve_topic_config({"remote.storage.enable": "true"}, BrokerConfig.from_mapping({}))
    topic = resolve_topic_config({"remote.storage.enable": "true"}, TIERED_BROKER)
    assert topic["remote.storage.enable"] is True


def test_compacted_topics_cannot_be_tiered() -> None:
    with pytest.raises(
        InvalidConfigError, match=re.escape("compacted topics cannot be tiered")
    ) as caught:
        resolve_topic_config(
            {"remote.storage.enable": True, "cleanup.policy": "compact,delete"}, TIERED_BROKER
        )
    assert caught.value.key == "remote.storage.enable"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"retention.ms": 1000, "local.retention.ms": 2000},
            r"local.retention.ms = 2000 must not be above retention.ms \(1000\)",
        ),
        (
            {"retention.ms": 1000, "local.retention.ms": -1},
            "local.retention.ms = -1 is only allowed when retention.ms is -1",
        ),
        (
            {"retention.bytes": 1000, "local.retention.bytes": 2000},
            r"local.retention.bytes = 2000 must not be above retention.bytes \(1000\)",
        ),
        (
            {"local.retention.bytes": -1, "retention.bytes": 10},
            "local.retention.bytes = -1 is only allowed when retention.bytes is -1",
        ),
    ],
)
def test_local_retention_must_fit_in_total_retention(
    overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        resolve_topic_config({"remote.storage.enable": True, **overrides}, TIERED_BROKER)


@pytest.mark.parametrize(
    "overrides",
    [
        {"retention.ms": 1000, "local.retention.ms": 1000},
        {"retention.ms": 1000, "local.retention.ms": -2},
        {"retention.ms": -1, "local.retention.ms": -1},
        {"retention.ms": -1, "local.retention.ms": 10**12},
        {"retention.bytes": -1, "local.retention.bytes": 10},
    ],
)
def test_local_retention_allowed_values(overrides: dict[str, object]) -> None:
    topic = resolve_topic_config({"remote.storage.enable": True, **overrides}, TIERED_BROKER)
    assert topic.overrides == {"remote.storage.enable": True, **overrides}


def test_local_retention_is_not_checked_without_remote_storage() -> None:
    topic = resolve_topic_config({"retention.ms": 1000, "local.retention.ms": 2000}, {})
    assert topic["local.retention.ms"] == 2000


def test_inherited_local_retention_is_checked_against_the_topic_total() -> None:
    broker = {**TIERED_BROKER, "log.local.retention.ms": 2 * HOUR_MS}
    with pytest.raises(
        InvalidConfigError, match=re.escape("local.retention.ms = 7200000 must not be above")
    ):
        resolve_topic_config({"remote.storage.enable": True, "retention.ms": HOUR_MS}, broker)


def test_copy_disable_keeps_local_retention_equal_to_total() -> None:
    base = {"remote.storage.enable": True, "remote.log.copy.disable": True, "retention.ms": 1000}
    with pytest.raises(InvalidConfigError, match=re.escape("must be -2 or equal retention.ms")):
        resolve_topic_config({**base, "local.retention.ms": 500}, TIERED_BROKER)
    resolve_topic_config({**base, "local.retention.ms": 1000}, TIERED_BROKER)
    resolve_topic_config({**base, "local.retention.ms": -2}, TIERED_BROKER)


def test_turning_remote_storage_off_needs_delete_on_disable() -> None:
    topic = resolve_topic_config({"remote.storage.enable": True}, TIERED_BROKER)
    with pytest.raises(InvalidConfigError, match=re.escape("remote.log.delete.on.disable=true")):
        topic.with_changes({"remote.storage.enable": False}, TIERED_BROKER)
    off = topic.with_changes(
        {"remote.storage.enable": False, "remote.log.delete.on.disable": True}, TIERED_BROKER
    )
    assert off["remote.storage.enable"] is False


def test_with_changes_validates_and_none_removes_an_override() -> None:
    broker = BrokerConfig.from_mapping({"log.retention.hours": 5})
    topic = resolve_topic_config({"retention.ms": 1000}, broker)
    changed = topic.with_changes({"segment.bytes": 2048}, broker)
    assert changed.overrides == {"retention.ms": 1000, "segment.bytes": 2048}
    reverted = changed.with_changes({"retention.ms": None}, broker)
    assert reverted["retention.ms"] == 5 * HOUR_MS
    assert reverted.overrides == {"segment.bytes": 2048}
    with pytest.raises(InvalidConfigError, match=re.escape("segment.bytes = 'big'")):
        topic.with_changes({"segment.bytes": "big"}, broker)
    assert topic["retention.ms"] == 1000


def test_topic_configs_are_immutable_hashable_values() -> None:
    first = resolve_topic_config({"retention.ms": 1000}, {})
    second = resolve_topic_config({"retention.ms": "1000"}, {})
    assert first == second
    assert hash(first) == hash(second)
    assert first != resolve_topic_config({"retention.ms": 2000}, {})
    with pytest.raises(TypeError):
        first.values["retention.ms"] = 5  # type: ignore[index]
    assert isinstance(first, TopicConfig)


def test_every_topic_key_is_dynamic() -> None:
    assert all(key.dynamic for key in TOPIC_CONFIG)
