"""Zig-zag varints: known encodings, round trips, and the limits Kafka enforces."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tierlog.errors import CorruptRecordError
from tierlog.records.varint import (
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    size_of_varint,
)

# Zig-zag maps 0, -1, 1, -2, ... to 0, 1, 2, 3, ...; base-128 little-endian groups follow.
KNOWN = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (300, "d804"),
    (-(1 << 31), "ffffffff0f"),
    ((1 << 31) - 1, "feffffff0f"),
]


@pytest.mark.parametrize(("value", "encoded"), KNOWN)
def test_known_encodings(value: int, encoded: str) -> None:
    raw = bytes.fromhex(encoded)
    assert encode_varint(value) == raw
    assert size_of_varint(value) == len(raw)
    assert decode_varint(raw, 0) == (value, len(raw))
    assert decode_varlong(raw, 0) == (value, len(raw))


def test_varlong_extremes() -> None:
    assert encode_varlong(-(1 << 63)) == bytes.fromhex("ffffffffffffffffff01")
    assert encode_varlong((1 << 63) - 1) == bytes.fromhex("feffffffffffffffff01")
    assert decode_varlong(bytes.fromhex("ffffffffffffffffff01"), 0) == (-(1 << 63), 10)


def test_decode_reads_from_position() -> None:
    assert decode_varint(b"\xff\xd8\x04\x00", 1) == (300, 3)


@given(st.integers(-(1 << 31), (1 << 31) - 1))
def test_varint_round_trip(value: int) -> None:
    raw = encode_varint(value)
    assert len(raw) == size_of_varint(value) <= 5
    assert decode_varint(raw + b"\x00", 0) == (value, len(raw))


@given(st.integers(-(1 << 63), (1 << 63) - 1))
def test_varlong_round_trip(value: int) -> None:
    raw = encode_varlong(value)
    assert len(raw) == size_of_varint(value) <= 10
    assert decode_varlong(raw, 0) == (value, len(raw))


def test_out_of_range_values_are_refused_when_encoding() -> None:
    with pytest.raises(ValueError, match="int32"):
        encode_varint(1 << 31)
    with pytest.raises(ValueError, match="int64"):
        encode_varlong(-(1 << 63) - 1)


def test_varint_longer_than_five_bytes_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="longer than 5 bytes") as info:
        decode_varint(b"\x00\x80\x80\x80\x80\x80\x01", 1)
    assert info.value.position == 1


def test_varlong_longer_than_ten_bytes_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="longer than 10 bytes") as info:
        decode_varlong(b"\x80" * 10 + b"\x01", 0)
    assert info.value.position == 0


def test_varint_wider_than_32_bits_is_corrupt() -> None:
    # Five bytes, but the last carries bits above bit 31.
    with pytest.raises(CorruptRecordError, match="32 bits"):
        decode_varint(b"\xff\xff\xff\xff\x1f", 0)


def test_varlong_wider_than_64_bits_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="64 bits"):
        decode_varlong(b"\xff" * 9 + b"\x03", 0)


def test_truncated_varint_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="truncated varint") as info:
        decode_varint(b"\x01\x80\x80", 1)
    assert info.value.position == 1
    assert "at byte 1" in str(info.value)
