"""Every kind of malformed batch raises CorruptRecordError naming the byte position and the reason.

The corrupt batches are assembled here with ``struct`` and a correct CRC, so the check under
test, not the CRC, is what catches them. Each sits behind a valid batch of ``LEAD`` bytes, so the
positions in the errors are positions in the whole buffer.
"""

from __future__ import annotations

import struct

import crc32c
import pytest
from tierlog.errors import CorruptRecordError
from tierlog.records import (
    HEADER_SIZE,
    BatchHeader,
    Compression,
    RecordBatchBuilder,
    compress,
    iter_batches,
)

from .test_known_answers import MINIMAL

LEAD = len(MINIMAL)
RECORDS_AT = LEAD + HEADER_SIZE
#: A well-formed record (key null, value "hi"): length 8, then the 8 body bytes.
GOOD_RECORD = bytes.fromhex("10 00 00 00 01 04 6869 00".replace(" ", ""))


def forge(
    records: bytes,
    count: int,
    *,
    attributes: int = 0,
    last_offset_delta: int | None = None,
    magic: int = 2,
    length: int | None = None,
) -> bytes:
    """``MINIMAL`` followed by a batch of the given parts, with a correct CRC."""
    covered = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            max(count - 1, 0) if last_offset_delta is None else last_offset_delta,
            1000,
            1000,
            -1,
            -1,
            -1,
            count,
        )
        + records
    )
    batch_length = HEADER_SIZE - 12 + len(records) if length is None else length
    prefix = struct.pack(">qiibI", 10, batch_length, 0, magic, crc32c.crc32c(covered))
    return MINIMAL + prefix + covered


def read_all(buf: bytes, **kwargs: int) -> None:
    for batch in iter_batches(buf):
        for _ in batch.records(**kwargs):
            pass


def assert_corrupt(buf: bytes, reason: str, position: int, **kwargs: int) -> None:
    with pytest.raises(CorruptRecordError) as info:
        read_all(buf, **kwargs)
    error = info.value
    assert reason in error.reason
    assert error.position == position
    assert reason in str(error)
    assert f"at byte {position}" in str(error)


def test_forge_builds_valid_batches() -> None:
    """The forging helper itself is right, so the failures below are the checks' doing."""
    buf = forge(GOOD_RECORD * 3, 3)
    batches = list(iter_batches(buf))
    assert [len(list(b.records())) for b in batches] == [1, 3]


# --- the batch as a whole -----------------------------------------------------------------------


def test_bad_crc() -> None:
    buf = bytearray(forge(GOOD_RECORD, 1))
    buf[-2] ^= 0x01
    assert_corrupt(bytes(buf), "CRC mismatch", LEAD)


def test_truncated_batch() -> None:
    buf = forge(GOOD_RECORD, 1)
    assert_corrupt(buf[:-1], "truncated batch: the header declares 70 bytes, 69 are present", LEAD)


def test_truncated_header() -> None:
    buf = forge(GOOD_RECORD, 1)
    assert_corrupt(buf[: LEAD + 30], "truncated batch header: 30 of 61 bytes", LEAD)
    assert_corrupt(buf[: LEAD + 5], "truncated batch header: 5 of 61 bytes", LEAD)


@pytest.mark.parametrize("magic", [0, 1, 3, -1])
def test_bad_magic(magic: int) -> None:
    assert_corrupt(forge(GOOD_RECORD, 1, magic=magic), f"unsupported magic {magic}", LEAD)


@pytest.mark.parametrize("length", [-5, 0, 48])
def test_negative_or_too_small_batch_length(length: int) -> None:
    buf = forge(GOOD_RECORD, 1, length=length)
    assert_corrupt(buf, f"batch length {length} is smaller than the 49-byte minimum", LEAD)


def test_absurd_batch_length_is_truncation_not_an_allocation() -> None:
    buf = forge(GOOD_RECORD, 1, length=(1 << 31) - 1)
    assert_corrupt(buf, f"the header declares {(1 << 31) + 11} bytes", LEAD)


def test_negative_record_count() -> None:
    assert_corrupt(forge(GOOD_RECORD, -1, last_offset_delta=0), "negative record count -1", LEAD)


def test_absurd_record_count() -> None:
    buf = forge(GOOD_RECORD, (1 << 31) - 1, last_offset_delta=0)
    assert_corrupt(buf, "record count 2147483647 cannot fit in a 9-byte records section", LEAD)


def test_negative_last_offset_delta() -> None:
    buf = forge(GOOD_RECORD, 1, last_offset_delta=-3)
    assert_corrupt(buf, "negative last offset delta -3", LEAD)


def test_unknown_codec() -> None:
    assert_corrupt(forge(GOOD_RECORD, 1, attributes=5), "unknown compression codec 5", LEAD)


def test_validate_checks_without_decoding_records() -> None:
    buf = bytearray(forge(GOOD_RECORD, 1))
    buf[-1] ^= 0x40  # the last record byte: the CRC no longer matches
    header = BatchHeader.parse(buf, LEAD)
    with pytest.raises(CorruptRecordError, match=f"at byte {LEAD}: CRC mismatch"):
        header.validate()


# --- record count against the records -----------------------------------------------------------


