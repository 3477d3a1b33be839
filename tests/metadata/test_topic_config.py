"""The topic-based metadata manager's configuration slice: Kafka's defaults, named errors."""

from __future__ import annotations

import pytest
from tierlog.errors import InvalidConfigError
from tierlog.metadata.topic_config import TopicBasedConfig


def test_defaults_are_kafkas() -> None:
    config = TopicBasedConfig.from_mapping({}, broker_id=3)
    assert (config.num_partitions, config.replication_factor, config.retention_ms) == (50, 3, -1)
    assert config.consume_wait_ms == 120_000
    assert (config.init_retry_interval_ms, config.init_retry_max_timeout_ms) == (100, 120_000)
    assert config.producer["client.id"] == "__remote_log_metadata_client_3_producer"
    assert config.consumer["client.id"] == "__remote_log_metadata_client_3_consumer"
    assert config.topic_configs()["remote.storage.enable"] == "false"


def test_client_settings_layer_common_then_specific() -> None:
    config = TopicBasedConfig.from_mapping(
        {
            "remote.log.metadata.common.client.request.timeout.ms": "5000",
            "remote.log.metadata.producer.request.timeout.ms": "7000",
            "remote.log.metadata.consumer.max.poll.records": "2000",
        }
    )
    assert config.producer["request.timeout.ms"] == "7000"
    assert config.consumer["request.timeout.ms"] == "5000"
    assert config.consumer["max.poll.records"] == "2000"
    assert config.producer["acks"] == "all"
    assert config.consumer["auto.offset.reset"] == "earliest"


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("remote.log.metadata.topic.num.partitions", "0", "num.partitions"),
        ("remote.log.metadata.topic.retention.ms", "0", "retention.ms"),
        ("remote.log.metadata.topic.replication.factor", "many", "replication.factor"),
        ("remote.log.metadata.producer.acks", "1", "producer.acks"),
        ("remote.log.metadata.consumer.auto.offset.reset", "latest", "auto.offset.reset"),
        ("remote.log.metadata.topic.partitions", "5", "topic.partitions"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(key: str, value: str, named: str) -> None:
    with pytest.raises(InvalidConfigError, match=named):
        TopicBasedConfig.from_mapping({key: value})
