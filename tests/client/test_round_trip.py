"""Produce and consume through the clients for every codec, with keys, headers and nulls."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tierlog.client import Admin, Consumer, Producer
from tierlog.client.partitioner import partition_for_key
from tierlog.cluster import EmbeddedCluster
from tierlog.records import Compression, TimestampType, iter_batches
from tierlog.server import protocol as p

from .conftest import by_position, consume, create_topic, partitions_of

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


Headers = tuple[tuple[str, bytes | None], ...]
Sent = tuple[bytes | None, bytes | None, Headers]


def _records(n: int) -> list[Sent]:
    out: list[Sent] = []
    for i in range(n):
        key = None if i % 4 == 0 else f"key-{i % 7}".encode()
        value = None if i % 5 == 0 else (f"value-{i}-" * (i % 9 + 1)).encode()
        headers: Headers = () if i % 3 else (("trace", f"{i}".encode()), ("empty", None))
        out.append((key, value, headers))
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(
    codec: str,
    cluster: EmbeddedCluster,
    admin: Admin,
    make_producer: Callable[..., Producer],
    make_consumer: Callable[..., Consumer],
) -> None:
    topic = f"round-trip-{codec}"
    create_topic(admin, topic, 3)
    producer = make_producer({"compression.type": codec, "linger.ms": 20})
    sent = _records(120)
    futures = [
        producer.send(topic, value, key=key, headers=headers, timestamp=1_700_000_000_000 + i)
        for i, (key, value, headers) in enumerate(sent)
    ]
    producer.flush()
    metas = [f.result() for f in futures]

    for (key, _, _), meta in zip(sent, metas, strict=True):
        if key is not None:
            assert meta.partition == partition_for_key(key, 3)
    per_partition: dict[int, list[int]] = {}
    for meta in metas:
        per_partition.setdefault(meta.partition, []).append(meta.offset)
    for offsets in per_partition.values():
        assert offsets == list(range(len(offsets)))

    consumer = make_consumer({"auto.offset.reset": "earliest"})
    consumer.assign(partitions_of(topic, 3))
    received = by_position(consume(consumer, len(sent)))
    assert len(received) == len(sent)
    for i, ((key, value, headers), meta) in enumerate(zip(sent, metas, strict=True)):
        record = received[(meta.partition, meta.offset)]
        assert (record.topic, record.key, record.value) == (topic, key, value)
        assert record.headers == headers
        assert record.timestamp == meta.timestamp == 1_700_000_000_000 + i
        assert record.timestamp_type is TimestampType.CREATE_TIME
        assert record.leader_epoch is not None and record.leader_epoch >= 0

    # The batches on the broker really are compressed with the codec asked for.
    leader = admin.describe_topics([topic])[topic].partitions[0].leader
    response = cluster.transport.send(
        leader,
        p.FetchRequest([p.FetchTopic(topic, [p.FetchPartition(0, 0, 1 << 20)])], max_wait_ms=0),
    )
    data = response.responses[0].partitions[0].records
    codecs = {batch.compression for batch in iter_batches(data)}
    assert codecs == {Compression.from_name(codec)}


def test_explicit_partition_and_keyless_records_spread(
    admin: Admin,
    make_producer: Callable[..., Producer],
    make_consumer: Callable[..., Consumer],
) -> None:
    create_topic(admin, "placed", 3)
    producer = make_producer({"batch.size": 200, "linger.ms": 0})
    pinned = [producer.send("placed", b"pinned", partition=2) for _ in range(5)]
    loose = [producer.send("placed", b"x" * 50) for _ in range(60)]
    producer.flush()
    assert {f.result().partition for f in pinned} == {2}
    assert len({f.result().partition for f in loose}) > 1
    with pytest.raises(ValueError, match="not in the range"):
        producer.send("placed", b"v", partition=3)

    consumer = make_consumer({"auto.offset.reset": "earliest"})
    consumer.assign(partitions_of("placed", 3))
    assert len(consume(consumer, 65)) == 65


def test_acks_one_and_zero_deliver(
    admin: Admin,
    make_producer: Callable[..., Producer],
    make_consumer: Callable[..., Consumer],
) -> None:
    create_topic(admin, "acks", 1)
    leader_acked = make_producer({"acks": "1"}).send("acks", b"one").result()
    fire_and_forget = make_producer({"acks": "0"})
    unacked = fire_and_forget.send("acks", b"zero").result()
    fire_and_forget.flush()
    assert leader_acked.offset == 0
    assert unacked.offset == -1
    consumer = make_consumer({"auto.offset.reset": "earliest"})
    consumer.assign(partitions_of("acks", 1))
    assert [r.value for r in consume(consumer, 2)] == [b"one", b"zero"]
