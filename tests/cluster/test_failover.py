"""Crashes in turn under load: a follower, a leader and the controller are SIGKILLed and
restarted, and a ZooKeeper node dies, while a real producer (acks=all, idempotent) and a consumer
group run the whole time. Nothing acknowledged may be lost, the group goes on, leaders move,
tiering goes on from the new leader without uploading anything twice, and the gauges of every
broker agree with ZooKeeper at each step.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from tierlog.coordination.zookeeper_server import ZooKeeperEnsemble
from tierlog.model import RemoteLogSegmentState
from tierlog.testing.processes import ProcessCluster, wait_until

from .conftest import SESSION_TIMEOUT_MS, tiered_settings
from .workload import (
    BackgroundProducer,
    GroupConsumer,
    bucket_manifests,
    check_acknowledged,
    check_bucket_matches_metadata,
    check_no_duplicate_uploads,
    committed_offsets,
    create_topic,
    elect_preferred_leaders,
    end_offsets,
    read_partition,
    remote_segments,
    wait_fully_replicated,
    wait_gauges_truthful,
    zookeeper_partitions,
)

TOPIC = "orders"
PARTITIONS = 3
GROUP = "billing"
#: Beyond the session timeout, what an election may take on a busy 2-core machine.
ELECTION_ALLOWANCE_S = 30.0


@pytest.fixture
def busy_cluster(
    tmp_path: Path, ensemble: ZooKeeperEnsemble, bucket: Path
) -> Iterator[ProcessCluster]:
    """Tiered brokers that also apply local retention often, so reads reach remote data."""
    settings = {**tiered_settings(bucket), "log.retention.check.interval.ms": 1000}
    with ProcessCluster(
        tmp_path / "brokers",
        ensemble.connect_string,
        3,
        settings=settings,
        session_timeout_ms=SESSION_TIMEOUT_MS,
    ) as running:
        yield running


def _remote_uploads(bucket: Path, partition: int) -> int:
    return sum(1 for p, _ in bucket_manifests(bucket, TOPIC).values() if p == partition)


@attrs.frozen
class Crash:
    killed_at: float
    moved_at: float
    new_leaders: dict[tuple[str, int], int]


def _crash_and_restart(
    cluster: ProcessCluster, producer: BackgroundProducer, victim: int, what: str
) -> Crash:
    """SIGKILLs ``victim``, waits until the controller has moved every leadership it held and
    taken it out of the ISRs, checks the gauges on the way, restarts it and waits until it is
    back in every ISR."""
    before = {(v.topic, v.partition): v for v in zookeeper_partitions(cluster)}
    led = {key for key, v in before.items() if v.leader == victim}
    cluster.broker(victim).kill()
    killed_at = time.monotonic()

    def moved() -> bool:
        now = {(v.topic, v.partition): v for v in zookeeper_partitions(cluster)}
        return victim not in cluster.registered() and all(
            victim not in v.isr and v.leader != victim for v in now.values()
        )

    wait_until(
        moved,
        SESSION_TIMEOUT_MS / 1000 + ELECTION_ALLOWANCE_S,
        f"the leaderships and ISR places of {what} {victim} to move",
        interval_s=0.05,
    )
    moved_at = time.monotonic()
    after = {(v.topic, v.partition): v for v in zookeeper_partitions(cluster)}
    for key in led:
        assert after[key].leader_epoch > before[key].leader_epoch, (key, before[key], after[key])
        assert after[key].leader in before[key].isr, ("unclean election", before[key], after[key])
    under = [v for v in after.values() if len(v.isr) < len(v.replicas)]
    assert under, "a dead broker left every ISR whole"
    wait_gauges_truthful(cluster, f"with {what} {victim} dead")
    assert sum(
        cluster.broker(b).metric("ReplicaManager", "UnderReplicatedPartitions")
        for b in cluster.brokers
        if b != victim
    ) == len(under)
    producer.wait_acks(20, 60)
    print(f"{what} {victim} killed: leaderships moved after {moved_at - killed_at:.2f}s")

    cluster.restart(victim)
    wait_fully_replicated(cluster)
    wait_gauges_truthful(cluster, f"after {what} {victim} came back")
    return Crash(killed_at, moved_at, {key: after[key].leader for key in led})


def test_follower_leader_and_controller_crash_in_turn_and_a_zookeeper_node_dies(
    busy_cluster: ProcessCluster, ensemble: ZooKeeperEnsemble, bucket: Path
) -> None:
    cluster = busy_cluster
    create_topic(
        cluster,
        TOPIC,
        PARTITIONS,
        **{
            "min.insync.replicas": 2,
            "remote.storage.enable": "true",
            "segment.bytes": 32768,
            "local.retention.ms": 3000,
        },
    )
    wait_fully_replicated(cluster)
    wait_gauges_truthful(cluster, "at the start")
    producer = BackgroundProducer(
        cluster.bootstrap_servers(), TOPIC, rate_per_s=250, value_size=100
    )
    consumer = GroupConsumer(cluster.bootstrap_servers(), TOPIC, GROUP)
    producer.start()
    consumer.start()
    try:
        producer.wait_acks(200, 60)
        wait_until(lambda: consumer.count() > 0, 60, "the group to consume")

        controller = cluster.controller_id()
        assert controller is not None
        target = next(p for p in range(PARTITIONS) if cluster.leader(TOPIC, p) != controller)
        leader = cluster.leader(TOPIC, target)
        (follower,) = set(cluster.brokers) - {controller, leader}
        wait_until(
            lambda: _remote_uploads(bucket, target) > 0,
            90,
            f"a segment of partition {target} tiered by its first leader {leader}",
        )

        _crash_and_restart(cluster, producer, follower, "follower")

        crash = _crash_and_restart(cluster, producer, leader, "leader")
        new_leader = crash.new_leaders[(TOPIC, target)]
        first_ack = producer.first_ack_after(crash.moved_at, target)
        assert first_ack is not None
        print(
            f"partition {target}: a new leader {crash.moved_at - crash.killed_at:.2f}s and "
            f"the first acknowledged produce after it {first_ack - crash.killed_at:.2f}s "
            f"after the SIGKILL (session timeout {SESSION_TIMEOUT_MS} ms)"
        )
        uploads_before = _remote_uploads(bucket, target)
        wait_until(
            lambda: _remote_uploads(bucket, target) > uploads_before,
            90,
            f"tiering of partition {target} to go on",
        )

        _crash_and_restart(cluster, producer, controller, "controller")
        assert cluster.controller_id() is not None

        ensemble.kill(0)
        producer.wait_acks(200, 60)
        create_topic(cluster, "created-without-one-zookeeper-node", 1)
        wait_gauges_truthful(cluster, "with a ZooKeeper node dead")
        ensemble.start_node(0)
        producer.wait_acks(50, 60)
    finally:
        left = producer.stop()
        consumed_at_stop = consumer.count()
    assert left == 0, f"{left} records never acknowledged"
    assert not producer.failures, producer.failures[:5]
    acks = producer.acked()
    print(f"{sum(a.offset is None for a in acks)} of {len(acks)} records acknowledged implicitly")

    # The group keeps consuming and committing through every crash, and catches up.
    try:
        acked_values = {a.value for a in acks}
        wait_until(lambda: acked_values <= consumer.values(), 120, "the group to catch up")
    finally:
        consumer.stop()
    assert consumed_at_stop > 0 and consumer.commits > 0
    ends = end_offsets(cluster.bootstrap_servers(), TOPIC, PARTITIONS)
    assert committed_offsets(cluster.bootstrap_servers(), TOPIC, GROUP, PARTITIONS) == ends

    # Every broker was killed once: each leads its preferred partition again (after truncating
    # by leader epoch and catching up) and serves, from the start of the log (remote segments
    # first), exactly what was acknowledged.
    elect_preferred_leaders(cluster, TOPIC, PARTITIONS)
    logs = {p: read_partition(cluster.bootstrap_servers(), TOPIC, p) for p in range(PARTITIONS)}
    check_acknowledged(acks, logs)

    # Tiering went on from the new leader, and nothing was uploaded twice.
    segments = remote_segments(cluster.bootstrap_servers(), TOPIC)
    finished = [s for s in segments if s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED]
    uploaders = {s.broker_id for s in finished if s.partition == target}
    assert {leader, new_leader} <= uploaders, (leader, new_leader, uploaders)
    overlapping = check_no_duplicate_uploads(segments)
    check_bucket_matches_metadata(bucket, TOPIC, segments)
    dangling = [s for s in segments if s.state is RemoteLogSegmentState.COPY_SEGMENT_STARTED]
    print(
        f"{len(finished)} segments tiered, {overlapping} overlapping in part at a leader "
        f"change, {len(dangling)} dangling after crashes"
    )
    wait_gauges_truthful(cluster, "at the end")
