"""The group coordinator's formats: Kafka's partitioning of group ids and its record bytes."""

from __future__ import annotations

import pytest
from tierlog.errors import CorruptRecordError
from tierlog.groups.partitioner import group_partition, java_string_hashcode
from tierlog.groups.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    key_version,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("hello world", 1794106052),
        ("polygenelubricants", -(2**31)),  # Integer.MIN_VALUE: Utils.abs makes it 0
        ("\U0001f600", 1772899),  # one code point, two UTF-16 units
    ],
)
def test_java_string_hashcode(text: str, expected: int) -> None:
    assert java_string_hashcode(text) == expected


def test_group_partition_as_kafka_computes_it() -> None:
    assert group_partition("polygenelubricants", 50) == 0
    assert group_partition("hello", 50) == 99162322 % 50
    negative = "consumer-group-7"
    h = java_string_hashcode(negative)
    assert group_partition(negative, 50) == (h & 0x7FFFFFFF) % 50
    with pytest.raises(ValueError, match="at least one partition"):
        group_partition("g", 0)


def test_keys_in_kafkas_bytes() -> None:
    assert GroupMetadataKey("g").encode() == b"\x00\x02\x00\x01g"
    assert OffsetCommitKey("g", "t", 3).encode() == b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x03"
    assert key_version(b"\x00\x00\x00\x01g") == 0
    assert OffsetCommitKey.decode(b"\x00\x00\x00\x01g\x00\x01t\x00\x00\x00\x03") == (
        OffsetCommitKey("g", "t", 3)
    )


def test_offset_values_round_trip_and_read_old_versions() -> None:
    value = OffsetCommitValue(12, "meta", 1000, 4)
    assert value.encode() == (
        b"\x00\x03"
        + (12).to_bytes(8, "big")
        + (4).to_bytes(4, "big")
        + b"\x00\x04meta"
        + (1000).to_bytes(8, "big")
    )
    assert OffsetCommitValue.decode(value.encode()) == value
    expiring = OffsetCommitValue(12, "", 1000, -1, 5000)
    assert expiring.encode()[:2] == b"\x00\x01"
    assert OffsetCommitValue.decode(expiring.encode()) == expiring
    v0 = b"\x00\x00" + (9).to_bytes(8, "big") + b"\xff\xff" + (77).to_bytes(8, "big")
    assert OffsetCommitValue.decode(v0) == OffsetCommitValue(9, "", 77)


def test_group_values_round_trip() -> None:
    member = MemberMetadata("m-1", "i-1", "client", "/10.0.0.1", 300000, 45000, b"sub", b"asg")
    value = GroupMetadataValue("consumer", 7, "range", "m-1", 123, (member,))
    assert GroupMetadataValue.decode(value.encode()) == value
    empty = GroupMetadataValue("consumer", 8, None, None, 456)
    assert GroupMetadataValue.decode(empty.encode()) == empty


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"\x00\x03\x00",
        b"\x00\x09" + bytes(30),
        b"\x00\x03" + bytes(12) + b"\x00\x09ab",
    ],
)
def test_unreadable_values_are_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        OffsetCommitValue.decode(data)
