"""ElectLeaders: preferred and unclean elections with Kafka's per-partition answers."""

from __future__ import annotations

import time

from tierlog.cluster import EmbeddedCluster
from tierlog.errors import (
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    InvalidRequestError,
    PreferredLeaderNotAvailableError,
    UnknownTopicOrPartitionError,
)
from tierlog.model import TopicPartition
from tierlog.server import protocol as p
from tierlog.server.image import PartitionRegistration

from .conftest import Client, batch, values

PREFERRED, UNCLEAN = p.ElectionType.PREFERRED, p.ElectionType.UNCLEAN


def elect(
    client: Client, election_type: int, partitions: dict[str, list[int]] | None
) -> dict[TopicPartition, int]:
    wanted = (
        None if partitions is None else [p.TopicPartitions(t, i) for t, i in partitions.items()]
    )
    response = client.transport.send(
        client.any_broker(), p.ElectLeadersRequest(election_type, wanted)
    )
    assert response.error_code == p.NONE
    return {
        TopicPartition(t.topic, r.partition_id): r.error_code
        for t in response.replica_election_results
        for r in t.partition_result
    }


def registration(cluster: EmbeddedCluster, topic: str, index: int = 0) -> PartitionRegistration:
    reg = cluster.controller.image().registration(TopicPartition(topic, index))
    assert reg is not None
    return reg


def wait_in_sync(cluster: EmbeddedCluster, topic: str, index: int = 0) -> None:
    deadline = time.monotonic() + 30
    while len(registration(cluster, topic, index).isr) < len(
        registration(cluster, topic, index).replicas
    ):
        assert time.monotonic() < deadline, "the ISR did not grow back"
        time.sleep(0.02)


def test_the_preferred_replica_leads_again_after_a_failover(
    cluster: EmbeddedCluster, client: Client
) -> None:
    client.create("t", partitions=3, replication_factor=3)
    preferred = registration(cluster, "t").replicas[0]
    assert client.produce("t", 0, batch(2)).error_code == p.NONE
    cluster.restart_broker(preferred)
    wait_in_sync(cluster, "t")
    moved = registration(cluster, "t")
    assert moved.leader != preferred

    first = elect(client, PREFERRED, None)
    again = elect(client, PREFERRED, {"t": [0, 1, 2]})

    # Only the partitions whose leader was not the preferred one are answered.
    assert first[TopicPartition("t", 0)] == p.NONE
    assert all(code == p.NONE for code in first.values())
    led = registration(cluster, "t")
    assert led.leader == preferred
    assert led.leader_epoch == moved.leader_epoch + 1
    assert again == {TopicPartition("t", i): ElectionNotNeededError.code for i in range(3)}
    assert elect(client, PREFERRED, None) == {}
    replica = cluster.broker(preferred).partition(TopicPartition("t", 0))
    assert replica is not None and replica.is_leader
    assert client.produce("t", 0, batch(1, tag="after")).error_code == p.NONE
    assert values(client.fetch("t", 0).records) == [b"v-0", b"v-1", b"after-0"]


def test_a_preferred_replica_that_is_down_cannot_lead(
    cluster: EmbeddedCluster, client: Client
) -> None:
    client.create("t", replication_factor=3)
    preferred = registration(cluster, "t").replicas[0]
    cluster.stop_broker(preferred)

    answer = elect(client, PREFERRED, {"t": [0], "missing": [0]})

    assert answer == {
        TopicPartition("t", 0): PreferredLeaderNotAvailableError.code,
        TopicPartition("missing", 0): UnknownTopicOrPartitionError.code,
    }


def test_an_unclean_election_gives_a_leaderless_partition_a_live_replica(
    cluster: EmbeddedCluster, client: Client
) -> None:
    client.create("t", replication_factor=2)
    first, second = registration(cluster, "t").replicas
    lone = p.CreatableTopic("lone", assignments=[p.CreatableReplicaAssignment(0, [first])])
    assert client.transport.send(0, p.CreateTopicsRequest([lone])).topics[0].error_code == 0
    assert elect(client, UNCLEAN, {"t": [0]}) == {
        TopicPartition("t", 0): ElectionNotNeededError.code
    }
    cluster.stop_broker(second)
    cluster.stop_broker(first)  # the last in-sync replica: neither partition has a leader
    cluster.start_broker(second)
    assert registration(cluster, "t").leader == p.NO_LEADER

    answer = elect(client, UNCLEAN, {"t": [0], "lone": [0]})

    assert answer == {
        TopicPartition("t", 0): p.NONE,
        TopicPartition("lone", 0): EligibleLeadersNotAvailableError.code,
    }
    elected = registration(cluster, "t")
    assert (elected.leader, elected.isr) == (second, (second,))


def test_an_unknown_election_type_is_an_invalid_request(client: Client) -> None:
    response = client.transport.send(client.any_broker(), p.ElectLeadersRequest(7))
    assert response.error_code == InvalidRequestError.code
