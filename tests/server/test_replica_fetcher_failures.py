"""KIP-461 on a real cluster: one failing partition never stops a fetcher's other partitions.

Storage failures are made where they happen in production, under the log: the follower's
partition directory is moved away, so its next segment roll (every append here, with tiny
segments) cannot create its files and ``append_as_follower`` raises.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tierlog.cluster import EmbeddedCluster
from tierlog.model import TopicPartition
from tierlog.server import protocol as p
from tierlog.server.partition import Partition
from tierlog.server.replica_fetcher import (
    CLIENT_ID,
    DEAD_THREAD_COUNT,
    FAILED_PARTITIONS_COUNT,
    MAX_LAG,
    METRICS_GROUP,
    InitialFetchState,
    ReplicaFetcherManager,
)

from .conftest import Client, batch

FOLLOWER = 2
LEADER = 0

CONFIG = {
    "replica.fetch.backoff.ms": 50,
    "replica.fetch.wait.max.ms": 100,
    "num.replica.fetchers": 1,
}


def wait_until(condition: Callable[[], bool], timeout: float = 15.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        time.sleep(0.02)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(3, tmp_path / "data", CONFIG) as running:
        yield running


def metric(cluster: EmbeddedCluster, broker_id: int, name: str) -> object:
    host = cluster.broker(broker_id).plugin_host
    assert host is not None
    return host.metrics.value(METRICS_GROUP, name, clientId=CLIENT_ID)


def manager(cluster: EmbeddedCluster, broker_id: int = FOLLOWER) -> ReplicaFetcherManager:
    found = cluster.broker(broker_id).replica_fetcher_manager
    assert found is not None
    return found


def replica(cluster: EmbeddedCluster, broker_id: int, topic: str, index: int) -> Partition:
    found = cluster.broker(broker_id).partition(TopicPartition(topic, index))
    assert found is not None
    return found


def create_pinned(client: Client, topic: str, partitions: int) -> None:
    """Partitions led by broker 0, followed by 1 and 2; segments roll on every append."""
    request = p.CreateTopicsRequest(
        [
            p.CreatableTopic(
                topic,
                assignments=[
                    p.CreatableReplicaAssignment(i, [LEADER, 1, FOLLOWER])
                    for i in range(partitions)
                ],
                configs=[p.CreatableTopicConfig("segment.bytes", "100")],
            )
        ]
    )
    result = client.transport.send(0, request).topics[0]
    assert result.error_code == p.NONE, result.error_message


def produce_everywhere(client: Client, topic: str, partitions: int, tag: str) -> None:
    for index in range(partitions):
        answer = client.produce(topic, index, batch(1, tag=tag), acks=p.Acks.LEADER)
        assert answer.error_code == p.NONE


def caught_up(cluster: EmbeddedCluster, topic: str, index: int, broker_id: int = FOLLOWER) -> bool:
    leader_id = cluster.controller.image().registration(TopicPartition(topic, index)).leader  # type: ignore[union-attr]
    leader = replica(cluster, leader_id, topic, index)
    return replica(cluster, broker_id, topic, index).log.log_end_offset == leader.log.log_end_offset


def break_directory(partition: Partition) -> Callable[[], None]:
    """Moves a replica's directory away (its open files keep working, new ones cannot be
    created); returns the function that puts it back."""
    directory = partition.directory
    moved = directory.with_name(directory.name + ".moved")
    directory.rename(moved)
    return lambda: moved.rename(directory)


def test_a_storage_failure_fails_only_its_partition(cluster: EmbeddedCluster) -> None:
    client = Client(cluster)
    create_pinned(client, "iso", 3)
    produce_everywhere(client, "iso", 3, "a")
    for index in range(3):
        wait_until(lambda index=index: caught_up(cluster, "iso", index))
    threads = manager(cluster).threads()
    assert list(threads) == [(LEADER, 0)]
    served = set(threads[(LEADER, 0)].partitions())
    assert served == {TopicPartition("iso", i) for i in range(3)}

    restore = break_directory(replica(cluster, FOLLOWER, "iso", 1))
    produce_everywhere(client, "iso", 3, "b")
    wait_until(lambda: metric(cluster, FOLLOWER, FAILED_PARTITIONS_COUNT) == 1, what="failure")
    produce_everywhere(client, "iso", 3, "c")

    for index in (0, 2):
        wait_until(lambda index=index: caught_up(cluster, "iso", index))
    assert not caught_up(cluster, "iso", 1)
    thread = manager(cluster).threads()[(LEADER, 0)]
    assert thread.is_alive()
    assert set(thread.partitions()) == {TopicPartition("iso", 0), TopicPartition("iso", 2)}
    assert TopicPartition("iso", 1) in manager(cluster).failed_partitions
    assert metric(cluster, FOLLOWER, DEAD_THREAD_COUNT) == 0
    assert metric(cluster, 1, FAILED_PARTITIONS_COUNT) == 0
    assert manager(cluster).fetch_state(TopicPartition("iso", 1)) is None

    # A new leader epoch (the leader stops; broker 1 takes over) clears the failure.
    restore()
    cluster.stop_broker(LEADER)
    wait_until(lambda: metric(cluster, FOLLOWER, FAILED_PARTITIONS_COUNT) == 0, what="clear")
    produce_everywhere(client, "iso", 3, "d")
    for index in range(3):
        wait_until(lambda index=index: caught_up(cluster, "iso", index), what="resume")
    assert metric(cluster, FOLLOWER, MAX_LAG) == 0


def test_a_thread_whose_partitions_all_failed_shuts_down_cleanly(
    cluster: EmbeddedCluster,
) -> None:
    client = Client(cluster)
    create_pinned(client, "doomed", 2)
    produce_everywhere(client, "doomed", 2, "a")
    for index in range(2):
        wait_until(lambda index=index: caught_up(cluster, "doomed", index))

    restores = [break_directory(replica(cluster, FOLLOWER, "doomed", i)) for i in range(2)]
    produce_everywhere(client, "doomed", 2, "b")

    wait_until(lambda: metric(cluster, FOLLOWER, FAILED_PARTITIONS_COUNT) == 2)
    wait_until(lambda: manager(cluster).threads() == {}, what="thread shutdown")
    # Shut down for want of partitions, not died: DeadThreadCount stays 0.
    assert metric(cluster, FOLLOWER, DEAD_THREAD_COUNT) == 0
    assert metric(cluster, 1, FAILED_PARTITIONS_COUNT) == 0
    for restore in restores:
        restore()


def test_stopping_a_failed_replica_clears_its_failure(cluster: EmbeddedCluster) -> None:
    client = Client(cluster)
    create_pinned(client, "gone", 2)
    produce_everywhere(client, "gone", 2, "a")
    for index in range(2):
        wait_until(lambda index=index: caught_up(cluster, "gone", index))
    restore = break_directory(replica(cluster, FOLLOWER, "gone", 0))
    produce_everywhere(client, "gone", 2, "b")
    wait_until(lambda: metric(cluster, FOLLOWER, FAILED_PARTITIONS_COUNT) == 1)
    restore()

    response = client.transport.send(0, p.DeleteTopicsRequest(["gone"]))

    assert response.responses[0].error_code == p.NONE
    assert metric(cluster, FOLLOWER, FAILED_PARTITIONS_COUNT) == 0
    assert cluster.broker(FOLLOWER).hosted_partitions() == []
    wait_until(lambda: manager(cluster).threads() == {}, what="idle thread shutdown")


def test_a_fenced_epoch_equal_to_the_fetchers_own_fails_the_partition(
    cluster: EmbeddedCluster,
) -> None:
    client = Client(cluster)
    create_pinned(client, "fenced", 2)
    produce_everywhere(client, "fenced", 2, "a")
    for index in range(2):
        wait_until(lambda index=index: caught_up(cluster, "fenced", index))
    # Broker 2 misses the LeaderAndIsr of the next epochs, so it keeps fetching from broker
    # 0 with the old epoch; once 0 is back (a follower at the new epoch) it answers FENCED.
    lost = client.transport.faults.add(
        lambda broker, request: broker == FOLLOWER and isinstance(request, p.LeaderAndIsrRequest)
    )
    lost.drop = True
    cluster.stop_broker(LEADER)
    cluster.start_broker(LEADER)

    wait_until(lambda: metric(cluster, FOLLOWER, FAILED_PARTITIONS_COUNT) == 2, what="fenced")
    client.transport.faults.remove(lost)
    # The next epoch reaches broker 2 and restarts both partitions.
    cluster.stop_broker(1)
    wait_until(lambda: metric(cluster, FOLLOWER, FAILED_PARTITIONS_COUNT) == 0, what="clear")
    produce_everywhere(client, "fenced", 2, "b")
    for index in range(2):
        for broker_id in (LEADER, FOLLOWER):
            wait_until(
                lambda index=index, broker_id=broker_id: caught_up(
                    cluster, "fenced", index, broker_id
                ),
                what="resume",
            )


def test_a_stopped_manager_starts_no_fetcher_for_a_late_leader_and_isr(
    cluster: EmbeddedCluster,
) -> None:
    # A LeaderAndIsr can reach a broker that is already stopping (sent before it deregistered).
    broker = cluster.broker(FOLLOWER)
    stopped = ReplicaFetcherManager(FOLLOWER, broker.config, cluster.transport, broker.partition)
    stopped.shutdown()

    stopped.add_fetcher_for_partitions({TopicPartition("t", 0): InitialFetchState(LEADER, 0, 0)})

    assert stopped.threads() == {}


def test_a_controlled_shutdown_marks_no_partition_failed(
    cluster: EmbeddedCluster, caplog: pytest.LogCaptureFixture
) -> None:
    client = Client(cluster)
    client.create("many", partitions=30, replication_factor=3)
    for index in range(30):
        assert client.produce("many", index, batch(2)).error_code == p.NONE
    fetchers = manager(cluster)
    wait_until(lambda: sum(t.partition_count() for t in fetchers.threads().values()) >= 20)

    with caplog.at_level("ERROR", logger="tierlog.server.replica_fetcher"):
        cluster.stop_broker(FOLLOWER, clean=True)

    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []
    assert len(fetchers.failed_partitions) == 0
