"""SIGTERM is a controlled shutdown: the broker's leaderships and ISR places move away before its
registration goes, clients see only retriable errors, and the restarted broker rejoins every ISR
and, elected leader again, serves every acknowledged record. A second broker with a broker.id
already in use refuses to start.
"""

from __future__ import annotations

from pathlib import Path

from confluent_kafka.admin import AdminClient
from tierlog.coordination import paths
from tierlog.testing.processes import BrokerProcess, BrokerProcessError, ProcessCluster

from .workload import (
    CLIENT_LOG,
    BackgroundProducer,
    check_acknowledged,
    create_topic,
    elect_preferred_leaders,
    read_partition,
    wait_fully_replicated,
    wait_gauges_truthful,
    zookeeper_partitions,
)

TOPIC = "payments"
PARTITIONS = 3


def test_sigterm_moves_every_leadership_away_before_deregistering_and_the_broker_rejoins(
    cluster: ProcessCluster, tmp_path: Path
) -> None:
    _check_a_second_broker_with_a_broker_id_in_use_refuses_to_start(cluster, tmp_path)
    create_topic(cluster, TOPIC, PARTITIONS, **{"min.insync.replicas": 2})
    wait_fully_replicated(cluster)
    producer = BackgroundProducer(cluster.bootstrap_servers(), TOPIC, rate_per_s=150, value_size=50)
    producer.start()
    try:
        producer.wait_acks(100, 60)
        leading = {
            b: [v for v in zookeeper_partitions(cluster) if v.leader == b] for b in (0, 1, 2)
        }
        stopping = max(leading, key=lambda b: len(leading[b]))
        assert leading[stopping], "no broker leads anything"

        assert cluster.broker(stopping).terminate() == 0
        output = cluster.broker(stopping).output()
        assert "tierlog: controlled shutdown" in output and "tierlog: stopped" in output

        # ZooKeeper orders every write: each partition state was changed before the
        # registration was deleted (the zxid of that deletion is the parent's pzxid).
        ids = cluster.zk.exists(paths.BROKER_IDS)
        assert ids is not None and stopping not in cluster.registered()
        deregistered_at = ids.pzxid
        for view in zookeeper_partitions(cluster):
            assert view.leader != stopping and stopping not in view.isr, view
            state_path = f"{paths.BROKER_TOPICS}/{view.topic}/partitions/{view.partition}/state"
            stat = cluster.zk.exists(state_path)
            assert stat is not None
            assert stat.mzxid < deregistered_at, f"{view} changed after the deregistration"
        wait_gauges_truthful(cluster, f"with broker {stopping} stopped")
        producer.wait_acks(100, 60)

        cluster.restart(stopping)
        wait_fully_replicated(cluster)
        wait_gauges_truthful(cluster, f"after broker {stopping} rejoined")
        producer.wait_acks(100, 60)
    finally:
        assert producer.stop() == 0
    assert not producer.failures, producer.failures[:5]

    # Leading its partitions again, the restarted broker serves exactly what was acknowledged.
    elect_preferred_leaders(cluster, TOPIC, PARTITIONS)
    assert any(cluster.leader(TOPIC, p) == stopping for p in range(PARTITIONS))
    logs = {p: read_partition(cluster.bootstrap_servers(), TOPIC, p) for p in range(PARTITIONS)}
    check_acknowledged(producer.acked(), logs)


def _check_a_second_broker_with_a_broker_id_in_use_refuses_to_start(
    cluster: ProcessCluster, tmp_path: Path
) -> None:
    """(In the same test: a cluster costs a fair part of the suite's time to start.)"""
    taken = 1
    epoch_before = cluster.zk.exists(paths.broker_path(taken))
    assert epoch_before is not None
    impostor = BrokerProcess(
        taken,
        tmp_path / "impostor",
        {
            **{k: v for k, v in cluster.broker(taken).settings.items() if k.startswith("zoo")},
            "broker.id": str(taken),
        },
    )
    impostor.start()
    try:
        try:
            impostor.wait_serving(60)
        except BrokerProcessError:
            pass
        else:
            raise AssertionError("a second broker with broker.id 1 started serving")
        assert impostor.wait_stopped(30) != 0
    finally:
        impostor.kill()
    assert f"broker.id {taken} is already registered by another broker" in impostor.output()
    still = cluster.zk.exists(paths.broker_path(taken))
    assert still is not None and still.czxid == epoch_before.czxid
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers(), "logger": CLIENT_LOG})
    assert set(admin.list_topics(timeout=30).brokers) == {0, 1, 2}
    wait_gauges_truthful(cluster, "after the impostor left")
