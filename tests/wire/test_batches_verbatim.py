"""A producer's record batch is stored and served byte for byte: only its base offset and
partition leader epoch are the broker's to set, and neither is covered by the CRC."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kafka.record import MemoryRecordsBuilder
from tierlog.client import Admin, NewTopic
from tierlog.cluster import EmbeddedCluster

from .raw import RawClient, fetch_request, produce_request

#: Bytes 0-7 (base offset) and 12-15 (partition leader epoch) of a v2 batch header.
BROKER_FIELDS = (slice(0, 8), slice(12, 16))


def _batch(compression: int) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=compression, batch_size=1 << 20)
    for n in range(20):
        builder.append(
            timestamp=1_700_000_000_000 + n,
            key=b"key-%d" % n,
            value=b"value %d " % n * 10,
            headers=[("h", b"%d" % n)],
        )
    builder.close()
    return bytes(builder.buffer())


def _masked(batch: bytes) -> bytes:
    data = bytearray(batch)
    for field in BROKER_FIELDS:
        data[field] = bytes(field.stop - field.start)
    return bytes(data)


@pytest.mark.parametrize(
    "compression", [0, 1, 2, 3, 4], ids=["none", "gzip", "snappy", "lz4", "zstd"]
)
def test_a_batch_comes_back_as_it_was_sent(
    make_listening: Callable[..., EmbeddedCluster], compression: int
) -> None:
    cluster = make_listening()
    Admin(cluster.transport).create_topics([NewTopic("t", 1, 1)])
    first, second = _batch(compression), _batch(compression)
    with RawClient.to(cluster) as raw:
        for batch in (first, second):
            (answer,) = raw.call(produce_request("t", batch), 9).responses[0].partition_responses
            assert answer.error_code == 0
        fetch = fetch_request("t", 0)
        records = bytes(raw.call(fetch, 12).responses[0].partitions[0].records)
    assert records == records[: len(first) + len(second)]
    served_first, served_second = records[: len(first)], records[len(first) :]
    assert _masked(served_first) == _masked(first)
    assert _masked(served_second) == _masked(second)
    assert int.from_bytes(served_first[0:8], "big") == 0
    assert int.from_bytes(served_second[0:8], "big") == 20  # offsets the broker assigned
