"""The ``group.consumer.*`` broker keys: Kafka's defaults, and refused values naming the key."""

from __future__ import annotations

import pytest
from tierlog.config.live import BrokerConfig
from tierlog.errors import InvalidConfigError


def test_kafka_4_defaults() -> None:
    config = BrokerConfig.from_mapping({})
    assert config.get_list("group.coordinator.rebalance.protocols") == ("classic", "consumer")
    assert config.get_list("group.consumer.assignors") == ("uniform", "range")
    assert config.get_int("group.consumer.heartbeat.interval.ms") == 5000
    assert config.get_int("group.consumer.session.timeout.ms") == 45000
    assert config.get_int("group.consumer.max.size") == 2147483647


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"group.consumer.session.timeout.ms": 1000}, "group.consumer.session.timeout.ms"),
        ({"group.consumer.heartbeat.interval.ms": 20000}, "group.consumer.heartbeat.interval.ms"),
        (
            {
                "group.consumer.min.heartbeat.interval.ms": 100,
                "group.consumer.heartbeat.interval.ms": 2000,
                "group.consumer.min.session.timeout.ms": 100,
                "group.consumer.session.timeout.ms": 1000,
            },
            "group.consumer.heartbeat.interval.ms",
        ),
        ({"group.consumer.assignors": "uniform,sticky"}, "group.consumer.assignors"),
        (
            {"group.coordinator.rebalance.protocols": "consumer"},
            "group.coordinator.rebalance.protocols",
        ),
        (
            {"group.coordinator.rebalance.protocols": "classic,share"},
            "group.coordinator.rebalance.protocols",
        ),
        ({"group.consumer.max.size": 0}, "group.consumer.max.size"),
    ],
)
def test_bad_values_are_refused_naming_the_key(settings: dict, key: str) -> None:
    with pytest.raises(InvalidConfigError) as caught:
        BrokerConfig.from_mapping(settings)
    assert caught.value.key == key
    assert key in str(caught.value)


def test_small_timeouts_for_fast_groups() -> None:
    config = BrokerConfig.from_mapping(
        {
            "group.consumer.min.heartbeat.interval.ms": 100,
            "group.consumer.heartbeat.interval.ms": 200,
            "group.consumer.min.session.timeout.ms": 1000,
            "group.consumer.session.timeout.ms": 1500,
        }
    )
    assert config.get_int("group.consumer.session.timeout.ms") == 1500
