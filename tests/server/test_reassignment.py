"""Partition reassignment (KIP-455) on a real three-broker cluster, local data only: expand,
move, shrink, listing, cancelling, bad requests, a controller restart, producing meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
from tierlog.client import Admin, Consumer, NewTopic, PartitionReassignment, Producer
from tierlog.client.records import RecordMetadata
from tierlog.cluster import EmbeddedCluster
from tierlog.config import BrokerConfig
from tierlog.coordination.file_store import FileMetadataStore
from tierlog.errors import (
    InvalidReplicaAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)
from tierlog.model import TopicPartition
from tierlog.server import protocol as p
from tierlog.server.controller import Controller
from tierlog.server.image import PartitionRegistration
from tierlog.server.transport import InProcessTransport

from .conftest import Client, batch, values
from .test_replication import FAST, all_records, pause_fetches, replica, wait_until

T0 = TopicPartition("t", 0)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(3, tmp_path / "data", FAST) as running:
        yield running


@pytest.fixture
def admin(cluster: EmbeddedCluster) -> Iterator[Admin]:
    with Admin(cluster.transport, {"default.api.timeout.ms": 10_000}) as client:
        yield client


def create(admin: Admin, *replicas: int, name: str = "t", partitions: int = 1) -> None:
    admin.create_topics(
        [NewTopic(name, replica_assignment={i: replicas for i in range(partitions)})]
    )


def registration(cluster: EmbeddedCluster, tp: TopicPartition = T0) -> PartitionRegistration:
    reg = cluster.controller.image().registration(tp)
    assert reg is not None
    return reg


def settled_on(
    cluster: EmbeddedCluster, replicas: tuple[int, ...], tp: TopicPartition = T0
) -> bool:
    """The reassignment is over: the partition lives on ``replicas``, all in sync, and only
    they host it."""
    reg = registration(cluster, tp)
    hosts = {b for b in cluster.broker_ids if cluster.broker(b).partition(tp) is not None}
    return (
        reg.replicas == replicas
        and not reg.reassigning
        and set(reg.isr) == set(replicas)
        and reg.leader in replicas
        and hosts == set(replicas)
    )


def produce_values(client: Client, tp: TopicPartition, rounds: int, tag: str = "v") -> list[bytes]:
    produced: list[bytes] = []
    for n in range(rounds):
        answer = client.produce(tp.topic, tp.partition, batch(5, tag=f"{tag}{n}"))
        assert answer.error_code == p.NONE
        produced.extend(f"{tag}{n}-{i}".encode() for i in range(5))
    return produced


def partition_dir(cluster: EmbeddedCluster, broker_id: int, tp: TopicPartition = T0) -> Path:
    logs = Path(cluster.broker_config(broker_id).get_list("log.dirs")[0])
    return logs / f"{tp.topic}-{tp.partition}"


def consume(cluster: EmbeddedCluster, tp: TopicPartition, expected: int) -> list[bytes]:
    got: list[bytes] = []
    with Consumer(cluster.transport, {"auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([tp])
        wait_until(
            lambda: (
                got.extend((r.value or b"").rstrip(b".") for r in consumer.poll(timeout_ms=100))
                or len(got) >= expected
            ),
            what=f"{expected} records consumed",
        )
    return got


def test_expand_adds_a_follower_that_catches_up_and_joins_the_isr(
    cluster: EmbeddedCluster, admin: Admin, client: Client
) -> None:
    create(admin, 0)
    produced = produce_values(client, T0, 6)

    admin.alter_partition_reassignments({T0: [0, 1]})

    wait_until(lambda: settled_on(cluster, (0, 1)), what="the expansion completes")
    assert registration(cluster).leader == 0
    added = replica(cluster, 1, "t")
    wait_until(lambda: added.log.log_end_offset == len(produced), what="the new replica caught up")
    assert values(all_records(added)) == produced
    assert admin.list_partition_reassignments() == {}


def test_move_hands_leadership_to_the_new_replica_and_deletes_the_old_one(
    cluster: EmbeddedCluster, admin: Admin, client: Client
) -> None:
    create(admin, 0)
    produced = produce_values(client, T0, 8)
    old_epoch = registration(cluster).leader_epoch
    old_dir = partition_dir(cluster, 0)
    assert old_dir.is_dir()

    admin.alter_partition_reassignments({T0: [1]})

    wait_until(lambda: settled_on(cluster, (1,)), what="the move completes")
    reg = registration(cluster)
    assert reg.leader == 1 and reg.leader_epoch == old_epoch + 1
    wait_until(lambda: not old_dir.exists(), what="the old replica's directory deleted")
    assert client.leader("t") == 1
    assert consume(cluster, T0, len(produced)) == produced
    more = produce_values(client, T0, 1, tag="after")
    assert consume(cluster, T0, len(produced) + len(more)) == [*produced, *more]


def test_shrink_removes_a_replica_at_once_when_the_rest_is_in_sync(
    cluster: EmbeddedCluster, admin: Admin, client: Client
) -> None:
    create(admin, 0, 1)
    produced = produce_values(client, T0, 4)
    wait_until(lambda: set(registration(cluster).isr) == {0, 1}, what="both in sync")

    admin.alter_partition_reassignments({T0: [1]})

    wait_until(lambda: settled_on(cluster, (1,)), what="the shrink completes")
    assert registration(cluster).leader == 1
    wait_until(lambda: not partition_dir(cluster, 0).exists(), what="broker 0's copy deleted")
    assert consume(cluster, T0, len(produced)) == produced


def test_list_shows_the_moves_under_way_and_nothing_once_they_end(
    cluster: EmbeddedCluster, admin: Admin, client: Client
) -> None:
    create(admin, 0, partitions=3)
    moving, growing, still = (TopicPartition("t", i) for i in range(3))
    for tp in (moving, growing, still):
        produce_values(client, tp, 2)
    cluster.stop_broker(2)

    admin.alter_partition_reassignments({moving: [2], growing: [0, 2]})

    expected = {
        moving: PartitionReassignment((2, 0), adding_replicas=(2,), removing_replicas=(0,)),
        growing: PartitionReassignment((0, 2), adding_replicas=(2,), removing_replicas=()),
    }
    assert admin.list_partition_reassignments() == expected
    assert admin.list_partition_reassignments([moving, still]) == {moving: expected[moving]}
    assert admin.list_partition_reassignments([TopicPartition("nope", 0)]) == {}
    assert registration(cluster, moving).leader == 0, "the old replica leads until the end"

    cluster.start_broker(2)

    wait_until(lambda: settled_on(cluster, (2,), moving), what="the move completes")
    wait_until(lambda: settled_on(cluster, (0, 2), growing), what="the expansion completes")
    assert admin.list_partition_reassignments() == {}
    assert registration(cluster, still).replicas == (0,)


def test_cancel_goes_back_to_the_original_replicas_and_removes_the_added_ones(
    cluster: EmbeddedCluster, admin: Admin, client: Client
) -> None:
    create(admin, 0, 1)
    produced = produce_values(client, T0, 3)
    fault = pause_fetches(client, 2)  # broker 2 never catches up
    before = registration(cluster)

    admin.alter_partition_reassignments({T0: [1, 2]})
    wait_until(lambda: partition_dir(cluster, 2).is_dir(), what="broker 2 hosts the new replica")
    assert admin.list_partition_reassignments() == {
        T0: PartitionReassignment((1, 2, 0), adding_replicas=(2,), removing_replicas=(0,))
    }
    admin.alter_partition_reassignments({T0: None})

    reg = registration(cluster)
    # As in Kafka, the order of the original replicas is not kept: the leader stays.
    assert (set(reg.replicas), reg.leader, reg.leader_epoch) == ({0, 1}, 0, before.leader_epoch)
    assert not reg.reassigning
    assert admin.list_partition_reassignments() == {}
    wait_until(lambda: not partition_dir(cluster, 2).exists(), what="broker 2's copy deleted")
    client.transport.faults.remove(fault)
    assert consume(cluster, T0, len(produced)) == produced
    with pytest.raises(NoReassignmentInProgressError, match="t-0"):
        admin.alter_partition_reassignments({T0: None})


def test_a_new_target_replaces_the_reassignment_under_way(
    cluster: EmbeddedCluster, admin: Admin, client: Client
) -> None:
    create(admin, 0)
    produced = produce_values(client, T0, 3)
    cluster.stop_broker(2)
    admin.alter_partition_reassignments({T0: [2]})

    admin.alter_partition_reassignments({T0: [1]})

    wait_until(lambda: settled_on(cluster, (1,)), what="the second target reached")
    cluster.start_broker(2)
    wait_until(lambda: cluster.broker(2).partition(T0) is None, what="broker 2 holds no stray copy")
    assert not partition_dir(cluster, 2).exists()
    assert consume(cluster, T0, len(produced)) == produced


def test_bad_requests_name_the_problem_and_change_nothing(
    cluster: EmbeddedCluster, admin: Admin
) -> None:
    create(admin, 0, 1)
    before = registration(cluster)

    with pytest.raises(InvalidReplicaAssignmentError, match=r"\[7\]"):
        admin.alter_partition_reassignments({T0: [0, 7]})
    with pytest.raises(InvalidReplicaAssignmentError, match="twice"):
        admin.alter_partition_reassignments({T0: [1, 1]})
    with pytest.raises(InvalidReplicaAssignmentError, match="empty"):
        admin.alter_partition_reassignments({T0: []})
    with pytest.raises(UnknownTopicOrPartitionError, match="nope-0"):
        admin.alter_partition_reassignments({TopicPartition("nope", 0): [0]})
    with pytest.raises(UnknownTopicOrPartitionError, match="t-5"):
        admin.alter_partition_reassignments({TopicPartition("t", 5): [0]})
    with pytest.raises(NoReassignmentInProgressError):
        admin.alter_partition_reassignments({T0: None})
    admin.alter_partition_reassignments({T0: [0, 1]})  # already there: nothing to do

    assert registration(cluster) == before
    assert admin.list_partition_reassignments() == {}
    assert (InvalidReplicaAssignmentError.code, NoReassignmentInProgressError.code) == (39, 85)


def test_one_bad_partition_does_not_stop_the_others(cluster: EmbeddedCluster, admin: Admin) -> None:
    create(admin, 0, partitions=2)
    good, bad = TopicPartition("t", 0), TopicPartition("t", 1)

    with pytest.raises(InvalidReplicaAssignmentError, match="t-1"):
        admin.alter_partition_reassignments({good: [0, 1], bad: [9]})

    wait_until(lambda: settled_on(cluster, (0, 1), good), what="the good one reassigned")
    assert registration(cluster, bad).replicas == (0,)


def test_a_reassignment_survives_a_cluster_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with EmbeddedCluster(3, data, FAST) as cluster:
        with Admin(cluster.transport) as admin:
            create(admin, 0)
        client = Client(cluster)
        produced = produce_values(client, T0, 4)
        cluster.stop_broker(2)
        with Admin(cluster.transport) as admin:
            admin.alter_partition_reassignments({T0: [2]})

    reloaded = Controller(
        BrokerConfig.from_mapping({}),
        FileMetadataStore(data / "controller"),
        InProcessTransport(),
        (0, 1, 2),
    )
    reg = reloaded.image().registration(T0)
    assert reg is not None
    assert (reg.replicas, reg.adding_replicas, reg.removing_replicas) == ((2, 0), (2,), (0,))

    with EmbeddedCluster(3, data, FAST) as cluster:
        wait_until(lambda: settled_on(cluster, (2,)), what="the move completes after the restart")
        assert consume(cluster, T0, len(produced)) == produced


def test_metadata_written_before_reassignments_existed_still_loads() -> None:
    old = {"replicas": [1, 2], "isr": [2], "leader": 2, "leader_epoch": 3, "partition_epoch": 7}

    reg = PartitionRegistration.from_json(old)

    assert reg == PartitionRegistration((1, 2), (2,), 2, 3, 7)
    assert not reg.reassigning
    assert reg.to_json() == old
    moving = PartitionRegistration((2, 1), (1,), 1, 0, 0, (2,), (1,))
    assert PartitionRegistration.from_json(moving.to_json()) == moving
    assert moving.target_replicas == (2,)


def test_deleting_a_topic_while_it_moves_deletes_every_replica(
    cluster: EmbeddedCluster, admin: Admin, client: Client
) -> None:
    create(admin, 0)
    produce_values(client, T0, 2)
    fault = pause_fetches(client, 1)
    admin.alter_partition_reassignments({T0: [1]})
    wait_until(lambda: partition_dir(cluster, 1).is_dir(), what="broker 1 hosts the new replica")

    admin.delete_topics(["t"])
    client.transport.faults.remove(fault)

    wait_until(
        lambda: not any(partition_dir(cluster, b).exists() for b in (0, 1)),
        what="both copies deleted",
    )
    assert admin.list_partition_reassignments() == {}
    assert "t" not in admin.list_topics()


def test_acks_all_producing_during_a_move_loses_nothing(
    cluster: EmbeddedCluster, admin: Admin, client: Client
) -> None:
    create(admin, 0, 1)
    acknowledged: list[bytes] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def keep_producing() -> None:
        with Producer(cluster.transport, {"acks": "all", "linger.ms": 0}) as producer:
            n = 0
            while not stop.is_set():
                value = f"r{n}".encode()
                future: Future[RecordMetadata] = producer.send("t", value, partition=0)
                try:
                    future.result(timeout=30)
                except Exception as err:  # reported below
                    failures.append(err)
                    return
                acknowledged.append(value)
                n += 1

    producing = threading.Thread(target=keep_producing)
    producing.start()
    try:
        wait_until(lambda: len(acknowledged) >= 20, what="producing before the move")
        admin.alter_partition_reassignments({T0: [1, 2]})
        wait_until(lambda: settled_on(cluster, (1, 2)), what="the move completes")
        done = len(acknowledged)
        wait_until(lambda: len(acknowledged) >= done + 20, what="producing after the move")
    finally:
        stop.set()
        producing.join()

    assert not failures
    assert registration(cluster).leader in (1, 2)
    assert consume(cluster, T0, len(acknowledged)) == acknowledged
