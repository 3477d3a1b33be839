"""One partition failing never stops the others: per-partition errors and backoff."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tierlog.client import Admin, Consumer, NewTopic, Producer
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import (
    RemoteStorageNotReadyError,
    ReplicaNotAvailableError,
    UnknownTopicOrPartitionError,
)
from tierlog.model import TopicPartition
from tierlog.server import protocol as p
from tierlog.server.transport import Transport

from .conftest import consume

KEPT = TopicPartition("kept", 0)
GONE = TopicPartition("gone", 0)


class Recording(Transport):
    """Passes every request through and keeps the fetch responses, to look at them after."""

    def __init__(self, inner: Transport) -> None:
        super().__init__()
        self._inner = inner
        self.fetches: list[p.FetchResponse] = []

    def node_ids(self) -> tuple[int, ...]:
        return self._inner.node_ids()

    def _deliver(self, broker_id: int, request: p.Request) -> p.Response:
        response: p.Response = self._inner.send(broker_id, request)
        if isinstance(response, p.FetchResponse):
            self.fetches.append(response)
        return response


def test_deleted_topic_fails_alone_in_a_shared_fetch(
    cluster: EmbeddedCluster,
    admin: Admin,
    make_producer: Callable[..., Producer],
    make_consumer: Callable[..., Consumer],
) -> None:
    # Both partitions led by broker 0, so one fetch request carries both.
    admin.create_topics(
        [
            NewTopic(KEPT.topic, replica_assignment={0: (0, 1, 2)}),
            NewTopic(GONE.topic, replica_assignment={0: (0, 1, 2)}),
        ]
    )
    producer = make_producer()
    for i in range(5):
        producer.send(KEPT.topic, f"kept-{i}".encode())
        producer.send(GONE.topic, f"gone-{i}".encode())
    producer.flush()

    recording = Recording(cluster.transport)
    consumer = make_consumer({"auto.offset.reset": "earliest"}, transport=recording)
    consumer.assign([KEPT, GONE])
    assert len(consume(consumer, 10)) == 10

    admin.delete_topics([GONE.topic])
    for i in range(5, 10):
        producer.send(KEPT.topic, f"kept-{i}".encode())
    producer.flush()
    later = consume(consumer, 5)
    assert [r.value for r in later] == [f"kept-{i}".encode() for i in range(5, 10)]

    # The consumer's metadata still named the deleted topic's leader, so a fetch asked for
    # both partitions: the deleted one got its own error while the other still had records.
    mixed = [
        {(t.topic, part.partition_index): part for t in f.responses for part in t.partitions}
        for f in recording.fetches
    ]
    assert any(
        (GONE.topic, 0) in parts
        and parts[(GONE.topic, 0)].error_code != p.NONE
        and (KEPT.topic, 0) in parts
        and parts[(KEPT.topic, 0)].error_code == p.NONE
        for parts in mixed
    )


def test_an_unavailable_broker_backs_off_while_others_deliver(
    cluster: EmbeddedCluster,
    admin: Admin,
    make_producer: Callable[..., Producer],
    make_consumer: Callable[..., Consumer],
) -> None:
    admin.create_topics([NewTopic("spread", replica_assignment={0: (0, 1, 2), 1: (1, 2, 0)})])
    producer = make_producer()
    for i in range(6):
        producer.send("spread", f"{i}".encode(), partition=i % 2)
    producer.flush()
    fault = cluster.transport.faults.add(
        lambda broker, request: broker == 0 and isinstance(request, p.FetchRequest),
        error=ReplicaNotAvailableError,
        times=5,
    )
    consumer = make_consumer({"auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("spread", 0), TopicPartition("spread", 1)])
    first = consumer.poll(timeout_ms=2000)
    assert {r.partition for r in first} == {1}
    rest = consume(consumer, 6 - len(first))
    assert sorted((r.partition, r.offset) for r in first + rest) == [
        (0, 0),
        (0, 1),
        (0, 2),
        (1, 0),
        (1, 1),
        (1, 2),
    ]
    assert fault.hits == 5


def test_remote_storage_not_ready_is_retried_with_backoff(
    cluster: EmbeddedCluster,
    admin: Admin,
    make_producer: Callable[..., Producer],
    make_consumer: Callable[..., Consumer],
) -> None:
    """KIP-1007: list-offsets answers not-ready until remote metadata is rebuilt."""
    admin.create_topics([NewTopic("tiered", 2, 3)])
    producer = make_producer()
    for i in range(4):
        producer.send("tiered", f"{i}".encode(), partition=i % 2)
    producer.flush()
    fault = cluster.transport.faults.add(
        lambda _broker, request: isinstance(request, p.ListOffsetsRequest),
        error=RemoteStorageNotReadyError,
        times=4,
    )
    consumer = make_consumer({"auto.offset.reset": "earliest"})
    consumer.assign(consumer.partitions_for("tiered"))
    assert len(consume(consumer, 4)) == 4
    assert fault.hits == 4


def test_partitions_for_an_unknown_topic_raises(
    admin: Admin, make_consumer: Callable[..., Consumer], make_producer: Callable[..., Producer]
) -> None:
    admin.create_topics([NewTopic("known", 2, 1)])
    consumer = make_consumer()
    assert consumer.partitions_for("known") == [
        TopicPartition("known", 0),
        TopicPartition("known", 1),
    ]
    assert [pi.partition for pi in make_producer().partitions_for("known")] == [0, 1]
    with pytest.raises(UnknownTopicOrPartitionError, match="'unknown'"):
        consumer.partitions_for("unknown")
