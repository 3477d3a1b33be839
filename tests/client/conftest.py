"""An embedded cluster per test, clients closed after it, and no thread left behind."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tierlog.client import Admin, Consumer, ConsumerRecord, NewTopic, Producer
from tierlog.cluster import EmbeddedCluster
from tierlog.model import TopicPartition

#: Small waits keep failing retries quick; nothing here asserts on elapsed time.
FAST_CLIENT = {"retry.backoff.ms": 10, "retry.backoff.max.ms": 100}


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Every thread a test starts (clients, brokers) must be gone once its fixtures closed."""
    before = set(threading.enumerate())
    yield
    leaked = []
    for thread in threading.enumerate():
        if thread not in before:
            thread.join(10)
            if thread.is_alive():
                leaked.append(thread.name)
    assert not leaked, f"threads left running: {leaked}"


def start_cluster(data_dir: Path, size: int = 3) -> EmbeddedCluster:
    cluster = EmbeddedCluster(size, data_dir)
    cluster.start()
    return cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    cluster = start_cluster(tmp_path / "cluster")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def admin(cluster: EmbeddedCluster) -> Iterator[Admin]:
    with Admin(cluster.transport, FAST_CLIENT) as client:
        yield client


@pytest.fixture
def make_producer(cluster: EmbeddedCluster) -> Iterator[Callable[..., Producer]]:
    producers: list[Producer] = []

    def make(config: dict[str, Any] | None = None, transport: Any = None) -> Producer:
        producer = Producer(transport or cluster.transport, {**FAST_CLIENT, **(config or {})})
        producers.append(producer)
        return producer

    yield make
    for producer in producers:
        producer.close()


@pytest.fixture
def make_consumer(cluster: EmbeddedCluster) -> Iterator[Callable[..., Consumer]]:
    consumers: list[Consumer] = []

    def make(config: dict[str, Any] | None = None, transport: Any = None) -> Consumer:
        consumer = Consumer(transport or cluster.transport, {**FAST_CLIENT, **(config or {})})
        consumers.append(consumer)
        return consumer

    yield make
    for consumer in consumers:
        consumer.close()


def create_topic(admin: Admin, name: str, partitions: int = 3, **kwargs: Any) -> None:
    admin.create_topics([NewTopic(name, partitions, kwargs.pop("replication_factor", 3), **kwargs)])


def partitions_of(topic: str, count: int) -> list[TopicPartition]:
    return [TopicPartition(topic, i) for i in range(count)]


def consume(consumer: Consumer, count: int, *, max_polls: int = 200) -> list[ConsumerRecord]:
    """Polls until ``count`` records arrived (or ``max_polls`` polls came back short)."""
    records: list[ConsumerRecord] = []
    for _ in range(max_polls):
        if len(records) >= count:
            break
        records.extend(consumer.poll(timeout_ms=100))
    return records


def by_position(records: Iterable[ConsumerRecord]) -> dict[tuple[int, int], ConsumerRecord]:
    return {(r.partition, r.offset): r for r in records}
