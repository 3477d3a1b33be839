"""The append path's header functions agree exactly with ``BatchHeader.parse`` + ``validate``.

``validate_batch_at`` is a fused fast path; these tests hold it to the same verdict, reason and
position as the header object on valid batches, on every kind of damage, and on random bytes.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tierlog.errors import CorruptRecordError
from tierlog.records import (
    HEADER_SIZE,
    BatchHeader,
    Compression,
    RecordBatch,
    check_batch,
    read_batch_fields,
    stamp_batch,
    validate_batch_at,
)

from .strategies import build
from .test_corruption import GOOD_RECORD, LEAD, forge

SPECS = [(1000 + i, b"k%d" % i, b"v" * i, ()) for i in range(10)]
NO_LIMIT = 1 << 40


def _by_header(buf: bytes, position: int, max_size: int) -> tuple[int, ...] | str:
    """What the append path did before the fused function: parse, size check, validate."""
    try:
        header = BatchHeader.parse(buf, position)
        if header.size_in_bytes <= max_size:
            header.validate()
    except CorruptRecordError as err:
        return f"{err.position}: {err.reason}"
    return header._fields


def _fused(buf: bytes, position: int, max_size: int) -> tuple[int, ...] | str:
    try:
        return validate_batch_at(memoryview(buf), position, max_size)
    except CorruptRecordError as err:
        return f"{err.position}: {err.reason}"


def _split(buf: bytes, position: int) -> tuple[int, ...] | str:
    try:
        fields = read_batch_fields(memoryview(buf), position)
        check_batch(memoryview(buf), position, fields)
    except CorruptRecordError as err:
        return f"{err.position}: {err.reason}"
    return fields


def _damaged() -> list[bytes]:
    """A valid batch behind ``LEAD`` bytes, then one of each kind of damage."""
    bad_crc = bytearray(forge(GOOD_RECORD, 1))
    bad_crc[-2] ^= 0x01
    good = forge(GOOD_RECORD * 3, 3)
    return [
        good,
        forge(GOOD_RECORD, 1, attributes=int(Compression.GZIP)),  # bad data, CRC checks out
        bytes(bad_crc),
        good[:-1],
        good[: LEAD + 30],
        good[: LEAD + 14],
        good[: LEAD + 5],
        good[:LEAD],
        forge(GOOD_RECORD, 1, magic=1),
        forge(GOOD_RECORD, 1, magic=-1),
        forge(GOOD_RECORD, 1, length=48),
        forge(GOOD_RECORD, 1, length=-5),
        forge(GOOD_RECORD, 1, length=(1 << 31) - 1),
        forge(GOOD_RECORD, -1, last_offset_delta=0),
        forge(GOOD_RECORD, (1 << 31) - 1),
        forge(GOOD_RECORD, 1, last_offset_delta=-3),
        forge(GOOD_RECORD, 1, attributes=5),
        forge(GOOD_RECORD, 1, attributes=7),
    ]


@pytest.mark.parametrize("buf", _damaged())
@pytest.mark.parametrize("max_size", [NO_LIMIT, 70, 60])
def test_fused_check_matches_parse_then_validate(buf: bytes, max_size: int) -> None:
    assert _fused(buf, LEAD, max_size) == _by_header(buf, LEAD, max_size)
    assert _split(buf, LEAD) == _by_header(buf, LEAD, NO_LIMIT)


def test_fields_are_the_header_in_order() -> None:
    data = build(SPECS, Compression.NONE, base_offset=7)
    fields = validate_batch_at(memoryview(data), 0, NO_LIMIT)
    header = RecordBatch.parse(data)
    assert fields == (
        header.base_offset,
        header.batch_length,
        header.partition_leader_epoch,
        header.magic,
        header.crc,
        header.attributes,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.records_count,
    )
    assert read_batch_fields(memoryview(data), 0) == fields


def test_an_oversized_batch_is_returned_unchecked_for_the_caller_to_refuse() -> None:
    damaged = bytearray(build(SPECS, Compression.NONE))
    damaged[-1] ^= 0xFF
    fields = validate_batch_at(memoryview(damaged), 0, len(damaged) - 1)
    assert 12 + fields[1] == len(damaged)
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        validate_batch_at(memoryview(damaged), 0, len(damaged))


@settings(max_examples=300, deadline=None)
@given(
    codec=st.sampled_from(list(Compression)),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=3),
    cut=st.integers(0, 10_000),
    max_size=st.sampled_from([NO_LIMIT, 100, 61]),
)
def test_fused_check_agrees_on_damaged_bytes(
    codec: Compression, flips: list[tuple[int, int]], cut: int, max_size: int
) -> None:
    data = bytearray(build(SPECS, codec))
    for at, mask in flips:
        data[at % len(data)] ^= mask
    buf = bytes(data[: len(data) - cut % 8])
    assert _fused(buf, 0, max_size) == _by_header(buf, 0, max_size)
    assert _split(buf, 0) == _by_header(buf, 0, NO_LIMIT)


def test_stamp_batch_sets_offset_and_epoch_and_keeps_the_crc_valid() -> None:
    data = bytearray(build(SPECS, Compression.GZIP))
    before = bytes(data)
    fields = read_batch_fields(memoryview(data), 0)
    stamp_batch(data, 0, fields, 12345, 7)
    header = RecordBatch.parse(data)
    header.validate()
    assert (header.base_offset, header.partition_leader_epoch) == (12345, 7)
    assert header.batch_length == fields[1]
    assert data[16:] == before[16:]
    assert [r.offset for r in header.records()] == list(range(12345, 12355))


def test_stamp_batch_into_a_header_copy() -> None:
    data = build(SPECS, Compression.NONE)
    header = bytearray(data[:HEADER_SIZE])
    stamp_batch(header, 0, read_batch_fields(memoryview(data), 0), 99, 3)
    assert struct.unpack_from(">qii", header) == (99, len(data) - 12, 3)
    with pytest.raises(TypeError):
        stamp_batch(memoryview(data), 0, read_batch_fields(memoryview(data), 0), 99, 3)
