"""Automatic preferred leader election (``auto.leader.rebalance.enable``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import InvalidConfigError
from tierlog.model import TopicPartition, Uuid
from tierlog.server import protocol as p
from tierlog.server.image import ClusterImage, PartitionRegistration, TopicImage
from tierlog.server.leader_balance import imbalance, partitions_to_rebalance

from .conftest import Client, batch, values


def reg(
    replicas: tuple[int, ...],
    leader: int,
    isr: tuple[int, ...] | None = None,
    adding_replicas: tuple[int, ...] = (),
) -> PartitionRegistration:
    """A partition in sync unless ``isr`` says otherwise."""
    in_sync = replicas if isr is None else isr
    return PartitionRegistration(replicas, in_sync, leader, adding_replicas=adding_replicas)


def image(
    partitions: list[PartitionRegistration], live: tuple[int, ...] = (0, 1, 2)
) -> ClusterImage:
    topic = TopicImage("t", Uuid.random(), tuple(partitions), configs={})
    return ClusterImage("c", 0, 1, frozenset(live), {"t": topic})


def test_imbalance_counts_each_brokers_preferred_partitions_and_those_it_does_not_lead() -> None:
    found = imbalance(image([reg((0, 1), 0), reg((0, 1), 1), reg((1, 0), 0), reg((2, 0), 2)]))

    assert found == {
        0: (2, [TopicPartition("t", 1)]),
        1: (1, [TopicPartition("t", 2)]),
        2: (1, []),
    }


def test_a_broker_is_rebalanced_only_past_the_allowed_share() -> None:
    # Broker 0 prefers ten partitions and leads nine: 10% not led, which is allowed.
    nine_of_ten = [reg((0, 1), 0) for _ in range(9)] + [reg((0, 1), 1)]
    assert partitions_to_rebalance(image(nine_of_ten), 10) == []
    eight_of_ten = [reg((0, 1), 0) for _ in range(8)] + [reg((0, 1), 1), reg((0, 1), 1)]
    assert partitions_to_rebalance(image(eight_of_ten), 10) == [
        TopicPartition("t", 8),
        TopicPartition("t", 9),
    ]
    assert partitions_to_rebalance(image(eight_of_ten), 20) == []
    assert partitions_to_rebalance(image(nine_of_ten), 0) == [TopicPartition("t", 9)]


def test_only_a_live_in_sync_preferred_replica_of_a_settled_partition_is_elected() -> None:
    partitions = [
        reg((0, 1), 1, isr=(1,)),  # out of sync: electing it would lose records
        reg((0, 1), 1, adding_replicas=(0,)),  # being reassigned
        reg((2, 1), 1),  # preferred replica 2 is not alive
        reg((0, 1), 1),
    ]

    assert partitions_to_rebalance(image(partitions, live=(0, 1)), 10) == [TopicPartition("t", 3)]


def test_the_percentage_must_be_a_share(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError, match=r"leader\.imbalance\.per\.broker\.percentage"):
        EmbeddedCluster(1, tmp_path, {"leader.imbalance.per.broker.percentage": 101})


def leaders(cluster: EmbeddedCluster, topic: str) -> list[int]:
    found = cluster.controller.image().topic(topic)
    assert found is not None
    return [r.leader for r in found.partitions]


def wait_for(probe: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not probe():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_restarted_broker_leads_its_preferred_partitions_again(tmp_path: Path) -> None:
    config = {"leader.imbalance.check.interval.seconds": 1}
    with EmbeddedCluster(3, tmp_path, config) as cluster:
        client = Client(cluster)
        client.create("t", partitions=6, replication_factor=3)
        topic = cluster.controller.image().topic("t")
        assert topic is not None
        preferred = [r.replicas[0] for r in topic.partitions]
        wait_for(lambda: leaders(cluster, "t") == preferred, "the first leaders")
        for index in range(6):
            assert client.produce("t", index, batch(2)).error_code == p.NONE

        cluster.stop_broker(0)
        assert 0 not in leaders(cluster, "t")
        cluster.start_broker(0)

        wait_for(lambda: leaders(cluster, "t") == preferred, "broker 0 to lead again")
        for index in range(6):
            assert client.produce("t", index, batch(1, tag="after")).error_code == p.NONE
            assert values(client.fetch("t", index).records) == [b"v-0", b"v-1", b"after-0"]
