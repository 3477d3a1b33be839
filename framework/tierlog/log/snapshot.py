"""Producer state snapshots: the ``.snapshot`` files, byte-compatible with Kafka's (version 1).

A snapshot named ``<offset>.snapshot`` holds each producer's state as of that offset, so that
loading a log replays only the batches after it. The log writes one at every segment roll, named
by the new segment's base offset, and tiered storage uploads it with the segment it closes.

Layout (big-endian): version int16 @0, CRC-32C uint32 @2 over every byte from offset 6 on, entry
count int32 @6, then 46-byte entries: producerId int64, epoch int16, lastSequence int32,
lastOffset int64, offsetDelta int32, timestamp int64, coordinatorEpoch int32,
currentTxnFirstOffset int64 (-1 when no transaction is open).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from pathlib import Path

import attrs

from ..errors import KafkaStorageError
from ..records import crc32c
from .checkpoint import write_atomically

SNAPSHOT_VERSION = 1
SNAPSHOT_SUFFIX = ".snapshot"
#: Bytes before the first entry: version, CRC, count.
HEADER_SIZE = 10
ENTRY_SIZE = 46
_CRC_START = 6
_HEADER = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")
assert _HEADER.size == HEADER_SIZE and _ENTRY.size == ENTRY_SIZE
_OFFSET_DIGITS = 20


def _in_range(bits: int) -> Callable[[object, attrs.Attribute[int], int], None]:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def check(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
        if not low <= value <= high:
            raise ValueError(f"{attribute.name} {value} does not fit in int{bits}")

    return check


@attrs.frozen
class SnapshotEntry:
    """One producer's state as a snapshot stores it (only its last batch is kept)."""

    producer_id: int = attrs.field(validator=_in_range(64))
    producer_epoch: int = attrs.field(validator=_in_range(16))
    last_sequence: int = attrs.field(validator=_in_range(32))
    #: Offset of the producer's last data batch's last record, or -1 if it has none.
    last_offset: int = attrs.field(validator=_in_range(64))
    offset_delta: int = attrs.field(validator=_in_range(32))
    timestamp: int = attrs.field(validator=_in_range(64))
    coordinator_epoch: int = attrs.field(validator=_in_range(32))
    #: First offset of the producer's open transaction, or -1 if none is open.
    current_txn_first_offset: int = attrs.field(validator=_in_range(64))


def encode_snapshot(entries: Iterable[SnapshotEntry]) -> bytes:
    """The bytes of a version-1 snapshot holding ``entries``, in the order given."""
    entries = list(entries)
    buffer = bytearray(HEADER_SIZE + ENTRY_SIZE * len(entries))
    position = HEADER_SIZE
    for entry in entries:
        _ENTRY.pack_into(
            buffer,
            position,
            entry.producer_id,
            entry.producer_epoch,
            entry.last_sequence,
            entry.last_offset,
            entry.offset_delta,
            entry.timestamp,
            entry.coordinator_epoch,
            entry.current_txn_first_offset,
        )
        position += ENTRY_SIZE
    struct.pack_into(">i", buffer, _CRC_START, len(entries))
    crc = crc32c(memoryview(buffer)[_CRC_START:])
    struct.pack_into(">hI", buffer, 0, SNAPSHOT_VERSION, crc)
    return bytes(buffer)


def decode_snapshot(data: bytes, *, source: str = "") -> list[SnapshotEntry]:
    """The entries of a snapshot; KafkaStorageError naming ``source`` if it is corrupt.

    Checks, in order: at least a header, version 1, the CRC, a count that matches the length.
    """
    where = f" {source}" if source else ""

    def corrupt(reason: str) -> KafkaStorageError:
        return KafkaStorageError(f"corrupt producer snapshot{where}: {reason}")

    if len(data) < HEADER_SIZE:
        raise corrupt(f"truncated: {len(data)} bytes, a snapshot has at least {HEADER_SIZE}")
    version, stored_crc, count = _HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise corrupt(f"unknown version {version} (expected {SNAPSHOT_VERSION})")
    computed_crc = crc32c(memoryview(data)[_CRC_START:])
    if computed_crc != stored_crc:
        raise corrupt(f"CRC mismatch: stored 0x{stored_crc:08x}, computed 0x{computed_crc:08x}")
    if count < 0:
        raise corrupt(f"negative entry count {count}")
    expected = HEADER_SIZE + ENTRY_SIZE * count
    if len(data) != expected:
        raise corrupt(f"{count} entries need {expected} bytes, the snapshot has {len(data)}")
    return [
        SnapshotEntry(*_ENTRY.unpack_from(data, HEADER_SIZE + ENTRY_SIZE * index))
        for index in range(count)
    ]


#: A snapshot of no producers: what tiering uploads for a segment that has no snapshot.
EMPTY_SNAPSHOT: bytes = encode_snapshot(())


def snapshot_file_name(offset: int) -> str:
    """``<offset, 20 digits>.snapshot``, as Kafka names the snapshot taken at ``offset``."""
    if offset < 0:
        raise ValueError(f"negative snapshot offset {offset}")
    return f"{offset:0{_OFFSET_DIGITS}d}{SNAPSHOT_SUFFIX}"


def offset_from_snapshot_file(name: str | Path) -> int:
    """The offset a snapshot file is named by; ValueError if the name is not a snapshot's."""
    file_name = Path(name).name
    prefix = file_name.removesuffix(SNAPSHOT_SUFFIX)
    if prefix == file_name or not prefix.isdigit() or not prefix.isascii():
        raise ValueError(f"{file_name!r} is not a producer snapshot file name")
    return int(prefix)


def is_snapshot_file(path: Path) -> bool:
    """Whether ``path`` is a regular file named like a snapshot."""
    try:
        offset_from_snapshot_file(path)
    except ValueError:
        return False
    return path.is_file()


def list_snapshot_files(directory: Path) -> dict[int, Path]:
    """The snapshot files in ``directory`` by offset, in offset order (none if it is missing)."""
    directory = Path(directory)
    if not directory.is_dir():
        return {}
    found = {offset_from_snapshot_file(p): p for p in directory.iterdir() if is_snapshot_file(p)}
    return dict(sorted(found.items()))


def read_snapshot_file(path: Path) -> list[SnapshotEntry]:
    """The entries of a snapshot file; KafkaStorageError if it cannot be read or is corrupt."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise KafkaStorageError(f"cannot read producer snapshot {path}: {err}") from err
    return decode_snapshot(data, source=str(path))


def write_snapshot_file(
    path: Path, entries: Iterable[SnapshotEntry], *, fsync: bool = True
) -> None:
    """Writes a snapshot file atomically."""
    write_atomically(Path(path), encode_snapshot(entries), fsync=fsync)


def write_empty_snapshot(directory: Path, offset: int) -> Path:
    """Writes the empty snapshot for ``offset`` in ``directory`` and returns its path.

    Tiering uses it when the segment ending before ``offset`` has no snapshot (data written
    before snapshots were taken at every roll): producers that wrote to it get
    UNKNOWN_PRODUCER_ID once after a restore and register again, instead of the segment never
    being tiered.
    """
    path = Path(directory) / snapshot_file_name(offset)
    write_atomically(path, EMPTY_SNAPSHOT)
    return path
