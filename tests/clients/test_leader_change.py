"""Clients follow a partition's leader when its broker stops and comes back (3 brokers,
replication factor 3, min.insync.replicas 2): nothing acknowledged with acks=all is lost or
moved, and a consumer carries on from the new leader."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tierlog.cluster import EmbeddedCluster

from tests.waiting import wait_until

from .conftest import (
    EARLIEST,
    OpenConsumer,
    assert_same_records,
    confluent_kafka,
    create_topic,
    end_offsets,
    leader_of,
    listening,
    make_records,
    on,
    produce,
)

PARTITIONS = 2


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    """Three brokers whose followers fetch again quickly, with a replicated topic ``t``."""
    with listening(
        tmp_path, 3, replica_fetch_wait_max_ms=100, replica_fetch_backoff_ms=50
    ) as running:
        create_topic(running, "t", PARTITIONS, 3, {"min.insync.replicas": 2})
        yield running


class Stream:
    """A confluent-kafka producer (acks=all) sending to every partition in turn from a thread
    until stopped, recording each acknowledgement with the phase it arrived in."""

    def __init__(self, bootstrap: str) -> None:
        self.phase = "before"
        self.acked: list[tuple[str, int, int, bytes]] = []
        self.failed: list[str] = []
        self._producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2}
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stream-producer")

    def _delivered(self, err: object, message: Any) -> None:
        if err is not None:
            self.failed.append(f"{self.phase}: {err}")
        else:
            self.acked.append((self.phase, message.partition(), message.offset(), message.value()))

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            value = b"value-%d" % n
            self._producer.produce(
                "t", value, partition=n % PARTITIONS, on_delivery=self._delivered
            )
            self._producer.poll(0.002)
            n += 1
        self._producer.flush(30)

    def acked_in(self, phase: str, partition: int) -> int:
        return sum(1 for a in list(self.acked) if a[0] == phase and a[1] == partition)

    def __enter__(self) -> Stream:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(60)
        self._producer.close()


def test_acknowledged_records_survive_a_leader_stop_at_their_offsets(
    cluster: EmbeddedCluster, open_consumer: OpenConsumer
) -> None:
    victim = leader_of(cluster, "t", 0)
    assert victim is not None
    with Stream(cluster.bootstrap_servers) as stream:
        wait_until(lambda: stream.acked_in("before", 0) >= 100, "acks before the stop")
        stream.phase = "stopped"
        cluster.stop_broker(victim)
        assert leader_of(cluster, "t", 0) not in (None, victim), "a new leader was elected"
        wait_until(lambda: stream.acked_in("stopped", 0) >= 100, "acks from the new leader")
        stream.phase = "restarted"
        cluster.start_broker(victim)
        wait_until(lambda: stream.acked_in("restarted", 0) >= 100, "acks after the restart")
    assert stream.failed == []

    acked = {(partition, offset): value for _, partition, offset, value in stream.acked}
    assert len(acked) == len(stream.acked), "two acknowledgements for one offset"
    ends: dict[int, int] = {}
    for partition, offset in acked:
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    consumer = open_consumer("confluent-kafka", cluster.bootstrap_servers)
    consumer.assign(on("t", dict.fromkeys(range(PARTITIONS), EARLIEST)))
    stored = {(r.partition, r.offset): r.value for r in consumer.read(on("t", ends))}
    missing = {at: value for at, value in acked.items() if stored.get(at) != value}
    assert missing == {}, f"{len(missing)} acknowledged records not at their offsets"


def test_a_kafka_python_consumer_carries_on_across_a_leader_stop(
    cluster: EmbeddedCluster, open_consumer: OpenConsumer
) -> None:
    consumer = open_consumer("kafka-python", cluster.bootstrap_servers)
    consumer.assign(on("t", dict.fromkeys(range(PARTITIONS), EARLIEST)))
    records = make_records(300, PARTITIONS, tag="phase")
    acked = produce("kafka-python", cluster.bootstrap_servers, "t", records[:100])
    received = consumer.read(end_offsets(acked))

    victim = leader_of(cluster, "t", 0)
    assert victim is not None
    cluster.stop_broker(victim)
    # Bootstrapped from the brokers still up: kafka-python leaks the socket of a refused
    # bootstrap connection, which pytest reports as an error.
    acked += produce("kafka-python", cluster.bootstrap_servers, "t", records[100:200])
    received += consumer.read(end_offsets(acked))

    cluster.start_broker(victim)
    acked += produce("kafka-python", cluster.bootstrap_servers, "t", records[200:])
    received += consumer.read(end_offsets(acked))

    assert_same_records(received, acked)