def test_more_records_declared_than_present() -> None:
    buf = forge(GOOD_RECORD * 2 + GOOD_RECORD[:3], 3)
    assert_corrupt(buf, "record length 8 overruns the 2 bytes left", RECORDS_AT + 18)


def test_fewer_records_declared_than_present() -> None:
    buf = forge(GOOD_RECORD * 3, 2)
    assert_corrupt(buf, "9 bytes left over after the 2 records", RECORDS_AT + 18)


# --- inside a record ----------------------------------------------------------------------------


def test_varint_longer_than_allowed() -> None:
    # The second record's length is a six-byte varint.
    record = b"\x80\x80\x80\x80\x80\x00" + GOOD_RECORD[1:]
    buf = forge(GOOD_RECORD + record, 2)
    assert_corrupt(buf, "varint longer than 5 bytes", RECORDS_AT + 9)


def test_varlong_timestamp_longer_than_allowed() -> None:
    body = b"\x00" + b"\xff" * 10 + b"\x00" + b"\x00\x01\x04hi\x00"
    record = bytes([len(body) << 1]) + body
    assert_corrupt(forge(record, 1), "varlong longer than 10 bytes", RECORDS_AT + 2)


def test_negative_record_length() -> None:
    buf = forge(b"\x03" + GOOD_RECORD[1:], 1)
    assert_corrupt(buf, "record length -2 is less than the 6-byte minimum", RECORDS_AT)


def test_record_length_past_the_section() -> None:
    assert_corrupt(
        forge(b"\x12" + GOOD_RECORD[1:], 1), "record length 9 overruns the 8 bytes left", RECORDS_AT
    )


def test_record_length_disagreeing_with_its_fields() -> None:
    # Declares 9 body bytes, but the fields take 8: one stray byte follows.
    record = b"\x12" + GOOD_RECORD[1:] + b"\x00"
    assert_corrupt(forge(record, 1), "record length 9 disagrees with its fields", RECORDS_AT)


@pytest.mark.parametrize(("field", "name"), [(4, "key"), (5, "value")])
def test_negative_key_or_value_length(field: int, name: str) -> None:
    record = bytearray(GOOD_RECORD)
    record[field] = 0x03  # zig-zag -2: only -1 (null) is a valid negative length
    assert_corrupt(forge(bytes(record), 1), f"negative {name} length -2", RECORDS_AT)


def test_key_length_past_the_record() -> None:
    record = bytearray(GOOD_RECORD)
    record[4] = 0x40  # key of 32 bytes, in an 8-byte record
    assert_corrupt(forge(bytes(record), 1), "key length 32 overruns its record", RECORDS_AT)
    # Followed by other records, the key must still not swallow them.
    assert_corrupt(forge(bytes(record) + GOOD_RECORD * 4, 5), "overruns its record", RECORDS_AT)


def _with_headers(headers: bytes) -> bytes:
    body = b"\x00\x00\x00\x01\x04hi" + headers
    return bytes([len(body) << 1]) + body


def test_negative_header_count() -> None:
    assert_corrupt(forge(_with_headers(b"\x01"), 1), "bad header count -1", RECORDS_AT)


def test_absurd_header_count() -> None:
    # 2**31 - 1 headers claimed in a 14-byte record.
    record = _with_headers(b"\xfe\xff\xff\xff\x0f")
    assert_corrupt(forge(record, 1), "bad header count 2147483647", RECORDS_AT)


def test_null_header_key() -> None:
    record = _with_headers(b"\x02\x01\x00")
    assert_corrupt(forge(record, 1), "negative header key length -1", RECORDS_AT)


def test_header_key_not_utf8() -> None:
    record = _with_headers(b"\x02\x02\xff\x00")
    assert_corrupt(forge(record, 1), "header key is not valid UTF-8", RECORDS_AT)


# --- compressed batches -------------------------------------------------------------------------


def test_record_errors_in_compressed_batches_name_the_decompressed_byte() -> None:
    records = GOOD_RECORD + b"\x80\x80\x80\x80\x80\x00"
    buf = forge(compress(Compression.GZIP, records), 2, attributes=int(Compression.GZIP))
    assert_corrupt(buf, "varint longer than 5 bytes (at byte 9 of the decompressed records)", LEAD)


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_garbage_compressed_section(codec: Compression) -> None:
    buf = forge(b"\x00\x01\x02\x03 not compressed at all", 1, attributes=int(codec))
    assert_corrupt(buf, codec.name.lower(), LEAD)


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_decompression_bomb(codec: Compression) -> None:
    builder = RecordBatchBuilder(codec)
    builder.append(1, None, bytes(4 * 1024 * 1024))
    buf = MINIMAL + builder.build()
    assert len(buf) < 1024 * 1024
    assert_corrupt(
        buf, "decompresses to more than 1000000 bytes", LEAD, max_decompressed_size=10**6
    )
    read_all(buf, max_decompressed_size=5 * 1024 * 1024)


def test_absurd_record_count_in_a_compressed_batch() -> None:
    buf = forge(compress(Compression.LZ4, GOOD_RECORD), 10**9, attributes=int(Compression.LZ4))
    assert_corrupt(buf, "record count 1000000000 cannot fit in a 9-byte records section", LEAD)
