"""Reassigning tiered partitions (expand, move, shrink), as Kafka's ReassignReplica tests do.

Early segments exist only in remote storage (``local.retention.bytes=1``) and the user
partitions share the metadata topic's partitions. A replica added by a reassignment rebuilds
its state from the remote tier, joins the ISR and can lead, serving the tiered data remotely;
a replica removed by a reassignment deletes only its local copy (remote segments and their
metadata belong to the topic), and tiering goes on from the new leader where it stopped.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from tierlog.client import Admin, NewTopic
from tierlog.metadata.partitioner import metadata_partition
from tierlog.model import IndexType, RemoteLogSegmentState, TopicIdPartition, TopicPartition
from tierlog.server import protocol as p

from tests.server.conftest import batch
from tests.waiting import wait_until

from .conftest import Tiered
from .test_copy import consume_all

PARTITIONS = 3
METADATA_PARTITIONS = 2
TIERED_TOPIC = {
    "segment.bytes": "4096",
    "remote.storage.enable": "true",
    "local.retention.bytes": "1",
}
CLUSTER = {
    "rlmm.config.remote.log.metadata.topic.num.partitions": METADATA_PARTITIONS,
    "replica.fetch.backoff.ms": 50,
    "replica.fetch.wait.max.ms": 100,
}
TPS = [TopicPartition("t", i) for i in range(PARTITIONS)]


def start(make_tiered: Callable[..., Tiered], *replicas: int) -> Tiered:
    tiered = make_tiered(3, **CLUSTER)
    with Admin(tiered.cluster.transport) as admin:
        admin.create_topics(
            [
                NewTopic(
                    "t",
                    replica_assignment={tp.partition: replicas for tp in TPS},
                    configs=TIERED_TOPIC,
                )
            ]
        )
    return tiered


def reassign(tiered: Tiered, replicas: list[int]) -> None:
    with Admin(tiered.cluster.transport) as admin:
        admin.alter_partition_reassignments(dict.fromkeys(TPS, replicas))


def fill(tiered: Tiered, batches: int, tag: str) -> dict[TopicPartition, list[bytes]]:
    produced: dict[TopicPartition, list[bytes]] = {tp: [] for tp in TPS}
    for n in range(batches):
        for tp in TPS:
            records = batch(10, tag=f"{tag}p{tp.partition}b{n}", value_size=100)
            answer = tiered.client.produce(tp.topic, tp.partition, records)
            assert answer.error_code == p.NONE
            produced[tp].extend(f"{tag}p{tp.partition}b{n}-{i}".encode() for i in range(10))
    return produced


def local(tiered: Tiered, broker_id: int, tp: TopicPartition) -> Any:
    replica = tiered.cluster.broker(broker_id).partition(tp)
    assert replica is not None, f"broker {broker_id} does not host {tp}"
    return replica


def tiered_to_the_active_segment(tiered: Tiered, broker_id: int, tp: TopicPartition) -> bool:
    """Every rolled segment of the leader is tiered and gone locally."""
    plog = local(tiered, broker_id, tp).log
    active = plog.segments()[-1].base_offset
    return bool(
        active > 0
        and plog.highest_offset_in_remote_storage == active - 1
        and plog.local_log_start_offset == active
    )


def wait_tiered(tiered: Tiered, broker_id: int) -> None:
    for tp in TPS:
        wait_until(
            lambda tp=tp: tiered_to_the_active_segment(tiered, broker_id, tp),
            f"{tp} tiered up to its active segment on broker {broker_id}",
        )


def remote_segments(tiered: Tiered, broker_id: int, tp: TopicPartition) -> list[Any]:
    """Every segment the metadata holds for ``tp`` (any state), as ``broker_id`` sees it."""
    replica = local(tiered, broker_id, tp)
    host = tiered.cluster.broker(broker_id).plugin_host
    assert host is not None and replica.topic_id is not None
    tip = TopicIdPartition(replica.topic_id, tp)
    wait_until(lambda: host.metadata.is_ready(tip), f"metadata of {tp} ready on {broker_id}")
    listed = sorted(host.metadata.list_remote_log_segments(tip), key=lambda s: s.start_offset)
    return listed


def assert_contiguous_without_duplicates(tiered: Tiered, broker_id: int) -> None:
    """The remote tier holds each partition once, from offset 0 with no gap or overlap, and
    every upload is one of those segments."""
    ids: set[str] = set()
    for tp in TPS:
        segments = remote_segments(tiered, broker_id, tp)
        assert all(s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED for s in segments)
        assert segments[0].start_offset == 0
        for before, after in itertools.pairwise(segments):
            assert after.start_offset == before.end_offset + 1, (tp, before, after)
        ids.update(str(s.remote_log_segment_id.id) for s in segments)
    copies = [e.segment_id for e in tiered.history.of("copy")]
    assert sorted(copies) == sorted(ids)


def settled_on(tiered: Tiered, replicas: tuple[int, ...]) -> bool:
    image = tiered.cluster.controller.image()
    for tp in TPS:
        reg = image.registration(tp)
        assert reg is not None
        if reg.replicas != replicas or reg.reassigning or set(reg.isr) != set(replicas):
            return False
    return True


def assert_rebuilt_from_remote(tiered: Tiered, broker_id: int, leader: int) -> None:
    """``broker_id`` started each partition at the leader's local log start, on the epochs and
    producer state read from the remote tier, without copying tiered data."""
    for tp in TPS:
        rebuilt = local(tiered, broker_id, tp).log
        source = local(tiered, leader, tp).log
        wait_until(
            lambda rebuilt=rebuilt, source=source: rebuilt.log_end_offset == source.log_end_offset,
            f"{tp} caught up on broker {broker_id}",
        )
        assert rebuilt.log_start_offset == 0
        assert rebuilt.local_log_start_offset == source.local_log_start_offset > 0
    indexes = {
        e.detail
        for e in tiered.history.of("fetch_index")
        if e.thread.startswith("ReplicaFetcherThread") and e.thread.endswith(f"@{broker_id}")
    }
    assert indexes >= {IndexType.LEADER_EPOCH, IndexType.PRODUCER_SNAPSHOT}
    assert not tiered.history.of("fetch"), "no tiered data is copied to a follower"


def assert_serves_everything(tiered: Tiered, produced: dict[TopicPartition, list[bytes]]) -> None:
    """Consuming each partition from offset 0 gives what was produced, read remotely first."""
    fetched_before = len(tiered.history.of("fetch"))
    for tp in TPS:
        got = [v.rstrip(b".") for v in consume_all(tiered, "t", len(produced[tp]), tp.partition)]
        assert got == produced[tp]
    assert len(tiered.history.of("fetch")) > fetched_before, "the early data came from remote"


def assert_tiering_goes_on(
    tiered: Tiered, leader: int, produced: dict[TopicPartition, list[bytes]]
) -> None:
    highest = {tp: local(tiered, leader, tp).log.highest_offset_in_remote_storage for tp in TPS}
    for tp, more in fill(tiered, 15, "after").items():
        produced[tp].extend(more)
    wait_tiered(tiered, leader)
    for tp in TPS:
        assert local(tiered, leader, tp).log.highest_offset_in_remote_storage > highest[tp]
    assert_contiguous_without_duplicates(tiered, leader)


def shared_metadata_partitions(tiered: Tiered) -> None:
    image = tiered.cluster.controller.image()
    topic = image.topic("t")
    assert topic is not None
    used = [
        metadata_partition(TopicIdPartition(topic.topic_id, tp), METADATA_PARTITIONS) for tp in TPS
    ]
    assert len(set(used)) < len(used), "some user partitions share a metadata partition"


def test_expand_a_new_replica_rebuilds_from_remote_joins_the_isr_and_can_lead(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = start(make_tiered, 0)
    shared_metadata_partitions(tiered)
    produced = fill(tiered, 30, "before")
    wait_tiered(tiered, 0)

    reassign(tiered, [0, 1])

    wait_until(lambda: settled_on(tiered, (0, 1)), "the expansion completes")
    assert_rebuilt_from_remote(tiered, 1, leader=0)
    tiered.cluster.stop_broker(0)
    wait_until(
        lambda: all(tiered.client.leader("t", tp.partition) == 1 for tp in TPS),
        "the new replica leads",
    )
    assert_serves_everything(tiered, produced)
    assert_tiering_goes_on(tiered, 1, produced)
    assert not tiered.history.of("delete")


def test_move_the_only_replica_keeps_remote_data_and_tiering_continues(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = start(make_tiered, 0)
    shared_metadata_partitions(tiered)
    produced = fill(tiered, 30, "before")
    wait_tiered(tiered, 0)
    objects = set(tiered.remote_objects())
    segments = {tp: remote_segments(tiered, 0, tp) for tp in TPS}
    old_dirs = [local(tiered, 0, tp).directory for tp in TPS]

    reassign(tiered, [1])

    wait_until(lambda: settled_on(tiered, (1,)), "the move completes")
    wait_until(lambda: not any(d.exists() for d in old_dirs), "broker 0's copies deleted")
    assert all(tiered.client.leader("t", tp.partition) == 1 for tp in TPS)
    assert_rebuilt_from_remote(tiered, 1, leader=1)
    # Only the topic's deletion deletes remote data: every object and segment is still there.
    assert not tiered.history.of("delete")
    assert set(tiered.remote_objects()) >= objects
    for tp in TPS:
        assert remote_segments(tiered, 1, tp) == segments[tp]
    assert_serves_everything(tiered, produced)
    assert_tiering_goes_on(tiered, 1, produced)
    assert_serves_everything(tiered, produced)


def test_shrink_to_a_follower_that_rebuilt_from_remote(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = start(make_tiered, 0, 1)
    shared_metadata_partitions(tiered)
    tiered.cluster.stop_broker(1)
    produced = fill(tiered, 30, "before")
    wait_tiered(tiered, 0)
    tiered.cluster.start_broker(1)
    wait_until(lambda: settled_on(tiered, (0, 1)), "broker 1 back in every ISR")
    assert_rebuilt_from_remote(tiered, 1, leader=0)
    objects = set(tiered.remote_objects())

    reassign(tiered, [1])

    wait_until(lambda: settled_on(tiered, (1,)), "the shrink completes")
    wait_until(
        lambda: all(tiered.cluster.broker(0).partition(tp) is None for tp in TPS),
        "broker 0's copies removed",
    )
    assert all(tiered.client.leader("t", tp.partition) == 1 for tp in TPS)
    assert not tiered.history.of("delete")
    assert set(tiered.remote_objects()) >= objects
    assert_serves_everything(tiered, produced)
    assert_tiering_goes_on(tiered, 1, produced)


def test_deleting_the_topic_after_a_move_deletes_its_remote_data(
    make_tiered: Callable[..., Tiered],
) -> None:
    tiered = start(make_tiered, 0)
    fill(tiered, 20, "before")
    wait_tiered(tiered, 0)
    reassign(tiered, [1])
    wait_until(lambda: settled_on(tiered, (1,)), "the move completes")
    assert not tiered.history.of("delete")

    with Admin(tiered.cluster.transport) as admin:
        admin.delete_topics(["t"])

    copied = {e.segment_id for e in tiered.history.of("copy")}
    wait_until(
        lambda: {e.segment_id for e in tiered.history.of("delete")} == copied,
        "every remote segment deleted with the topic",
    )
