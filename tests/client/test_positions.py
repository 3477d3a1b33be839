"""auto.offset.reset, seek and position with Kafka's meaning."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tierlog.client import Admin, Consumer, NoOffsetForPartitionError, Producer
from tierlog.errors import OffsetOutOfRangeError
from tierlog.model import TopicPartition

from .conftest import consume, create_topic

TP = TopicPartition("positions", 0)


@pytest.fixture
def ten(admin: Admin, make_producer: Callable[..., Producer]) -> Producer:
    """A one-partition topic holding values 0..9, and the producer that wrote them."""
    create_topic(admin, TP.topic, 1)
    producer = make_producer()
    for i in range(10):
        producer.send(TP.topic, str(i).encode())
    producer.flush()
    return producer


def _values(consumer: Consumer, count: int) -> list[bytes | None]:
    return [r.value for r in consume(consumer, count)]


def test_earliest_starts_at_the_log_start(
    ten: Producer, make_consumer: Callable[..., Consumer]
) -> None:
    consumer = make_consumer({"auto.offset.reset": "earliest"})
    consumer.assign([TP])
    assert consumer.position(TP) == 0
    assert _values(consumer, 10) == [str(i).encode() for i in range(10)]
    assert consumer.position(TP) == 10


def test_latest_starts_at_the_end_and_sees_only_new_records(
    ten: Producer, make_consumer: Callable[..., Consumer]
) -> None:
    consumer = make_consumer({"auto.offset.reset": "latest"})
    consumer.assign([TP])
    assert consumer.position(TP) == 10
    assert consumer.poll(timeout_ms=100) == []
    ten.send(TP.topic, b"new").result()
    assert _values(consumer, 1) == [b"new"]


def test_none_refuses_to_guess(ten: Producer, make_consumer: Callable[..., Consumer]) -> None:
    consumer = make_consumer({"auto.offset.reset": "none"})
    consumer.assign([TP])
    with pytest.raises(NoOffsetForPartitionError, match="positions-0"):
        consumer.poll(timeout_ms=100)
    with pytest.raises(NoOffsetForPartitionError):
        consumer.position(TP)
    consumer.seek(TP, 7)
    assert _values(consumer, 3) == [b"7", b"8", b"9"]


@pytest.mark.parametrize(("policy", "expected_position"), [("earliest", 0), ("latest", 10)])
def test_out_of_range_applies_the_reset_policy(
    policy: str, expected_position: int, ten: Producer, make_consumer: Callable[..., Consumer]
) -> None:
    consumer = make_consumer({"auto.offset.reset": policy})
    consumer.assign([TP])
    consumer.seek(TP, 1000)
    records = consumer.poll(timeout_ms=200)
    if policy == "earliest":
        records += consume(consumer, 10 - len(records))
        assert [r.offset for r in records] == list(range(10))
    else:
        assert records == []
        assert consumer.position(TP) == expected_position


def test_out_of_range_with_none_raises(
    ten: Producer, make_consumer: Callable[..., Consumer]
) -> None:
    consumer = make_consumer({"auto.offset.reset": "none"})
    consumer.assign([TP])
    consumer.seek(TP, 1000)
    with pytest.raises(OffsetOutOfRangeError, match="1000"):
        consumer.poll(timeout_ms=200)
    assert consumer.position(TP) == 1000


def test_deleted_records_move_earliest_and_out_of_range_below_the_start(
    ten: Producer, admin: Admin, make_consumer: Callable[..., Consumer]
) -> None:
    assert admin.delete_records({TP: 4}) == {TP: 4}
    consumer = make_consumer({"auto.offset.reset": "earliest"})
    consumer.assign([TP])
    assert consumer.beginning_offsets([TP]) == {TP: 4}
    consumer.seek(TP, 1)
    assert _values(consumer, 6) == [str(i).encode() for i in range(4, 10)]


def test_seek_and_position(ten: Producer, make_consumer: Callable[..., Consumer]) -> None:
    consumer = make_consumer({"max.poll.records": 3})
    consumer.assign([TP])
    consumer.seek(TP, 2)
    assert consumer.position(TP) == 2
    assert [r.offset for r in consumer.poll(timeout_ms=1000)] == [2, 3, 4]
    assert consumer.position(TP) == 5
    consumer.seek_to_beginning([TP])
    assert consumer.position(TP) == 0
    consumer.seek_to_end()
    assert consumer.position(TP) == 10
    assert consumer.end_offsets([TP]) == {TP: 10}
    with pytest.raises(ValueError, match="not assigned"):
        consumer.seek(TopicPartition("positions", 5), 0)
    with pytest.raises(ValueError, match="non-negative"):
        consumer.seek(TP, -1)


def test_assign_keeps_positions_of_partitions_kept(
    ten: Producer, make_consumer: Callable[..., Consumer]
) -> None:
    consumer = make_consumer()
    consumer.assign([TP])
    consumer.seek(TP, 6)
    consumer.assign([TP, TopicPartition("positions", 0)])
    assert consumer.assignment() == {TP}
    assert consumer.position(TP) == 6
