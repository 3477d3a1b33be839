"""Network faults between live broker processes: a process paused with SIGSTOP (shorter and
longer than ``replica.lag.time.max.ms``, and longer than the ZooKeeper session), a listener that
nobody can reach while its broker's session lives, and a broker cut off from ZooKeeper while it
leads. Nothing acknowledged with acks=all may be lost, and the gauges must tell the truth.

The brokers share one cluster (starting one costs a fair part of the suite's time); broker 2
advertises its listener through a relay the tests can cut, and reaches ZooKeeper through another.
Every test leaves the cluster whole again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from tierlog.coordination import paths
from tierlog.testing.processes import ProcessCluster, wait_until

from tests.coordination.conftest import started_ensemble
from tests.coordination.tcp_proxy import TcpProxy

from .conftest import tiered_settings
from .workload import (
    CLIENT_LOG,
    BackgroundProducer,
    check_acknowledged,
    read_partition,
    wait_fully_replicated,
    wait_gauges_truthful,
)

#: Longer than the time a follower may lag with a margin that a pause in between fits in.
SESSION_TIMEOUT_MS = 10_000
REPLICA_LAG_MS = 3000
ELECTION_ALLOWANCE_S = 30.0
RELAYED = 2


class FaultyCluster:
    """The cluster, and the relays between broker 2 and the others."""

    def __init__(self, cluster: ProcessCluster, listener: TcpProxy, zookeeper: TcpProxy) -> None:
        self.cluster = cluster
        self.listener_relay = listener
        self.zookeeper_relay = zookeeper


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultyCluster]:
    directory = tmp_path_factory.mktemp("faulty")
    (directory / "bucket").mkdir()
    ensemble = started_ensemble(directory / "zookeeper", 3)
    try:
        settings = {
            **tiered_settings(directory / "bucket"),
            "replica.lag.time.max.ms": REPLICA_LAG_MS,
        }
        cluster = ProcessCluster(
            directory / "brokers",
            ensemble.connect_string,
            3,
            settings=settings,
            session_timeout_ms=SESSION_TIMEOUT_MS,
        )
        relayed = cluster.broker(RELAYED)
        first_node = ensemble.nodes[0]
        with (
            TcpProxy("127.0.0.1", relayed.port) as listener,
            TcpProxy(first_node.host, first_node.client_port) as zookeeper,
        ):
            relayed.configure(
                {
                    "advertised.listeners": f"PLAINTEXT://{listener.address}",
                    "zookeeper.connect": f"{zookeeper.address}{cluster.chroot}",
                }
            )
            with cluster:
                yield FaultyCluster(cluster, listener, zookeeper)
    finally:
        ensemble.stop()


def _create(cluster: ProcessCluster, topic: str, leaders: list[int]) -> None:
    """A topic with replication factor 3 and min.insync.replicas 2 whose partition *i* is led
    by ``leaders[i]`` (its preferred replica)."""
    assignment = [[leader, *sorted({0, 1, 2} - {leader})] for leader in leaders]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers(), "logger": CLIENT_LOG})
    new = NewTopic(
        topic, len(assignment), replica_assignment=assignment, config={"min.insync.replicas": "2"}
    )
    for future in admin.create_topics([new], request_timeout=60).values():
        future.result(timeout=90)
    wait_until(
        lambda: [cluster.leader(topic, p) for p in range(len(leaders))] == leaders,
        60,
        f"the preferred leaders of {topic}",
    )
    wait_fully_replicated(cluster)


def _replaced(
    cluster: ProcessCluster,
    topic: str,
    leader: int,
    before: dict[str, object],
    why: str,
) -> int:
    """Waits for partition 0 to get another leader, with a higher leader epoch, once ``leader``
    (``why``: paused, cut off...) has lost its registration; returns the new leader."""
    since = time.monotonic()
    wait_until(
        lambda: cluster.leader(topic, 0) not in (leader, -1),
        SESSION_TIMEOUT_MS / 1000 + ELECTION_ALLOWANCE_S,
        f"a new leader while broker {leader} is {why}",
        interval_s=0.05,
    )
    print(f"leader {why} replaced after {time.monotonic() - since:.2f}s")
    after = cluster.partition_state(topic, 0)
    assert after is not None
    assert int(str(after["leader_epoch"])) > int(str(before["leader_epoch"]))
    assert leader not in cluster.registered()
    return cluster.leader(topic, 0)


def _check_nothing_lost(
    cluster: ProcessCluster, topic: str, *producers: BackgroundProducer
) -> None:
    acks = [a for producer in producers for a in producer.acked()]
    partitions = {a.partition for a in acks}
    try:
        logs = {p: read_partition(cluster.bootstrap_servers(), topic, p) for p in partitions}
    except AssertionError as err:
        raise AssertionError(f"{err}\n{_what_each_broker_says(cluster, topic)}") from err
    retried = tuple(p.label for p in producers if not p.idempotent)
    check_acknowledged(acks, logs, retried_labels=retried)


def test_a_paused_follower_drops_out_of_the_isr_only_after_the_lag_time(
    faulty: FaultyCluster,
) -> None:
    cluster = faulty.cluster
    wait_until(lambda: cluster.controller_id() is not None, 30, "a controller")
    controller = cluster.controller_id()
    leader, follower = sorted({0, 1, 2} - {controller})  # type: ignore[arg-type]
    topic = "paused-follower"
    _create(cluster, topic, [leader])
    producer = BackgroundProducer(cluster.bootstrap_servers(), topic, rate_per_s=100, value_size=50)
    producer.start()
    try:
        producer.wait_acks(50, 60)
        before = cluster.partition_state(topic, 0)

        cluster.broker(follower).pause()
        time.sleep(REPLICA_LAG_MS / 4000)
        cluster.broker(follower).resume()
        producer.wait_acks(50, 60)
        assert cluster.partition_state(topic, 0) == before, "a short pause changed the ISR"

        cluster.broker(follower).pause()
        try:
            wait_until(
                lambda: follower not in cluster.isr(topic, 0),
                SESSION_TIMEOUT_MS / 1000,
                f"the leader to drop paused follower {follower} from the ISR",
            )
            assert follower in cluster.registered(), "the pause outlived the session"
            assert cluster.leader(topic, 0) == leader
            wait_gauges_truthful(cluster, "with a follower paused", skip=[follower])
            assert cluster.broker(leader).metric("ReplicaManager", "UnderReplicatedPartitions") > 0
            producer.wait_acks(50, 60, partition=0)
        finally:
            cluster.broker(follower).resume()
        wait_fully_replicated(cluster)
        wait_gauges_truthful(cluster, "after the follower resumed")
        assert cluster.broker(leader).metric("ReplicaManager", "UnderReplicatedPartitions") == 0
        producer.wait_acks(50, 60)
    finally:
        assert producer.stop() == 0
    assert not producer.failures
    _check_nothing_lost(cluster, topic, producer)


def test_a_leader_paused_beyond_its_session_is_replaced_and_follows_when_it_resumes(
    faulty: FaultyCluster,
) -> None:
    cluster = faulty.cluster
    wait_until(lambda: cluster.controller_id() is not None, 30, "a controller")
    controller = cluster.controller_id()
    leader = min({0, 1} - {controller})  # broker 2's relays stay out of this one
    topic = "paused-leader"
    _create(cluster, topic, [leader])
    producer = BackgroundProducer(cluster.bootstrap_servers(), topic, rate_per_s=100, value_size=50)
    producer.start()
    try:
        producer.wait_acks(50, 60)
        before = cluster.partition_state(topic, 0)
        assert before is not None
        old_epoch = _broker_epoch(cluster, leader)

        cluster.broker(leader).pause()
        try:
            new_leader = _replaced(cluster, topic, leader, before, "paused")
            producer.wait_acks(50, 60, partition=0)
            wait_gauges_truthful(cluster, "with the old leader paused", skip=[leader])
        finally:
            cluster.broker(leader).resume()
        # It learns that it no longer leads, registers again (a new broker epoch), follows.
        wait_until(
            lambda: _broker_epoch(cluster, leader) not in (None, old_epoch),
            60,
            f"broker {leader} to register again",
        )
        wait_fully_replicated(cluster)
        assert cluster.leader(topic, 0) == new_leader
        wait_gauges_truthful(cluster, "after the old leader resumed")
        wait_until(
            lambda: "registered again" in cluster.broker(leader).output(),
            30,
            "the broker to say it registered again",
        )
        producer.wait_acks(50, 60)
    finally:
        assert producer.stop() == 0
    assert not producer.failures
    _check_nothing_lost(cluster, topic, producer)


def _what_each_broker_says(cluster: ProcessCluster, topic: str) -> str:
    """Each broker's own answer for ``topic``'s partitions (Metadata and ListOffsets), for a
    failure message."""
    lines = []
    for broker in cluster:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "diagnosis"})
        try:
            described = consumer.list_topics(topic, timeout=10).topics[topic]
            for partition, seen in sorted(described.partitions.items()):
                try:
                    marks: object = consumer.get_watermark_offsets(
                        KafkaTopicPartition(topic, partition), timeout=10
                    )
                except KafkaException as err:
                    marks = err
                lines.append(
                    f"broker {broker.broker_id} says {topic}-{partition}: leader {seen.leader}, "
                    f"isr {seen.isrs}, error {seen.error}, watermarks {marks}"
                )
        finally:
            consumer.close()
    return "\n".join(lines)


def _broker_epoch(cluster: ProcessCluster, broker_id: int) -> int | None:
    stat = cluster.zk.exists(paths.broker_path(broker_id))
    return None if stat is None else int(stat.czxid)


def test_a_listener_nobody_can_reach_keeps_its_leaderships_and_loses_no_acknowledged_record(
    faulty: FaultyCluster,
) -> None:
    """As in Kafka, a leader whose session lives keeps leading though no one reaches it (no
    client writes to it, so its ISR stays as it was unless a write was still unreplicated),
    while from its side it still fetches from the other leaders and stays in their ISRs."""
    cluster = faulty.cluster
    relay = faulty.listener_relay
    registration, _ = cluster.zk.get(paths.broker_path(RELAYED))
    assert f"PLAINTEXT://{relay.address}" in registration.decode()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers(), "logger": CLIENT_LOG})
    told = admin.list_topics(timeout=30).brokers[RELAYED]
    assert (told.host, told.port) == ("127.0.0.1", relay.port)

    topic = "unreachable"
    others = sorted({0, 1, 2} - {RELAYED})
    _create(cluster, topic, [RELAYED, *others])
    producer = BackgroundProducer(cluster.bootstrap_servers(), topic, rate_per_s=150, value_size=50)
    producer.start()
    try:
        for partition in range(3):
            producer.wait_acks(20, 60, partition=partition)
        relay.cut()
        try:
            # Longer than replica.lag.time.max.ms with writes going on: a broker that could not
            # fetch would have been dropped from these ISRs.
            for partition in (1, 2):
                producer.wait_acks(3 * REPLICA_LAG_MS // 20, 60, partition=partition)
            assert all(RELAYED in cluster.isr(topic, p) for p in (1, 2))
            assert cluster.leader(topic, 0) == RELAYED
            assert RELAYED in cluster.registered()
            wait_gauges_truthful(cluster, "with a listener nobody reaches")
        finally:
            relay.restore()
        wait_fully_replicated(cluster)
        wait_gauges_truthful(cluster, "once the listener is reachable again")
        producer.wait_acks(20, 90, partition=0)
    finally:
        assert producer.stop() == 0
    assert not producer.failures
    _check_nothing_lost(cluster, topic, producer)


def test_a_leader_cut_off_from_zookeeper_is_fenced_then_registers_again_and_follows(
    faulty: FaultyCluster,
) -> None:
    cluster = faulty.cluster
    topic = "cut-off"
    _create(cluster, topic, [RELAYED])
    producer = BackgroundProducer(cluster.bootstrap_servers(), topic, rate_per_s=100, value_size=50)
    producer.start()
    stale: BackgroundProducer | None = None
    try:
        producer.wait_acks(50, 60)
        before = cluster.partition_state(topic, 0)
        assert before is not None
        old_epoch = _broker_epoch(cluster, RELAYED)
        faulty.zookeeper_relay.cut()
        try:
            new_leader = _replaced(cluster, topic, RELAYED, before, "cut off from ZooKeeper")
            producer.wait_acks(50, 60, partition=0)
            # A client that knows only the old leader keeps writing to it: whatever the old
            # leader acknowledges (acks=all) must survive, and it has no ISR left to do so.
            stale = BackgroundProducer(
                cluster.broker(RELAYED).bootstrap,
                topic,
                rate_per_s=50,
                value_size=50,
                idempotent=False,
                delivery_timeout_ms=15_000,
                label="stale",
            )
            stale.start()
            wait_until(lambda: stale is not None and stale.sent >= 100, 30, "stale writes")
        finally:
            faulty.zookeeper_relay.restore()
        wait_until(
            lambda: _broker_epoch(cluster, RELAYED) not in (None, old_epoch),
            60,
            f"broker {RELAYED} to register again",
        )
        wait_until(
            lambda: "registered again" in cluster.broker(RELAYED).output(),
            30,
            "the broker to say it registered again",
        )
        wait_fully_replicated(cluster)
        assert cluster.leader(topic, 0) == new_leader
        wait_gauges_truthful(cluster, "after the cut-off leader registered again")
        producer.wait_acks(50, 60)
    finally:
        assert producer.stop() == 0
        if stale is not None:
            stale.stop()
    assert not producer.failures
    assert stale is not None
    print(f"the fenced leader acknowledged {stale.count()} of {stale.sent} stale writes")
    _check_nothing_lost(cluster, topic, producer, stale)
