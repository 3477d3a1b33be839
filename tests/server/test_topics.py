"""Topic names, CreateTopics, DeleteTopics and Metadata."""

from __future__ import annotations

from pathlib import Path

import pytest
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    LeaderNotAvailableError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from tierlog.model import ZERO_UUID
from tierlog.server import protocol as p
from tierlog.server.topics import validate_topic_name

from .conftest import Client, batch


def partition_dirs(cluster: EmbeddedCluster) -> list[str]:
    return sorted(path.name for path in cluster.data_dir.glob("broker-*/logs/*") if path.is_dir())


@pytest.mark.parametrize("name", ["a", "orders.v1", "Orders_2-x", "x" * 249, "..."])
def test_legal_topic_names(name: str) -> None:
    assert validate_topic_name(name) == name


@pytest.mark.parametrize(
    "name", ["", ".", "..", "x" * 250, "a/b", "a b", "ü", "a:b", "../etc", "__internal"]
)
def test_illegal_topic_names(name: str) -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic_name(name)


def test_internal_names_are_for_the_runtime() -> None:
    assert validate_topic_name("__remote_log_metadata", internal_allowed=True)


@pytest.mark.parametrize("name", ["../../escape", "bad name", ".", "x" * 250, "__secret"])
def test_illegal_names_are_refused_before_anything_touches_disk(
    cluster: EmbeddedCluster, client: Client, name: str
) -> None:
    request = p.CreateTopicsRequest([p.CreatableTopic(name, 1, 1)])
    result = client.transport.send(0, request).topics[0]

    assert result.error_code == InvalidTopicError.code
    assert result.error_message
    assert partition_dirs(cluster) == []
    assert not any(cluster.data_dir.parent.glob("escape*"))
    assert client.metadata().topics == ()


def test_create_topic_places_replicas_round_robin_and_elects_leaders(
    cluster: EmbeddedCluster, client: Client
) -> None:
    created = client.create("orders", partitions=3, replication_factor=2)

    assert created.num_partitions == 3
    assert created.replication_factor == 2
    assert created.topic_id != ZERO_UUID
    topic = client.metadata("orders").topics[0]
    assert topic.topic_id == created.topic_id
    leaders = [part.leader_id for part in topic.partitions]
    assert sorted(leaders) == [0, 1, 2]
    for part in topic.partitions:
        assert part.error_code == p.NONE
        assert len(set(part.replica_nodes)) == 2
        assert part.leader_id == part.replica_nodes[0]
        assert part.leader_epoch == 0
    assert partition_dirs(cluster) == sorted(["orders-0", "orders-1", "orders-2"] * 2)


def test_create_topic_errors_have_no_side_effects(cluster: EmbeddedCluster, client: Client) -> None:
    client.create("taken")
    cases = {
        "taken": p.CreatableTopic("taken", 1, 1),
        "no-partitions": p.CreatableTopic("no-partitions", 0, 1),
        "too-many-replicas": p.CreatableTopic("too-many-replicas", 1, 4),
        "bad-config": p.CreatableTopic(
            "bad-config", 1, 1, configs=[p.CreatableTopicConfig("retention.ms", "soon")]
        ),
        "unknown-config": p.CreatableTopic(
            "unknown-config", 1, 1, configs=[p.CreatableTopicConfig("no.such.key", "1")]
        ),
        "both": p.CreatableTopic("both", 1, 1, assignments=[p.CreatableReplicaAssignment(0, [0])]),
    }
    response = client.transport.send(1, p.CreateTopicsRequest(list(cases.values())))

    codes = {r.name: r.error_code for r in response.topics}
    assert codes == {
        "taken": TopicExistsError.code,
        "no-partitions": InvalidPartitionsError.code,
        "too-many-replicas": InvalidReplicationFactorError.code,
        "bad-config": InvalidConfigError.code,
        "unknown-config": InvalidConfigError.code,
        "both": InvalidRequestError.code,
    }
    assert all(r.error_message for r in response.topics)
    assert [t.name for t in client.metadata().topics] == ["taken"]
    assert partition_dirs(cluster) == ["taken-0"]


def test_names_colliding_in_metric_names_are_refused(client: Client) -> None:
    client.create("orders.v1")

    result = client.transport.send(0, p.CreateTopicsRequest([p.CreatableTopic("orders_v1")]))

    assert result.topics[0].error_code == InvalidTopicError.code
    assert result.topics[0].error_message and "orders.v1" in result.topics[0].error_message


