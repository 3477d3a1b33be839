"""Compacted topics over the wire: created with the Admin API, produced to and read back with
confluent-kafka, cleaned by every replica's own cleaner thread; tiering one is refused."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tierlog.cluster import EmbeddedCluster
from tierlog.log import PartitionLog, iter_log_batches
from tierlog.model import TopicPartition

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_module = pytest.importorskip("confluent_kafka.admin")

TOPIC = "compacted"
KEYS = 20
ROUNDS = 25
PLAIN_ROUNDS = 5


def _wait(condition: object, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    config = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.cleaner.backoff.ms": 50}
    with EmbeddedCluster(3, tmp_path / "data", config, listen=True) as running:
        yield running


def _create(cluster: EmbeddedCluster, name: str, configs: dict[str, str]) -> object:
    """Creates a one-partition topic on three replicas; returns the error, if any."""
    admin = admin_module.AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics([admin_module.NewTopic(name, 1, 3, config=configs)])
    error = futures[name].exception(timeout=30)
    del admin, futures
    return error.args[0] if error is not None else None


def _replicas(cluster: EmbeddedCluster) -> list[PartitionLog]:
    tp = TopicPartition(TOPIC, 0)
    found = []
    for broker_id in cluster.broker_ids:
        partition = cluster.broker(broker_id).partition(tp)
        if partition is not None:
            found.append(partition.log)
    return found


def test_a_compacted_topic_is_cleaned_on_every_replica_and_read_back(
    cluster: EmbeddedCluster,
) -> None:
    assert None is _create(
        cluster,
        TOPIC,
        {
            "cleanup.policy": "compact",
            "segment.bytes": "4096",
            "min.cleanable.dirty.ratio": "0.01",
        },
    )
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "enable.idempotence": True,
            "linger.ms": 0,
        }
    )
    latest: dict[bytes, bytes | None] = {}
    for r in range(ROUNDS):
        for k in range(KEYS):
            key = f"key-{k}".encode()
            value = None if (k == 3 and r == ROUNDS - 1) else f"round-{r}".encode() * 4
            producer.produce(TOPIC, key=key, value=value, partition=0)
            latest[key] = value
        producer.flush(30)
    del producer
    # A second producer overwrites every key: the first one's last batch is kept only for its
    # producer state, emptied, and consumers must read across it.
    plain = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for r in range(PLAIN_ROUNDS):  # enough to roll the segment past the first one's batches
        for k in range(KEYS):
            key = f"key-{k}".encode()
            latest[key] = f"plain-{r}".encode() * 4 if k != 3 else None
            plain.produce(TOPIC, key=key, value=latest[key], partition=0)
        plain.flush(30)
    del plain
    produced = KEYS * (ROUNDS + PLAIN_ROUNDS)
    replicas = _replicas(cluster)
    assert len(replicas) == 3
    _wait(lambda: all(log.log_end_offset == produced for log in replicas), "replication")
    for log in replicas:
        _wait(
            lambda log=log: (log.cleaner_checkpoint or 0) >= log.segments()[-1].base_offset > 0,
            f"the cleaner of {log.directory}",
        )
        assert log.size < produced * 60
        emptied = [b for b in iter_log_batches(log) if b.records_count == 0]
        assert [b.has_producer_id for b in emptied] == [True]

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "compaction-test",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, confluent_kafka.OFFSET_BEGINNING)])
    read: list[tuple[int, bytes, bytes | None]] = []
    deadline = time.monotonic() + 30
    while (not read or read[-1][0] < produced - 1) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        assert message.error() is None, message.error()
        read.append((message.offset(), message.key(), message.value()))
    consumer.close()
    offsets = [offset for offset, _, _ in read]
    assert offsets == sorted(set(offsets)) and offsets[-1] == produced - 1
    assert len(read) < produced  # gaps where older values were
    seen: dict[bytes, bytes | None] = {}
    for _, key, value in read:
        seen[key] = value
    assert seen == latest  # the tombstone of key-3 included
    leader_clean = max(log.cleaner_checkpoint or 0 for log in replicas)
    below = [key for offset, key, _ in read if offset < leader_clean]
    assert len(below) == len(set(below))
    # Every broker's cleaner reports, with Kafka's names.
    for broker_id in cluster.broker_ids:
        assert cluster.metric(broker_id, "LogCleaner", "max-buffer-utilization-percent") >= 0  # type: ignore[operator]
        assert cluster.metric(broker_id, "LogCleanerManager", "max-dirty-percent") is not None


def test_tiering_a_compacted_topic_is_refused_with_invalid_config(
    cluster: EmbeddedCluster,
) -> None:
    error = _create(
        cluster, "tiered-compacted", {"cleanup.policy": "compact", "remote.storage.enable": "true"}
    )
    assert error is not None
    assert error.code() == confluent_kafka.KafkaError.INVALID_CONFIG  # type: ignore[attr-defined]
    message = error.str()  # type: ignore[attr-defined]
    assert "remote.storage.enable" in message and "cleanup.policy" in message


def test_log_cleaner_threads_follow_the_dynamic_setting(cluster: EmbeddedCluster) -> None:
    broker = cluster.broker(cluster.broker_ids[0])
    cleaner = broker.log_cleaner
    assert cleaner is not None and cleaner.thread_count == 1
    broker.config.update({"log.cleaner.threads": 3})
    assert cleaner.thread_count == 3
    broker.config.update({"log.cleaner.threads": 0})
    assert cleaner.thread_count == 0
