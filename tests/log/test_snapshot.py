"""Producer snapshot files (Kafka's ``.snapshot``, version 1)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tierlog.errors import KafkaStorageError
from tierlog.log.snapshot import (
    EMPTY_SNAPSHOT,
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
    list_snapshot_files,
    offset_from_snapshot_file,
    read_snapshot_file,
    snapshot_file_name,
    write_empty_snapshot,
    write_snapshot_file,
)


def reference_crc32c(data: bytes) -> int:
    """CRC-32C bit by bit (reflected polynomial 0x82F63B78), independent of the crc32c package."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def with_header(body: bytes, *, version: int = 1) -> bytes:
    """A snapshot around ``body`` (count + entries), its CRC computed by the reference."""
    return struct.pack(">hI", version, reference_crc32c(body)) + body


# producerId 0x1122334455667788, epoch 3, lastSequence 41, lastOffset 1000, offsetDelta 4,
# timestamp 1_600_000_000_000, coordinatorEpoch 7, currentTxnFirstOffset 996.
ENTRY_BYTES = bytes.fromhex(
    "1122334455667788"  # producerId
    "0003"  # epoch
    "00000029"  # lastSequence 41
    "00000000000003e8"  # lastOffset 1000
    "00000004"  # offsetDelta 4
    "00000174876e8000"  # timestamp 1_600_000_000_000
    "00000007"  # coordinatorEpoch 7
    "00000000000003e4"  # currentTxnFirstOffset 996
)
ENTRY = SnapshotEntry(
    producer_id=0x1122334455667788,
    producer_epoch=3,
    last_sequence=41,
    last_offset=1000,
    offset_delta=4,
    timestamp=1_600_000_000_000,
    coordinator_epoch=7,
    current_txn_first_offset=996,
)


def test_reference_crc_matches_the_check_value() -> None:
    assert reference_crc32c(b"123456789") == 0xE3069283


def test_empty_snapshot_known_answer() -> None:
    assert bytes.fromhex("0001 48674bc7 00000000") == EMPTY_SNAPSHOT
    assert encode_snapshot([]) == EMPTY_SNAPSHOT
    assert decode_snapshot(EMPTY_SNAPSHOT) == []


def test_one_entry_known_answer() -> None:
    assert len(ENTRY_BYTES) == 46
    expected = with_header(b"\x00\x00\x00\x01" + ENTRY_BYTES)
    assert encode_snapshot([ENTRY]) == expected
    assert decode_snapshot(expected) == [ENTRY]


def test_a_producer_without_batches_or_transaction_uses_minus_one() -> None:
    entry = SnapshotEntry(9, 0, -1, -1, 0, 5, -1, -1)
    body = b"\x00\x00\x00\x01" + bytes.fromhex(
        "0000000000000009" "0000" "ffffffff" "ffffffffffffffff" "00000000"
        "0000000000000005" "ffffffff" "ffffffffffffffff"
    )  # fmt: skip
    assert encode_snapshot([entry]) == with_header(body)


entries = st.builds(
    SnapshotEntry,
    producer_id=st.integers(-(2**63), 2**63 - 1),
    producer_epoch=st.integers(-(2**15), 2**15 - 1),
    last_sequence=st.integers(-(2**31), 2**31 - 1),
    last_offset=st.integers(-(2**63), 2**63 - 1),
    offset_delta=st.integers(-(2**31), 2**31 - 1),
    timestamp=st.integers(-(2**63), 2**63 - 1),
    coordinator_epoch=st.integers(-(2**31), 2**31 - 1),
    current_txn_first_offset=st.integers(-(2**63), 2**63 - 1),
)


@given(st.lists(entries, max_size=30))
def test_round_trip(snapshot: list[SnapshotEntry]) -> None:
    data = encode_snapshot(snapshot)
    assert len(data) == 10 + 46 * len(snapshot)
    assert struct.unpack_from(">I", data, 2)[0] == reference_crc32c(data[6:])
    assert decode_snapshot(data) == snapshot