def test_validate_only_creates_nothing(cluster: EmbeddedCluster, client: Client) -> None:
    request = p.CreateTopicsRequest([p.CreatableTopic("dry", 2, 1)], validate_only=True)
    result = client.transport.send(0, request).topics[0]

    assert (result.error_code, result.num_partitions) == (p.NONE, 2)
    assert client.metadata("dry").topics[0].error_code == UnknownTopicOrPartitionError.code
    assert partition_dirs(cluster) == []


def test_create_reports_effective_configs(client: Client) -> None:
    created = client.create("configured", retention_ms="60000")

    assert created.configs is not None
    by_name = {c.name: c for c in created.configs}
    assert by_name["retention.ms"].value == "60000"
    assert by_name["retention.ms"].config_source == p.ConfigSource.TOPIC_CONFIG
    assert by_name["segment.bytes"].config_source == p.ConfigSource.DEFAULT_CONFIG


def test_delete_topic_removes_partition_dirs_and_metadata(
    cluster: EmbeddedCluster, client: Client
) -> None:
    client.create("doomed", partitions=2, replication_factor=3)
    client.create("kept")
    client.produce("doomed", 0, batch(3))

    response = client.transport.send(2, p.DeleteTopicsRequest(["doomed", "never-was"]))

    codes = [(r.name, r.error_code) for r in response.responses]
    assert codes == [("doomed", p.NONE), ("never-was", UnknownTopicOrPartitionError.code)]
    assert partition_dirs(cluster) == ["kept-0"]
    assert [t.name for t in client.metadata().topics] == ["kept"]
    assert client.metadata("doomed").topics[0].error_code == UnknownTopicOrPartitionError.code


def test_recreated_topic_gets_a_new_id_and_no_old_data(client: Client) -> None:
    first = client.create("again")
    client.produce("again", 0, batch(2))
    client.transport.send(0, p.DeleteTopicsRequest(["again"]))

    second = client.create("again")

    assert second.topic_id != first.topic_id
    assert client.fetch("again").high_watermark == 0


def test_delete_topic_by_id(client: Client) -> None:
    created = client.create("by-id")
    request = p.DeleteTopicsRequest(topics=[p.DeleteTopicState(None, created.topic_id)])

    result = client.transport.send(0, request).responses[0]

    assert (result.name, result.error_code) == ("by-id", p.NONE)
    assert client.metadata().topics == ()


def test_topic_deleted_while_a_replica_is_down_is_cleaned_up_when_it_returns(
    cluster: EmbeddedCluster, client: Client
) -> None:
    client.create("spread", partitions=3, replication_factor=3)
    cluster.stop_broker(2)
    client.transport.send(0, p.DeleteTopicsRequest(["spread"]))
    assert any(name.startswith("spread-") for name in partition_dirs(cluster))

    cluster.start_broker(2)

    assert partition_dirs(cluster) == []


def test_metadata_lists_brokers_controller_and_offline_leaders(
    cluster: EmbeddedCluster, client: Client
) -> None:
    request = p.CreateTopicsRequest(
        [p.CreatableTopic("pinned", assignments=[p.CreatableReplicaAssignment(0, [2, 1])])]
    )
    client.transport.send(0, request)
    before = client.metadata("pinned")

    cluster.stop_broker(1)  # leaves the ISR
    cluster.stop_broker(2)  # the last in-sync replica: nobody may lead
    after = client.metadata("pinned")

    assert [b.node_id for b in before.brokers] == [0, 1, 2]
    assert before.controller_id == 0
    assert before.cluster_id
    part = before.topics[0].partitions[0]
    assert (part.leader_id, part.replica_nodes, part.isr_nodes) == (2, (2, 1), (2, 1))
    assert [b.node_id for b in after.brokers] == [0]
    offline = after.topics[0].partitions[0]
    assert offline.error_code == LeaderNotAvailableError.code
    assert offline.leader_id == -1
    assert offline.isr_nodes == (2,)
    assert offline.offline_replicas == (2, 1)
    assert offline.leader_epoch == part.leader_epoch + 1


def test_metadata_auto_creates_only_when_asked_and_allowed(tmp_path: Path) -> None:
    config = {"auto.create.topics.enable": True}
    with EmbeddedCluster(1, tmp_path, config) as cluster:
        transport = cluster.transport
        plain = transport.send(0, p.MetadataRequest([p.MetadataRequestTopic("auto")]))
        asked = transport.send(
            0, p.MetadataRequest([p.MetadataRequestTopic("auto")], allow_auto_topic_creation=True)
        )
    assert plain.topics[0].error_code == UnknownTopicOrPartitionError.code
    assert asked.topics[0].error_code == p.NONE
    assert asked.topics[0].partitions[0].leader_id == 0
