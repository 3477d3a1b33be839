"""The coordinator follows the leadership of its ``__consumer_offsets`` partition."""

from __future__ import annotations

import threading
from collections.abc import Callable

from tierlog.cluster import EmbeddedCluster
from tierlog.groups import GroupCoordinator
from tierlog.log.results import FetchIsolation
from tierlog.model import TopicPartition
from tierlog.records import iter_batches
from tierlog.server.internal_topics import CONSUMER_OFFSETS_TOPIC

from tests.waiting import wait_until

from .conftest import connect, groups_ready

NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
NOT_COORDINATOR = 16


def _coordinator(cluster: EmbeddedCluster, broker_id: int) -> GroupCoordinator:
    coordinator = cluster.broker(broker_id).group_coordinator
    assert coordinator is not None
    return coordinator


def _leader(cluster: EmbeddedCluster, group: str) -> int:
    coordinator = _coordinator(cluster, min(cluster.controller.live_brokers()))
    tp = TopicPartition(CONSUMER_OFFSETS_TOPIC, coordinator.partition_for(group))
    registration = cluster.controller.image().registration(tp)
    assert registration is not None
    return registration.leader


def test_offsets_topic_is_replicated_and_compacted(
    make_cluster: Callable[..., EmbeddedCluster],
) -> None:
    cluster = groups_ready(make_cluster(2))
    topic = cluster.controller.image().topic(CONSUMER_OFFSETS_TOPIC)
    assert topic is not None and len(topic.partitions) == 4
    assert {len(r.replicas) for r in topic.partitions} == {2}  # 3 asked, 2 brokers live
    assert topic.configs["cleanup.policy"] == "compact"


def test_another_broker_is_not_the_coordinator(
    make_cluster: Callable[..., EmbeddedCluster],
) -> None:
    cluster = groups_ready(make_cluster(2))
    leader = _leader(cluster, "g")
    with connect(cluster, leader) as right, connect(cluster, 1 - leader) as wrong:
        assert wrong.find("g").node_id == right.find("g").node_id == leader
        assert wrong.commit("g", {("t", 0): 1}) == {("t", 0): NOT_COORDINATOR}
        assert wrong.join("g").error_code == NOT_COORDINATOR
        assert wrong.fetch_offsets("g")[0] == NOT_COORDINATOR
        assert right.commit("g", {("t", 0): 1}) == {("t", 0): NONE}


def test_committed_offsets_move_with_the_coordinator(
    make_cluster: Callable[..., EmbeddedCluster],
) -> None:
    cluster = groups_ready(make_cluster(3))
    old = _leader(cluster, "g")
    with connect(cluster, old) as client:
        assert client.commit("g", {("t", 0): 42, ("t", 2): 7}) == {("t", 0): NONE, ("t", 2): NONE}
    survivors = [b for b in cluster.broker_ids if b != old]
    # The brokers left are told to load it; hold one back to see it loading.
    release = threading.Event()
    for broker_id in survivors:
        _coordinator(cluster, broker_id)._loader.submit(release.wait)
    cluster.stop_broker(old)
    new = wait_until(lambda: _leader(cluster, "g") in survivors and _leader(cluster, "g"), "leader")
    with connect(cluster, new) as client:
        assert client.find("g").node_id == new
        assert client.fetch_offsets("g")[0] == COORDINATOR_LOAD_IN_PROGRESS
        assert client.commit("g", {("t", 1): 1}) == {("t", 1): COORDINATOR_LOAD_IN_PROGRESS}
        release.set()
        assert _coordinator(cluster, new).wait_loaded()
        assert client.fetch_offsets("g") == (
            NONE,
            {("t", 0): (42, "", NONE), ("t", 2): (7, "", NONE)},
        )
    cluster.start_broker(old)
    # Back as a follower (or leader again after an election): whoever leads answers the same.
    wait_until(lambda: _leader(cluster, "g") >= 0, "a leader")
    leader = _leader(cluster, "g")
    assert _coordinator(cluster, leader).wait_loaded()
    with connect(cluster, leader) as client:
        assert client.fetch_offsets("g")[1] == {("t", 0): (42, "", NONE), ("t", 2): (7, "", NONE)}


def test_the_partition_holds_kafkas_records(cluster: EmbeddedCluster) -> None:
    """What a commit and a sync wrote, read back from the log of the group's partition."""
    with connect(cluster) as client:
        joined = client.join_twice("formats")
        client.sync("formats", 1, joined.member_id, {joined.member_id: {"t": [0]}})
        client.commit("formats", {("t", 0): 99}, generation=1, member_id=joined.member_id)
    coordinator = _coordinator(cluster, 0)
    tp = TopicPartition(CONSUMER_OFFSETS_TOPIC, coordinator.partition_for("formats"))
    replica = cluster.broker(0).partition(tp)
    assert replica is not None
    data = replica.log.read(0, 1 << 20, FetchIsolation.HIGH_WATERMARK).records
    records = [(r.key, r.value) for b in iter_batches(data) for r in b]
    group_key = b"\x00\x02\x00\x07formats"
    offset_key = b"\x00\x01\x00\x07formats\x00\x01t\x00\x00\x00\x00"
    group_values = [v for k, v in records if k == group_key]
    offset_values = [v for k, v in records if k == offset_key]
    assert group_values and offset_values
    # GroupMetadataValue v3: "consumer", generation 1, "range", the leader, then one member.
    assert group_values[-1] is not None
    assert group_values[-1].startswith(b"\x00\x03\x00\x08consumer\x00\x00\x00\x01\x00\x05range")
    # OffsetCommitValue v3: offset 99, leader epoch -1, metadata "".
    assert offset_values[-1] is not None
    assert (
        offset_values[-1][:16] == b"\x00\x03" + (99).to_bytes(8, "big") + b"\xff" * 4 + b"\x00\x00"
    )