@given(st.lists(entries, min_size=1, max_size=5), st.data())
def test_any_flipped_bit_is_detected(snapshot: list[SnapshotEntry], data: st.DataObject) -> None:
    encoded = bytearray(encode_snapshot(snapshot))
    bit = data.draw(st.integers(0, len(encoded) * 8 - 1))
    encoded[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(KafkaStorageError, match="corrupt producer snapshot"):
        decode_snapshot(bytes(encoded))


@pytest.mark.parametrize(
    "data,reason",
    [
        (b"", "truncated: 0 bytes"),
        (EMPTY_SNAPSHOT[:9], "truncated: 9 bytes"),
        (with_header(b"\x00\x00\x00\x00", version=0), "unknown version 0"),
        (with_header(b"\x00\x00\x00\x00", version=2), "unknown version 2"),
        (EMPTY_SNAPSHOT[:2] + b"\x00\x00\x00\x00" + EMPTY_SNAPSHOT[6:], "CRC mismatch"),
        (with_header(b"\xff\xff\xff\xff"), "negative entry count -1"),
        (with_header(b"\x00\x00\x00\x02" + ENTRY_BYTES), "2 entries need 102 bytes"),
        (with_header(b"\x00\x00\x00\x00" + ENTRY_BYTES), "0 entries need 10 bytes"),
        (with_header(b"\x00\x00\x00\x01" + ENTRY_BYTES + b"\x00"), "1 entries need 56 bytes"),
    ],
)
def test_corruption_names_the_source_and_reason(data: bytes, reason: str) -> None:
    with pytest.raises(KafkaStorageError) as info:
        decode_snapshot(data, source="/data/t-0/00000000000000000042.snapshot")
    assert "corrupt producer snapshot /data/t-0/00000000000000000042.snapshot" in str(info.value)
    assert reason in str(info.value)


def test_entry_fields_must_fit_their_width() -> None:
    with pytest.raises(ValueError, match="producer_epoch 32768 does not fit in int16"):
        SnapshotEntry(1, 2**15, 0, 0, 0, 0, 0, -1)
    with pytest.raises(ValueError, match="last_sequence"):
        SnapshotEntry(1, 0, 2**31, 0, 0, 0, 0, -1)


def test_file_names() -> None:
    assert snapshot_file_name(0) == "00000000000000000000.snapshot"
    assert snapshot_file_name(1234) == "00000000000000001234.snapshot"
    assert offset_from_snapshot_file("00000000000000001234.snapshot") == 1234
    assert offset_from_snapshot_file(Path("/x/y/00000000000000000007.snapshot")) == 7
    with pytest.raises(ValueError):
        snapshot_file_name(-1)


@pytest.mark.parametrize(
    "name",
    [
        "00000000000000001234.log",
        "00000000000000001234.snapshot.deleted",
        "00000000000000001234.snapshot.tmp",
        "abc.snapshot",
        ".snapshot",
        "-1.snapshot",
    ],
)
def test_other_names_are_not_snapshots(name: str) -> None:
    with pytest.raises(ValueError, match="not a producer snapshot file name"):
        offset_from_snapshot_file(name)


def test_write_empty_snapshot(tmp_path: Path) -> None:
    path = write_empty_snapshot(tmp_path, 300)
    assert path == tmp_path / "00000000000000000300.snapshot"
    assert path.read_bytes() == bytes.fromhex("000148674bc700000000")
    assert read_snapshot_file(path) == []
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left


def test_files_round_trip_and_are_listed_in_offset_order(tmp_path: Path) -> None:
    write_snapshot_file(tmp_path / snapshot_file_name(20), [ENTRY])
    write_empty_snapshot(tmp_path, 3)
    (tmp_path / "00000000000000000020.log").write_bytes(b"")
    (tmp_path / "00000000000000000009.snapshot.deleted").write_bytes(b"")
    (tmp_path / "00000000000000000011.snapshot").mkdir()
    listed = list_snapshot_files(tmp_path)
    assert list(listed) == [3, 20]
    assert read_snapshot_file(listed[20]) == [ENTRY]
    assert list_snapshot_files(tmp_path / "missing") == {}


def test_reading_a_missing_file_is_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(KafkaStorageError, match="cannot read producer snapshot"):
        read_snapshot_file(tmp_path / snapshot_file_name(1))
