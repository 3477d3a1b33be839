"""The admin client: topics, configs, record deletion and offsets through a real cluster."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tierlog.client import Admin, Producer
from tierlog.client.admin import AlterConfig, ConfigResource, NewPartitions, NewTopic
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import (
    ElectionNotNeededError,
    InvalidPartitionsError,
    UnknownTopicOrPartitionError,
)
from tierlog.model import TopicPartition
from tierlog.server import protocol as p

TP = TopicPartition("admin", 0)


def test_create_describe_and_delete_topics(admin: Admin) -> None:
    ids = admin.create_topics(
        [NewTopic("admin", 2, 3, configs={"cleanup.policy": "delete"}), NewTopic("second", 1, 1)]
    )
    assert set(ids) == {"admin", "second"}
    assert admin.list_topics() == {"admin", "second"}
    described = admin.describe_topics(["admin"])["admin"]
    assert described.topic_id == ids["admin"]
    assert described.num_partitions == 2
    for partition in described.partitions:
        assert len(partition.replicas) == 3
        assert partition.leader in partition.replicas
    admin.delete_topics(["second"])
    assert admin.list_topics() == {"admin"}
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.describe_topics(["second"])


def test_validate_only_creates_nothing(admin: Admin) -> None:
    admin.create_topics([NewTopic("dry-run", 3, 3)], validate_only=True)
    assert admin.list_topics() == set()


def test_explicit_replica_assignment(admin: Admin) -> None:
    admin.create_topics([NewTopic("placed", replica_assignment={0: (2, 0), 1: (0, 1)})])
    partitions = admin.describe_topics(["placed"])["placed"].partitions
    assert [pi.replicas for pi in partitions] == [(2, 0), (0, 1)]
    assert [pi.leader for pi in partitions] == [2, 0]


def test_alter_and_describe_topic_configs(admin: Admin) -> None:
    admin.create_topics([NewTopic("admin", 1, 3)])
    resource = ConfigResource.topic("admin")
    default = admin.describe_configs([resource])[resource]["retention.ms"]
    assert default.is_default
    admin.alter_configs({resource: [AlterConfig("retention.ms", "3600000")]})
    changed = admin.describe_configs([resource])[resource]["retention.ms"]
    assert (changed.value, changed.is_default) == ("3600000", False)
    assert changed.config_source == p.ConfigSource.TOPIC_CONFIG
    admin.alter_configs({resource: [AlterConfig("retention.ms", op=p.AlterConfigOp.DELETE)]})
    assert admin.describe_configs([resource])[resource]["retention.ms"] == default
    admin.alter_configs({resource: [AlterConfig("retention.ms", "1")]}, validate_only=True)
    assert admin.describe_configs([resource])[resource]["retention.ms"] == default


def test_describe_broker_configs(cluster: EmbeddedCluster, admin: Admin) -> None:
    resource = ConfigResource.broker(1)
    configs = admin.describe_configs([resource])[resource]
    assert configs["broker.id"].value == "1"
    assert "remote.fetch.max.wait.ms" in configs


def test_list_offsets_and_delete_records(
    admin: Admin, make_producer: Callable[..., Producer]
) -> None:
    admin.create_topics([NewTopic("admin", 1, 3)])
    producer = make_producer()
    for i in range(5):
        producer.send("admin", b"v", timestamp=1_000 + 10 * i)
    producer.flush()
    offsets = admin.list_offsets({TP: p.OffsetSpec.EARLIEST})
    assert offsets[TP].offset == 0
    assert admin.list_offsets({TP: p.OffsetSpec.LATEST})[TP].offset == 5
    by_time = admin.list_offsets({TP: 1_015})[TP]
    assert (by_time.offset, by_time.timestamp) == (2, 1_020)
    newest = admin.list_offsets({TP: p.OffsetSpec.MAX_TIMESTAMP})[TP]
    assert (newest.offset, newest.timestamp) == (4, 1_040)

    assert admin.delete_records({TP: 3}) == {TP: 3}
    assert admin.list_offsets({TP: p.OffsetSpec.EARLIEST})[TP].offset == 3
    assert admin.delete_records({TP: -1}) == {TP: 5}


def test_a_closed_admin_refuses_calls(cluster: EmbeddedCluster) -> None:
    from tierlog.client import ClientClosedError

    admin = Admin(cluster.transport)
    admin.close()
    with pytest.raises(ClientClosedError):
        admin.list_topics()


def test_create_partitions(admin: Admin) -> None:
    admin.create_topics([NewTopic("grown", 1, 2)])

    admin.create_partitions({"grown": NewPartitions.increase_to(3)})
    admin.create_partitions({"grown": NewPartitions.increase_to(4, [[2, 0]])})

    described = admin.describe_topics(["grown"])["grown"]
    assert described.num_partitions == 4
    assert described.partitions[3].replicas == (2, 0)
    with pytest.raises(InvalidPartitionsError, match="higher than the requested 2"):
        admin.create_partitions({"grown": NewPartitions.increase_to(2)})
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.create_partitions({"missing": NewPartitions.increase_to(2)}, timeout_ms=200)


def test_elect_leaders(admin: Admin) -> None:
    admin.create_topics([NewTopic("elected", 2, 3)])

    outcomes = admin.elect_leaders(p.ElectionType.PREFERRED, [TopicPartition("elected", 0)])

    assert list(outcomes) == [TopicPartition("elected", 0)]
    assert isinstance(outcomes[TopicPartition("elected", 0)], ElectionNotNeededError)
    assert admin.elect_leaders(p.ElectionType.PREFERRED) == {}
