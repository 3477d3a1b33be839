"""Delivery timeouts, closing with records still queued, and leader changes under load."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
from tierlog.client import (
    Admin,
    ClientClosedError,
    Consumer,
    DeliveryTimeoutError,
    NewTopic,
    Producer,
)
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import NotEnoughReplicasError
from tierlog.server import protocol as p

from .conftest import consume, partitions_of


def _refuse_produce(cluster: EmbeddedCluster) -> None:
    cluster.transport.faults.add(
        lambda _broker, request: isinstance(request, p.ProduceRequest),
        error=NotEnoughReplicasError,
    )


def test_retriable_errors_stop_at_the_delivery_timeout(
    cluster: EmbeddedCluster, admin: Admin, make_producer: Callable[..., Producer]
) -> None:
    admin.create_topics([NewTopic("stuck", 1, 3)])
    _refuse_produce(cluster)
    producer = make_producer(
        {"delivery.timeout.ms": 300, "request.timeout.ms": 200, "linger.ms": 0}
    )
    future = producer.send("stuck", b"v")
    with pytest.raises(DeliveryTimeoutError, match="stuck-0") as caught:
        future.result()
    assert isinstance(caught.value.__cause__, NotEnoughReplicasError)


def test_retries_limit_the_attempts(
    cluster: EmbeddedCluster, admin: Admin, make_producer: Callable[..., Producer]
) -> None:
    admin.create_topics([NewTopic("limited", 1, 3)])
    _refuse_produce(cluster)
    producer = make_producer({"retries": 2})
    with pytest.raises(NotEnoughReplicasError):
        producer.send("limited", b"v").result()


def test_close_with_a_timeout_fails_what_could_not_be_delivered(
    cluster: EmbeddedCluster, admin: Admin
) -> None:
    admin.create_topics([NewTopic("closing", 1, 3)])
    _refuse_produce(cluster)
    producer = Producer(cluster.transport, {"retry.backoff.ms": 10, "retry.backoff.max.ms": 20})
    futures = [producer.send("closing", b"v") for _ in range(3)]
    producer.close(timeout=0.2)
    for future in futures:
        assert isinstance(future.exception(), ClientClosedError)
    with pytest.raises(ClientClosedError):
        producer.send("closing", b"late")
    producer.close()  # a second close does nothing


def test_close_delivers_everything_queued(
    admin: Admin, make_consumer: Callable[..., Consumer], cluster: EmbeddedCluster
) -> None:
    admin.create_topics([NewTopic("drained", 2, 3)])
    producer = Producer(cluster.transport, {"linger.ms": 60000})
    futures = [producer.send("drained", f"{i}".encode()) for i in range(50)]
    producer.close()
    assert all(f.done() and f.exception() is None for f in futures)
    consumer = make_consumer({"auto.offset.reset": "earliest"})
    consumer.assign(partitions_of("drained", 2))
    assert len(consume(consumer, 50)) == 50


def test_leader_restart_while_producing_loses_and_duplicates_nothing(
    cluster: EmbeddedCluster,
    admin: Admin,
    make_producer: Callable[..., Producer],
    make_consumer: Callable[..., Consumer],
) -> None:
    admin.create_topics([NewTopic("moving", replica_assignment={0: (1, 2, 0)})])
    producer = make_producer({"linger.ms": 1, "delivery.timeout.ms": 60000})
    first = [producer.send("moving", f"v{i}".encode()) for i in range(20)]
    producer.flush()
    assert {f.result().offset for f in first} == set(range(20))
    cluster.restart_broker(1)
    # The producer's cached metadata and sequence numbers outlive the broker's restart: the
    # broker rebuilt the producer's state from its log and takes the next sequence in order.
    second = [producer.send("moving", f"v{i}".encode()) for i in range(20, 40)]
    producer.flush()
    assert {f.result().offset for f in second} == set(range(20, 40))

    consumer = make_consumer({"auto.offset.reset": "earliest"})
    consumer.assign(partitions_of("moving", 1))
    records = consume(consumer, 40)
    assert Counter(r.value for r in records) == Counter(f"v{i}".encode() for i in range(40))
