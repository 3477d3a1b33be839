"""DescribeConfigs and IncrementalAlterConfigs: dynamic changes take effect without restart."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tierlog.cluster import EmbeddedCluster
from tierlog.errors import (
    InvalidConfigError,
    InvalidRequestError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from tierlog.model import TopicPartition
from tierlog.server import protocol as p

from .conftest import T0, Client, batch

SET, DELETE, APPEND = p.AlterConfigOp.SET, p.AlterConfigOp.DELETE, p.AlterConfigOp.APPEND
TOPIC, BROKER = p.ResourceType.TOPIC, p.ResourceType.BROKER


def alter(
    client: Client,
    resource_type: int,
    name: str,
    *ops: tuple[str, int, str | None],
    broker: int = 0,
    validate_only: bool = False,
) -> p.AlterConfigsResourceResponse:
    request = p.IncrementalAlterConfigsRequest(
        [p.AlterConfigsResource(resource_type, name, [p.AlterableConfig(*op) for op in ops])],
        validate_only=validate_only,
    )
    return client.transport.send(broker, request).responses[0]


def describe(
    client: Client, resource_type: int, name: str, *keys: str, broker: int = 0
) -> p.DescribeConfigsResult:
    request = p.DescribeConfigsRequest(
        [p.DescribeConfigsResource(resource_type, name, keys or None)], include_synonyms=True
    )
    return client.transport.send(broker, request).results[0]


def entry(result: p.DescribeConfigsResult, name: str) -> p.DescribeConfigsResourceResult:
    return next(c for c in result.configs if c.name == name)


def test_describe_topic_shows_overrides_and_defaults(client: Client) -> None:
    client.create("described", retention_ms="60000")

    result = describe(client, TOPIC, "described")

    assert result.error_code == p.NONE
    retention = entry(result, "retention.ms")
    assert (retention.value, retention.config_source, retention.is_default) == (
        "60000",
        p.ConfigSource.TOPIC_CONFIG,
        False,
    )
    assert retention.synonyms[0] == p.DescribeConfigsSynonym(
        "retention.ms", "60000", p.ConfigSource.TOPIC_CONFIG
    )
    segment = entry(result, "segment.bytes")
    assert (segment.config_source, segment.is_default) == (p.ConfigSource.DEFAULT_CONFIG, True)
    assert segment.config_type == p.ConfigType.INT
    assert not any(c.is_sensitive for c in result.configs)
    assert entry(result, "remote.storage.enable").value == "false"


def test_describe_only_the_keys_asked_for(client: Client) -> None:
    client.create("few")

    result = describe(client, TOPIC, "few", "retention.ms", "cleanup.policy")

    assert sorted(c.name for c in result.configs) == ["cleanup.policy", "retention.ms"]


def test_describe_unknown_resources(client: Client) -> None:
    assert describe(client, TOPIC, "nope").error_code == UnknownTopicOrPartitionError.code
    assert describe(client, BROKER, "7").error_code == InvalidRequestError.code
    assert describe(client, p.ResourceType.GROUP, "g").error_code == InvalidRequestError.code


def test_topic_config_change_takes_effect_without_restart(client: Client) -> None:
    client.create("limits")
    big = batch(1, value_size=3000)
    assert client.produce("limits", 0, big).error_code == p.NONE

    assert alter(client, TOPIC, "limits", ("max.message.bytes", SET, "1024")).error_code == 0
    refused = client.produce("limits", 0, big)
    assert alter(client, TOPIC, "limits", ("max.message.bytes", DELETE, None)).error_code == 0
    accepted = client.produce("limits", 0, big)

    assert refused.error_code == RecordTooLargeError.code
    assert (accepted.error_code, accepted.base_offset) == (p.NONE, 1)
    assert entry(describe(client, TOPIC, "limits"), "max.message.bytes").is_default


def test_retention_change_deletes_old_segments(client: Client) -> None:
    client.create("aging", segment_bytes="1024")
    for i in range(6):
        client.produce("aging", 0, batch(5, timestamp=T0 - 3_600_000, value_size=60, tag=str(i)))
    client.produce("aging", 0, batch(1, timestamp=T0))
    broker = client.cluster.broker(client.leader("aging"))
    assert broker.check_retention() == 0

    assert alter(client, TOPIC, "aging", ("retention.ms", SET, "60000")).error_code == p.NONE
    deleted = broker.check_retention()

    assert deleted > 0
    assert client.list_offset("aging", p.OffsetSpec.EARLIEST).offset > 0
    assert client.fetch("aging", offset=0).error_code != p.NONE


def test_background_retention_runs_every_check_interval(tmp_path: Path) -> None:
    config = {"log.retention.check.interval.ms": 10}
    with EmbeddedCluster(1, tmp_path, config) as cluster:
        client = Client(cluster)
        client.create("expiring", segment_bytes="1024", retention_ms="1000")
        for _ in range(6):
            client.produce("expiring", 0, batch(5, timestamp=T0 - 3_600_000, value_size=60))
        client.produce("expiring", 0, batch(1))
        partition = cluster.broker(0).partition(TopicPartition("expiring", 0))
        assert partition is not None
        # Nothing here applies retention: only the broker's background task can move it.
        give_up = time.monotonic() + 60
        while partition.log_start_offset == 0 and time.monotonic() < give_up:
            threading.Event().wait(0.01)
        assert partition.log_start_offset > 0


def test_invalid_topic_config_changes_apply_nothing(client: Client) -> None:
    client.create("guarded", retention_ms="60000")

    bad_value = alter(
        client, TOPIC, "guarded", ("retention.ms", SET, "120000"), ("segment.bytes", SET, "tiny")
    )
    unknown = alter(client, TOPIC, "guarded", ("no.such.config", SET, "1"))
    not_a_list = alter(client, TOPIC, "guarded", ("retention.ms", APPEND, "5"))
    missing = alter(client, TOPIC, "missing", ("retention.ms", SET, "5"))

    assert bad_value.error_code == InvalidConfigError.code
    assert bad_value.error_message and "segment.bytes" in bad_value.error_message
    assert unknown.error_code == InvalidConfigError.code
    assert not_a_list.error_code == InvalidConfigError.code
    assert missing.error_code == UnknownTopicOrPartitionError.code
    assert entry(describe(client, TOPIC, "guarded"), "retention.ms").value == "60000"


def test_validate_only_changes_nothing(client: Client) -> None:
    client.create("dry")

    result = alter(client, TOPIC, "dry", ("retention.ms", SET, "5000"), validate_only=True)

    assert result.error_code == p.NONE
    assert entry(describe(client, TOPIC, "dry"), "retention.ms").is_default


def test_list_configs_append_and_subtract(client: Client) -> None:
    client.create("policy")

    alter(client, TOPIC, "policy", ("cleanup.policy", APPEND, "compact"))
    appended = entry(describe(client, TOPIC, "policy"), "cleanup.policy").value
    alter(client, TOPIC, "policy", ("cleanup.policy", p.AlterConfigOp.SUBTRACT, "delete"))
    subtracted = entry(describe(client, TOPIC, "policy"), "cleanup.policy").value

    assert (appended, subtracted) == ("delete,compact", "compact")


def test_dynamic_broker_config_is_applied_live_and_listeners_run(client: Client) -> None:
    broker = client.cluster.broker(1)
    seen: list[tuple[str, object, object]] = []
    broker.config.add_listener("remote.fetch.max.wait.ms", lambda *change: seen.append(change))

    result = alter(client, BROKER, "1", ("remote.fetch.max.wait.ms", SET, "800"), broker=1)

    assert result.error_code == p.NONE
    assert broker.config["remote.fetch.max.wait.ms"] == 800
    assert seen == [("remote.fetch.max.wait.ms", 500, 800)]
    described = entry(describe(client, BROKER, "1", broker=1), "remote.fetch.max.wait.ms")
    assert (described.value, described.config_source) == (
        "800",
        p.ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    assert client.cluster.broker(0).config["remote.fetch.max.wait.ms"] == 500


def test_static_and_unknown_broker_configs_are_refused(client: Client) -> None:
    static = alter(client, BROKER, "0", ("log.dirs", SET, "/elsewhere"))
    unknown = alter(client, BROKER, "0", ("no.such.key", SET, "1"))
    out_of_range = alter(client, BROKER, "0", ("remote.fetch.max.wait.ms", SET, "0"))

    assert [r.error_code for r in (static, unknown, out_of_range)] == [InvalidConfigError.code] * 3
    assert client.cluster.broker(0).config["remote.fetch.max.wait.ms"] == 500
    described = entry(describe(client, BROKER, "0"), "log.dirs")
    assert described.read_only
    assert described.config_source == p.ConfigSource.STATIC_BROKER_CONFIG


def test_dynamic_configs_survive_a_restart(tmp_path: Path) -> None:
    with EmbeddedCluster(3, tmp_path) as cluster:
        client = Client(cluster)
        client.create("durable", retention_ms="60000")
        alter(client, TOPIC, "durable", ("segment.bytes", SET, "2048"))
        alter(client, BROKER, "2", ("remote.fetch.max.wait.ms", SET, "900"), broker=2)

    with EmbeddedCluster(3, tmp_path) as cluster:
        client = Client(cluster)
        topic = describe(client, TOPIC, "durable")
        broker = describe(client, BROKER, "2", broker=2)
        partition = cluster.broker(client.leader("durable")).partition(TopicPartition("durable", 0))
        assert partition is not None
        assert partition.log.config.segment_bytes == 2048
        assert cluster.broker(2).config["remote.fetch.max.wait.ms"] == 900

    assert entry(topic, "retention.ms").value == "60000"
    assert entry(topic, "segment.bytes").value == "2048"
    assert entry(broker, "remote.fetch.max.wait.ms").value == "900"
