"""The builder refuses what Kafka's MemoryRecordsBuilder refuses, and accepts any bytes-like."""

from __future__ import annotations

import array
from typing import Any

import pytest
from tierlog.records import HEADER_SIZE, Compression, RecordBatchBuilder, iter_batches


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"is_transactional": True}, "transactional batch needs a producer id"),
        ({"producer_id": 5}, "needs a producer epoch"),
        ({"producer_id": 5, "producer_epoch": 0}, "needs a base sequence"),
        ({"base_offset": -1}, "base_offset -1"),
        ({"producer_epoch": 1 << 15}, "producer_epoch"),
        ({"partition_leader_epoch": 1 << 31}, "partition_leader_epoch"),
        ({"delete_horizon_ms": -5}, "delete_horizon_ms"),
    ],
)
def test_invalid_producer_state_is_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RecordBatchBuilder(**kwargs)


def test_control_batches_need_no_sequence() -> None:
    RecordBatchBuilder(producer_id=5, producer_epoch=0, is_control=True, is_transactional=True)


def test_unknown_codec_is_refused() -> None:
    with pytest.raises(ValueError):
        RecordBatchBuilder(7)  # type: ignore[arg-type]


@pytest.mark.parametrize("timestamp", [-2, 1 << 63])
def test_out_of_range_timestamps_are_refused(timestamp: int) -> None:
    with pytest.raises(ValueError, match="invalid timestamp"):
        RecordBatchBuilder().append(timestamp, None, b"v")


def test_non_int_timestamps_are_refused() -> None:
    with pytest.raises(TypeError, match="timestamp must be an int"):
        RecordBatchBuilder().append(1.5, None, b"v")  # type: ignore[arg-type]


def test_no_timestamp_is_allowed() -> None:
    builder = RecordBatchBuilder()
    builder.append(-1, None, b"v")
    (batch,) = iter_batches(builder.build())
    assert batch.max_timestamp == -1
    assert [r.timestamp for r in batch.records()] == [-1]


def test_offsets_must_increase() -> None:
    builder = RecordBatchBuilder(base_offset=10)
    builder.append(1, None, b"a", offset=12)
    with pytest.raises(ValueError, match="does not follow the last offset 12"):
        builder.append(1, None, b"b", offset=12)
    with pytest.raises(ValueError, match="does not follow"):
        builder.append(1, None, b"b", offset=9)
    with pytest.raises(ValueError, match="too far"):
        builder.append(1, None, b"b", offset=10 + (1 << 31))


@pytest.mark.parametrize(
    ("key", "value", "headers"),
    [
        ("text", b"v", ()),
        (None, 42, ()),
        (None, b"v", [(b"bytes-key", b"v")]),
        (None, b"v", [("k", "text")]),
    ],
)
def test_wrong_types_are_refused_and_leave_the_builder_intact(
    key: Any, value: Any, headers: Any
) -> None:
    builder = RecordBatchBuilder()
    builder.append(1, b"first", b"record")
    size = builder.uncompressed_size
    with pytest.raises(TypeError):
        builder.append(2, key, value, headers)
    assert builder.uncompressed_size == size
    assert len(builder) == 1
    (batch,) = iter_batches(builder.build())
    assert [(r.key, r.value) for r in batch.records()] == [(b"first", b"record")]


def test_bytes_like_inputs() -> None:
    builder = RecordBatchBuilder(Compression.GZIP)
    words = array.array("I", [1, 2])
    builder.append(1, bytearray(b"k"), memoryview(b"value")[1:], [("h", memoryview(words))])
    (batch,) = iter_batches(builder.build())
    (record,) = batch.records()
    assert record.key == b"k"
    assert record.value == b"alue"
    assert record.headers == (("h", words.tobytes()),)


def test_headers_may_be_any_iterable() -> None:
    builder = RecordBatchBuilder()
    builder.append(1, None, None, (pair for pair in [("a", b"1"), ("b", None)]))
    (batch,) = iter_batches(builder.build())
    assert next(batch.records()).headers == (("a", b"1"), ("b", None))


def test_empty_batch_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        RecordBatchBuilder().build()


def test_sizes_and_repeatable_build() -> None:
    builder = RecordBatchBuilder()
    assert builder.uncompressed_size == HEADER_SIZE
    builder.append(1, b"k", b"v")
    # length, attributes, timestamp delta, offset delta, key length, key, value length, value,
    # header count: nine bytes.
    assert builder.uncompressed_size == HEADER_SIZE + 9
    assert builder.build() == builder.build()
    assert len(builder.build()) == HEADER_SIZE + 9


def test_compression_level_is_passed_to_the_codec() -> None:
    values = [bytes(range(200)) * 20 + b"%d" % i for i in range(50)]
    sizes = {}
    for level in (1, 19):
        builder = RecordBatchBuilder(Compression.ZSTD, compression_level=level)
        for value in values:
            builder.append(1, None, value)
        sizes[level] = len(builder.build())
    assert sizes[19] < sizes[1]


def test_timestamp_delta_wraps_like_a_java_long() -> None:
    builder = RecordBatchBuilder()
    builder.append(-1, None, b"a")
    builder.append((1 << 63) - 1, None, b"b")
    data = builder.build()
    # The second record's delta, 2**63, is written as Java writes it: wrapped to -2**63, whose
    # zig-zag varint is nine 0xff bytes and 0x01.
    assert bytes.fromhex("ffffffffffffffffff01") in data
    (batch,) = iter_batches(data)
    assert [r.timestamp for r in batch.records()] == [-1, (1 << 63) - 1]
