"""read_committed against a broker's real transactional data, markers and last stable offset.

The cluster has no transaction coordinator yet, so the test plays its part: transactional
batches go in through an ordinary ProduceRequest, and the COMMIT and ABORT markers through the
partition's coordinator append, exactly where a coordinator would write them.
"""

from __future__ import annotations

from collections.abc import Callable

from tierlog.client import Admin, Consumer, NewTopic, Producer
from tierlog.cluster import EmbeddedCluster
from tierlog.log import AppendOrigin
from tierlog.model import TopicPartition
from tierlog.records import ControlType, RecordBatchBuilder, build_control_batch
from tierlog.server import protocol as p

from .conftest import consume

TP = TopicPartition("txn", 0)
ABORTED, COMMITTED = 1000, 2000


def _produce_transactional(
    cluster: EmbeddedCluster, producer_id: int, sequence: int, *values: bytes
) -> None:
    builder = RecordBatchBuilder(
        producer_id=producer_id, producer_epoch=0, base_sequence=sequence, is_transactional=True
    )
    for value in values:
        builder.append(1_700_000_000_000, None, value)
    request = p.ProduceRequest(
        acks=-1,
        timeout_ms=5000,
        topic_data=[p.TopicProduceData(TP.topic, [p.PartitionProduceData(0, builder.build())])],
        transactional_id=f"txn-{producer_id}",
    )
    answer = cluster.transport.send(0, request).responses[0].partition_responses[0]
    assert answer.error_code == p.NONE, answer


def _end_transaction(cluster: EmbeddedCluster, producer_id: int, control: ControlType) -> None:
    marker = build_control_batch(
        control, producer_id=producer_id, producer_epoch=0, timestamp=1_700_000_000_000
    )
    partition = cluster.broker(0).partition(TP)
    assert partition is not None
    partition.append_records_to_leader(marker, AppendOrigin.COORDINATOR)


def _values(consumer: Consumer, count: int) -> list[bytes | None]:
    return [r.value for r in consume(consumer, count)]


def test_read_committed_skips_aborted_and_stops_at_the_open_transaction(
    cluster: EmbeddedCluster,
    admin: Admin,
    make_producer: Callable[..., Producer],
    make_consumer: Callable[..., Consumer],
) -> None:
    admin.create_topics([NewTopic(TP.topic, replica_assignment={0: (0,)})])
    producer = make_producer()
    _produce_transactional(cluster, ABORTED, 0, b"a0", b"a1")  # offsets 0-1
    producer.send(TP.topic, b"p2").result()  # 2
    _produce_transactional(cluster, COMMITTED, 0, b"c3")  # 3
    _end_transaction(cluster, ABORTED, ControlType.ABORT)  # 4
    _end_transaction(cluster, COMMITTED, ControlType.COMMIT)  # 5
    _produce_transactional(cluster, ABORTED, 2, b"open")  # 6, left open
    producer.send(TP.topic, b"p7").result()  # 7

    committed = make_consumer(
        {"auto.offset.reset": "earliest", "isolation.level": "read_committed"}
    )
    committed.assign([TP])
    assert _values(committed, 2) == [b"p2", b"c3"]
    assert committed.poll(timeout_ms=200) == []
    assert committed.position(TP) == 6
    assert committed.end_offsets([TP]) == {TP: 6}

    uncommitted = make_consumer({"auto.offset.reset": "earliest"})
    uncommitted.assign([TP])
    assert _values(uncommitted, 6) == [b"a0", b"a1", b"p2", b"c3", b"open", b"p7"]
    assert uncommitted.end_offsets([TP]) == {TP: 8}

    _end_transaction(cluster, ABORTED, ControlType.COMMIT)  # 8
    assert _values(committed, 2) == [b"open", b"p7"]
    assert committed.position(TP) == 9
