"""Checks against values worked out by hand, not by the code under test."""

from __future__ import annotations

import pytest
from tierlog.records import (
    BatchHeader,
    Compression,
    Record,
    RecordBatchBuilder,
    TimestampType,
    crc32c,
    iter_batches,
)

# One record (key null, value b"hi") at offset 5, leader epoch 3, timestamp 1000.
MINIMAL = bytes.fromhex(
    "0000000000000005"  # baseOffset 5
    "0000003a"  # batchLength 58 = 49 header bytes after this field + 9 record bytes
    "00000003"  # partitionLeaderEpoch 3
    "02"  # magic
    "233dad44"  # CRC-32C of everything below
    "0000"  # attributes: no compression, CreateTime, not transactional, not control
    "00000000"  # lastOffsetDelta 0
    "00000000000003e8"  # baseTimestamp 1000
    "00000000000003e8"  # maxTimestamp 1000
    "ffffffffffffffff"  # producerId -1
    "ffff"  # producerEpoch -1
    "ffffffff"  # baseSequence -1
    "00000001"  # recordsCount 1
    # record: length 8 (zig-zag 0x10), attributes, timestamp delta 0, offset delta 0,
    # key length -1 (null), value length 2, "hi", header count 0
    "10"
    "00"
    "00"
    "00"
    "01"
    "04"
    "6869"
    "00"
)

# Two records of a transactional producer (id 7, epoch 1, base sequence 10) at offset 100.
TWO_RECORDS = bytes.fromhex(
    "0000000000000064"  # baseOffset 100
    "00000047"  # batchLength 71 = 49 + 22 record bytes
    "00000000"  # partitionLeaderEpoch 0
    "02"  # magic
    "ec7ccf12"  # CRC-32C
    "0010"  # attributes: transactional
    "00000001"  # lastOffsetDelta 1
    "00000000000003e8"  # baseTimestamp 1000
    "00000000000003ed"  # maxTimestamp 1005
    "0000000000000007"  # producerId 7
    "0001"  # producerEpoch 1
    "0000000a"  # baseSequence 10
    "00000002"  # recordsCount 2
    # record 0: length 11, attrs, ts delta 0, offset delta 0, key "k", value null,
    # 1 header: key "a", value "b"
    "16"
    "00"
    "00"
    "00"
    "02"
    "6b"
    "01"
    "02"
    "02"
    "61"
    "02"
    "62"
    # record 1: length 9, attrs, ts delta 5, offset delta 1, key null, value "xyz", no headers
    "12"
    "00"
    "0a"
    "02"
    "01"
    "06"
    "78797a"
    "00"
)


def test_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"6789", crc32c(b"12345")) == 0xE3069283


def test_minimal_batch_header_field_by_field() -> None:
    header = BatchHeader.parse(MINIMAL)
    header.validate()
    assert header.base_offset == 5
    assert header.batch_length == 58
    assert header.size_in_bytes == len(MINIMAL) == 70
    assert header.partition_leader_epoch == 3
    assert header.magic == 2
    assert header.crc == 0x233DAD44 == header.compute_crc()
    assert header.attributes == 0
    assert header.compression is Compression.NONE
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert not header.is_transactional
    assert not header.is_control
    assert header.delete_horizon_ms is None
    assert header.last_offset_delta == 0
    assert header.last_offset == 5
    assert header.next_offset == 6
    assert header.base_timestamp == header.max_timestamp == 1000
    assert header.producer_id == -1
    assert not header.has_producer_id
    assert header.producer_epoch == -1
    assert header.base_sequence == header.last_sequence == -1
    assert header.records_count == 1
    assert bytes(header.payload) == bytes.fromhex("10000000010468 6900".replace(" ", ""))


def test_minimal_batch_records() -> None:
    (batch,) = iter_batches(MINIMAL)
    assert list(batch.records()) == [Record(5, 1000, None, b"hi", (), -1)]


def test_two_record_batch() -> None:
    (batch,) = iter_batches(TWO_RECORDS)
    assert batch.is_transactional
    assert batch.last_sequence == 11
    assert list(batch) == [
        Record(100, 1000, b"k", None, (("a", b"b"),), 10),
        Record(101, 1005, None, b"xyz", (), 11),
    ]


def test_builder_writes_the_hand_assembled_bytes() -> None:
    minimal = RecordBatchBuilder(base_offset=5, partition_leader_epoch=3)
    minimal.append(1000, None, b"hi")
    assert minimal.build() == MINIMAL

    two = RecordBatchBuilder(
        base_offset=100,
        partition_leader_epoch=0,
        producer_id=7,
        producer_epoch=1,
        base_sequence=10,
        is_transactional=True,
    )
    assert two.append(1000, b"k", None, [("a", b"b")]) == 100
    assert two.append(1005, None, bytearray(b"xyz")) == 101
    assert two.build() == TWO_RECORDS


@pytest.mark.parametrize("codec", list(Compression))
def test_every_codec_reads_back_the_same_records(codec: Compression) -> None:
    builder = RecordBatchBuilder(codec, base_offset=5, partition_leader_epoch=3)
    builder.append(1000, None, b"hi")
    (batch,) = iter_batches(builder.build())
    assert batch.compression is codec
    assert list(batch) == [Record(5, 1000, None, b"hi", (), -1)]
