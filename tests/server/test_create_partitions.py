"""CreatePartitions: Kafka's errors, placement, leaders, and data in the new partitions."""

from __future__ import annotations

from pathlib import Path

import pytest
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    PolicyViolationError,
    UnknownTopicOrPartitionError,
)
from tierlog.model import TopicPartition
from tierlog.server import protocol as p

from .conftest import Client, batch, values


def grow(
    client: Client, *topics: p.CreatePartitionsTopic, validate_only: bool = False
) -> list[p.CreatePartitionsTopicResult]:
    request = p.CreatePartitionsRequest(topics, validate_only=validate_only)
    return list(client.transport.send(client.any_broker(), request).results)


def test_new_partitions_get_leaders_and_take_records(
    cluster: EmbeddedCluster, client: Client
) -> None:
    client.create("t", partitions=2, replication_factor=2)
    assert client.produce("t", 0, batch(2)).error_code == p.NONE
    before = cluster.controller.image().topic("t")
    assert before is not None

    [result] = grow(client, p.CreatePartitionsTopic("t", 5))

    assert (result.name, result.error_code, result.error_message) == ("t", p.NONE, None)
    after = cluster.controller.image().topic("t")
    assert after is not None and after.topic_id == before.topic_id
    assert after.partitions[:2] == before.partitions
    for reg in after.partitions[2:]:
        assert len(reg.replicas) == 2 and len(set(reg.replicas)) == 2
        assert reg.leader == reg.replicas[0]
        assert set(reg.isr) == set(reg.replicas)
    # Round-robin over the brokers, as CreateTopics places partitions.
    assert len({reg.replicas[0] for reg in after.partitions[2:]}) == 3
    metadata = client.metadata("t").topics[0]
    assert [part.partition_index for part in metadata.partitions] == [0, 1, 2, 3, 4]
    for index in range(2, 5):
        leader = after.partitions[index].leader
        assert cluster.broker(leader).partition(TopicPartition("t", index)) is not None
        assert client.produce("t", index, batch(3, tag=f"p{index}")).base_offset == 0
        assert values(client.fetch("t", index).records) == [
            f"p{index}-{i}".encode() for i in range(3)
        ]
    assert values(client.fetch("t", 0).records) == [b"v-0", b"v-1"]


def test_grown_topics_come_back_after_a_restart(tmp_path: Path) -> None:
    with EmbeddedCluster(2, tmp_path / "data") as cluster:
        client = Client(cluster)
        client.create("t", partitions=1, replication_factor=2)
        assert grow(client, p.CreatePartitionsTopic("t", 3))[0].error_code == p.NONE
        assert client.produce("t", 2, batch(1)).error_code == p.NONE
    with EmbeddedCluster(2, tmp_path / "data") as cluster:
        client = Client(cluster)
        assert len(client.metadata("t").topics[0].partitions) == 3
        assert values(client.fetch("t", 2).records) == [b"v-0"]


def test_manual_assignments_place_the_new_partitions(
    cluster: EmbeddedCluster, client: Client
) -> None:
    client.create("t", partitions=1, replication_factor=2)

    [result] = grow(
        client,
        p.CreatePartitionsTopic(
            "t", 3, [p.CreatePartitionsAssignment([2, 1]), p.CreatePartitionsAssignment([1, 0])]
        ),
    )

    assert result.error_code == p.NONE
    topic = cluster.controller.image().topic("t")
    assert topic is not None
    assert [(r.replicas, r.leader) for r in topic.partitions[1:]] == [((2, 1), 2), ((1, 0), 1)]


@pytest.mark.parametrize(
    ("count", "assignments", "code", "message"),
    [
        (
            1,
            None,
            InvalidPartitionsError.code,
            "Topic currently has 2 partitions, which is higher than the requested 1.",
        ),
        (2, None, InvalidPartitionsError.code, "Topic already has 2 partitions."),
        (4, [[0, 1]], InvalidReplicaAssignmentError.code, "only 1 assignment(s) were specified"),
        (3, [[0]], InvalidReplicaAssignmentError.code, "replication factor is 2"),
        (3, [[0, 7]], InvalidReplicaAssignmentError.code, "brokers [7]"),
        (3, [[1, 1]], InvalidReplicaAssignmentError.code, "more than once"),
    ],
)
def test_refused_requests_change_nothing(
    cluster: EmbeddedCluster,
    client: Client,
    count: int,
    assignments: list[list[int]] | None,
    code: int,
    message: str,
) -> None:
    client.create("t", partitions=2, replication_factor=2)
    wanted = None if assignments is None else [p.CreatePartitionsAssignment(a) for a in assignments]

    [result] = grow(client, p.CreatePartitionsTopic("t", count, wanted))

    assert result.error_code == code
    assert result.error_message is not None and message in result.error_message
    topic = cluster.controller.image().topic("t")
    assert topic is not None and len(topic.partitions) == 2


def test_each_topic_is_answered_on_its_own(cluster: EmbeddedCluster, client: Client) -> None:
    client.create("a")
    client.create("b")
    cluster.controller.create_topic("__consumer_offsets", 1, 1, internal=True)

    results = grow(
        client,
        p.CreatePartitionsTopic("a", 2),
        p.CreatePartitionsTopic("b", 2),
        p.CreatePartitionsTopic("b", 3),
        p.CreatePartitionsTopic("missing", 2),
        p.CreatePartitionsTopic("__consumer_offsets", 2),
    )

    assert [(r.name, r.error_code) for r in results] == [
        ("a", p.NONE),
        ("b", InvalidRequestError.code),
        ("b", InvalidRequestError.code),
        ("missing", UnknownTopicOrPartitionError.code),
        ("__consumer_offsets", InvalidRequestError.code),
    ]
    assert "internal topic" in (results[4].error_message or "")
    image = cluster.controller.image()
    assert [len(image.topics[n].partitions) for n in ("a", "b", "__consumer_offsets")] == [2, 1, 1]


def test_validate_only_adds_nothing(cluster: EmbeddedCluster, client: Client) -> None:
    client.create("t")

    [result] = grow(client, p.CreatePartitionsTopic("t", 4), validate_only=True)

    assert result.error_code == p.NONE
    assert len(client.metadata("t").topics[0].partitions) == 1


def test_the_partition_limits_apply(tmp_path: Path) -> None:
    with EmbeddedCluster(1, tmp_path / "data", {"max.partitions": 4}) as cluster:
        client = Client(cluster)
        client.create("t", partitions=2)

        too_many = grow(client, p.CreatePartitionsTopic("t", 5))
        enough = grow(client, p.CreatePartitionsTopic("t", 4))

        assert too_many[0].error_code == PolicyViolationError.code
        assert "max.partitions = 4" in (too_many[0].error_message or "")
        assert enough[0].error_code == p.NONE
