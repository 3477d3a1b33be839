"""Retries after a lost answer or a failed first attempt never write a record twice."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future

from tierlog.client import Admin, Consumer, Producer, RecordMetadata
from tierlog.cluster import EmbeddedCluster
from tierlog.errors import (
    BrokerNotAvailableError,
    InvalidRequestError,
    InvalidRequiredAcksError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
)
from tierlog.server import protocol as p
from tierlog.server.transport import Transport

from .conftest import consume, create_topic, partitions_of


class LosingAnswers(Transport):
    """Delivers every request, then loses the answer of the first ``times`` produce requests.

    The broker has appended by then: exactly what a client sees when a network drops the answer.
    """

    def __init__(self, inner: Transport, times: int) -> None:
        super().__init__()
        self._inner = inner
        self.left = times

    def node_ids(self) -> tuple[int, ...]:
        return self._inner.node_ids()

    def _deliver(self, broker_id: int, request: p.Request) -> p.Response:
        response = self._inner.send(broker_id, request)
        if isinstance(request, p.ProduceRequest) and self.left > 0:
            self.left -= 1
            raise RequestTimedOutError(f"the answer to a produce on broker {broker_id} was lost")
        assert isinstance(
            response,
            p.ProduceResponse
            | p.FetchResponse
            | p.MetadataResponse
            | p.ListOffsetsResponse
            | p.InitProducerIdResponse,
        )
        return response


def _send_all(producer: Producer, topic: str, n: int) -> list[RecordMetadata]:
    futures: list[Future[RecordMetadata]] = [
        producer.send(topic, f"value-{i}".encode(), key=f"k{i % 5}".encode()) for i in range(n)
    ]
    producer.flush()
    return [f.result() for f in futures]


def _values(consumer: Consumer, topic: str, partitions: int, at_least: int) -> Counter[bytes]:
    consumer.assign(partitions_of(topic, partitions))
    records = consume(consumer, at_least)
    # One more poll shows nothing beyond what was expected arrived late.
    records += consumer.poll(timeout_ms=200)
    return Counter(r.value for r in records if r.value is not None)


def test_lost_answers_are_retried_without_duplicates(
    cluster: EmbeddedCluster,
    admin: Admin,
    make_producer: Callable[..., Producer],
    make_consumer: Callable[..., Consumer],
) -> None:
    create_topic(admin, "lossy", 3)
    transport = LosingAnswers(cluster.transport, times=4)
    producer = make_producer({"linger.ms": 10}, transport=transport)
    metas = _send_all(producer, "lossy", 60)
    assert transport.left == 0

    counts = _values(make_consumer({"auto.offset.reset": "earliest"}), "lossy", 3, 60)
    assert counts == Counter(f"value-{i}".encode() for i in range(60))
    # The retried batches were answered with the offsets of their first, appended attempt.
    assert len({(m.partition, m.offset) for m in metas}) == 60
    for partition in range(3):
        offsets = sorted(m.offset for m in metas if m.partition == partition)
        assert offsets == list(range(len(offsets)))


def test_without_idempotence_a_lost_answer_duplicates(
    cluster: EmbeddedCluster,
    admin: Admin,
    make_producer: Callable[..., Producer],
    make_consumer: Callable[..., Consumer],
) -> None:
    """The contrast that shows the test above can fail: the same loss, no producer id."""
    create_topic(admin, "dupes", 1)
    transport = LosingAnswers(cluster.transport, times=1)
    producer = make_producer({"enable.idempotence": False}, transport=transport)
    producer.send("dupes", b"once").result()
    counts = _values(make_consumer({"auto.offset.reset": "earliest"}), "dupes", 1, 2)
    assert counts[b"once"] == 2


def test_a_failed_first_attempt_is_retried_once_delivered(
    cluster: EmbeddedCluster,
    admin: Admin,
    make_producer: Callable[..., Producer],
    make_consumer: Callable[..., Consumer],
) -> None:
    create_topic(admin, "flaky", 3)
    fault = cluster.transport.faults.add(
        lambda _broker, request: isinstance(request, p.ProduceRequest),
        error=NotLeaderOrFollowerError,
        times=3,
    )
    metas = _send_all(make_producer(), "flaky", 30)
    assert fault.hits == 3
    assert len({(m.partition, m.offset) for m in metas}) == 30
    counts = _values(make_consumer({"auto.offset.reset": "earliest"}), "flaky", 3, 30)
    assert counts == Counter(f"value-{i}".encode() for i in range(30))


def test_a_non_retriable_error_fails_the_futures_with_its_class(
    cluster: EmbeddedCluster,
    admin: Admin,
    make_producer: Callable[..., Producer],
    make_consumer: Callable[..., Consumer],
) -> None:
    create_topic(admin, "refused", 1)
    producer = make_producer()
    assert producer.send("refused", b"first").result().offset == 0
    assert 0 <= producer.producer_id < 1 << 63
    assert producer.producer_epoch == 0
    fault = cluster.transport.faults.add(
        lambda _broker, request: isinstance(request, p.ProduceRequest),
        error=InvalidRequiredAcksError,
        times=1,
    )
    failed = producer.send("refused", b"lost")
    assert isinstance(failed.exception(), InvalidRequiredAcksError)
    assert fault.hits == 1
    # The failed batch took a sequence number the broker never saw; a new epoch restarts the
    # sequences so the next batch is not refused as out of order.
    assert producer.producer_epoch == 1
    assert producer.send("refused", b"kept").result().offset == 1
    counts = _values(make_consumer({"auto.offset.reset": "earliest"}), "refused", 1, 2)
    assert counts == Counter({b"first": 1, b"kept": 1})


def test_producers_get_distinct_ids_from_the_brokers(
    cluster: EmbeddedCluster, admin: Admin, make_producer: Callable[..., Producer]
) -> None:
    create_topic(admin, "ids", 1)
    producers = [make_producer() for _ in range(4)]
    assert all(producer.producer_id == -1 for producer in producers)

    for producer in producers:
        producer.send("ids", b"v").result()

    ids = [producer.producer_id for producer in producers]
    assert len(set(ids)) == 4 and min(ids) >= 0
    assert all(producer.producer_epoch == 0 for producer in producers)


def test_a_retriable_init_producer_id_failure_is_retried(
    cluster: EmbeddedCluster, admin: Admin, make_producer: Callable[..., Producer]
) -> None:
    create_topic(admin, "retried", 1)
    fault = cluster.transport.faults.add(
        lambda _broker, request: isinstance(request, p.InitProducerIdRequest),
        error=BrokerNotAvailableError,
        times=3,
    )
    producer = make_producer()

    assert producer.send("retried", b"v").result().offset == 0
    assert fault.hits == 3
    assert producer.producer_id >= 0


def test_a_refused_init_producer_id_fails_the_records(
    cluster: EmbeddedCluster, admin: Admin, make_producer: Callable[..., Producer]
) -> None:
    create_topic(admin, "refused-id", 1)
    cluster.transport.faults.add(
        lambda _broker, request: isinstance(request, p.InitProducerIdRequest),
        error=InvalidRequestError,
        times=1,
    )
    producer = make_producer()

    assert isinstance(producer.send("refused-id", b"lost").exception(), InvalidRequestError)
    assert producer.send("refused-id", b"kept").result().offset == 0
