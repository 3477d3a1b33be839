"""The file a broker saves its remote log metadata state to, so a restart need not replay the topic.

For each user partition it holds, the file keeps the live segments in their current state, each
leader epoch's served segments and highest tiered offset, the partition's deletion state, and the
last offset of its ``__remote_log_metadata`` partition applied to that state. On restart the
manager restores each partition's cache and consumes only what came after that offset.

Layout, big-endian::

    magic "TLRM" | format version (uint16) | entries length (uint64) | partition count (uint32)
    entries | CRC-32C (uint32) of every byte before it

    entry:    topic name length (int16) | topic name (UTF-8) | topic id (16) | partition (int32)
              consumed offset (int64)
              delete state length (int32, -1 for none) | delete state event
              segment count (uint32) | per segment: length (uint32) | segment metadata event
              epoch count (uint32) | per epoch: leader epoch (int32) | highest offset (int64, -1
              for none) | served count (uint32) | per served segment: offset (int64) | id (16)

Segments and the deletion state are stored as their ``__remote_log_metadata`` events (see
``serde``), so there is one encoding of each. The file is only ever replaced whole; a file that is
missing means "replay everything", one that cannot be read raises ``MetadataFormatError`` and the
caller replays too.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

import attrs

from ..errors import MetadataFormatError
from ..log.checkpoint import write_atomically
from ..model import (
    RemoteLogSegmentMetadata,
    RemotePartitionDeleteMetadata,
    TopicIdPartition,
    TopicPartition,
    Uuid,
)
from ..records import crc32c
from .serde import decode_event, encode_event

__all__ = [
    "CHECKPOINT_FILE_NAME",
    "EpochSnapshot",
    "PartitionSnapshot",
    "read_checkpoint",
    "write_checkpoint",
]

CHECKPOINT_FILE_NAME: Final = "remote-log-metadata.checkpoint"

_MAGIC: Final = b"TLRM"
_VERSION: Final = 0
_HEADER = struct.Struct(">4sHQI")
_CRC = struct.Struct(">I")
_NAME_LENGTH = struct.Struct(">h")
_PARTITION = struct.Struct(">16siqi")  # topic id, partition, consumed offset, delete length
_COUNT = struct.Struct(">I")
_EPOCH = struct.Struct(">iqI")
_SERVED = struct.Struct(">q16s")


def _leader_epoch(_instance: object, _attribute: object, value: int) -> None:
    if value < 0:
        raise ValueError(f"a leader epoch is non-negative, got {value}")


def _served(value: Iterable[tuple[int, Uuid]]) -> tuple[tuple[int, Uuid], ...]:
    return tuple(value)


def _segments(value: Iterable[RemoteLogSegmentMetadata]) -> tuple[RemoteLogSegmentMetadata, ...]:
    return tuple(value)


def _epochs(value: Iterable[EpochSnapshot]) -> tuple[EpochSnapshot, ...]:
    return tuple(value)


def _highest_offset(_instance: object, _attribute: object, value: int | None) -> None:
    if value is not None and value < 0:
        raise ValueError(f"highest_log_offset is None or non-negative, got {value}")


@attrs.frozen
class EpochSnapshot:
    """One leader epoch's share of a partition's remote log.

    ``referenced`` lists the finished segments serving the epoch, by the offset the epoch starts
    at in each; ``highest_log_offset`` is None while nothing of the epoch has been tiered.
    """

    leader_epoch: int = attrs.field(validator=_leader_epoch)
    highest_log_offset: int | None = attrs.field(validator=_highest_offset)
    referenced: tuple[tuple[int, Uuid], ...] = attrs.field(converter=_served)

    def __attrs_post_init__(self) -> None:
        offsets = [offset for offset, _uuid in self.referenced]
        if any(later <= earlier for earlier, later in itertools.pairwise(offsets)):
            raise ValueError(
                f"epoch {self.leader_epoch} serves segments at offsets {offsets}, "
                "which are not strictly increasing"
            )


@attrs.frozen
class PartitionSnapshot:
    """Everything needed to rebuild one user partition's metadata cache without the topic.

    ``consumed_offset`` is the last offset of the partition's metadata partition applied to this
    state (-1: none), so consumption resumes right after it.
    """

    topic_id_partition: TopicIdPartition = attrs.field(
        validator=attrs.validators.instance_of(TopicIdPartition)
    )
    consumed_offset: int
    segments: tuple[RemoteLogSegmentMetadata, ...] = attrs.field(converter=_segments)
    epochs: tuple[EpochSnapshot, ...] = attrs.field(converter=_epochs)
    delete_state: RemotePartitionDeleteMetadata | None = None

    def __attrs_post_init__(self) -> None:
        tip = self.topic_id_partition
        if self.consumed_offset < -1:
            raise ValueError(f"consumed_offset is -1 or above, got {self.consumed_offset}")
        held = set()
        for segment in self.segments:
            owner = segment.remote_log_segment_id.topic_id_partition
            if owner is not tip and owner != tip:
                raise ValueError(f"segment {segment.remote_log_segment_id} is not of {tip}")
            held.add(segment.remote_log_segment_id.id.value)
        for epoch in self.epochs:
            for _offset, segment_uuid in epoch.referenced:
                if segment_uuid.value not in held:
                    raise ValueError(
                        f"epoch {epoch.leader_epoch} serves segment {segment_uuid}, "
                        "which the snapshot does not hold"
                    )
        if self.delete_state is not None and self.delete_state.topic_id_partition != tip:
            raise ValueError(
                f"delete state of {self.delete_state.topic_id_partition} is not of {tip}"
            )


# --- writing -----------------------------------------------------------------------------------


def write_checkpoint(path: Path, snapshots: Iterable[PartitionSnapshot]) -> None:
    """Replace the checkpoint at ``path`` with ``snapshots``, whole or not at all.

    The file is written beside ``path`` as ``<name>.tmp``, flushed to the device and renamed over
    it, so a crash leaves the old checkpoint or the new one. Values the format cannot hold raise
    ValueError and an I/O failure KafkaStorageError; either way the old file is left as it was.
    """
    parts: list[bytes] = []
    seen: set[TopicIdPartition] = set()
    for snapshot in snapshots:
        if snapshot.topic_id_partition in seen:
            raise ValueError(f"two snapshots of {snapshot.topic_id_partition}")
        seen.add(snapshot.topic_id_partition)
        _encode_snapshot(snapshot, parts)
    entries = b"".join(parts)
    header = _HEADER.pack(_MAGIC, _VERSION, len(entries), len(seen))
    checksum = crc32c(entries, crc32c(header))
    write_atomically(Path(path), b"".join((header, entries, _CRC.pack(checksum))))


def _encode_snapshot(snapshot: PartitionSnapshot, parts: list[bytes]) -> None:
    tip = snapshot.topic_id_partition
    name = tip.topic.encode()
    delete_state = b"" if snapshot.delete_state is None else encode_event(snapshot.delete_state)
    try:
        parts += (
            _NAME_LENGTH.pack(len(name)),
            name,
            _PARTITION.pack(
                tip.topic_id.value,
                tip.partition,
                snapshot.consumed_offset,
                -1 if snapshot.delete_state is None else len(delete_state),
            ),
            delete_state,
            _COUNT.pack(len(snapshot.segments)),
        )
        for segment in snapshot.segments:
            event = encode_event(segment)
            parts += (_COUNT.pack(len(event)), event)
        parts.append(_COUNT.pack(len(snapshot.epochs)))
        for epoch in snapshot.epochs:
            highest = -1 if epoch.highest_log_offset is None else epoch.highest_log_offset
            parts.append(_EPOCH.pack(epoch.leader_epoch, highest, len(epoch.referenced)))
            parts += [_SERVED.pack(offset, uuid.value) for offset, uuid in epoch.referenced]
    except struct.error as err:
        raise ValueError(f"cannot checkpoint {tip}: {err}") from err


# --- reading -----------------------------------------------------------------------------------


def read_checkpoint(path: Path) -> dict[TopicIdPartition, PartitionSnapshot]:
    """The snapshots saved at ``path``, by partition; empty if there is no such file.

    :raises MetadataFormatError: the file is truncated, corrupt, of another format version or not
        a checkpoint at all; the message names the file and the reason.
    :raises OSError: the file exists but cannot be read.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    view = memoryview(data)
    size = len(view)
    if size < _HEADER.size + _CRC.size:
        raise _corrupt(path, f"truncated: {size} bytes, shorter than the header and checksum")
    magic, version, entries_length, count = _HEADER.unpack_from(view)
    if magic != _MAGIC:
        raise _corrupt(path, f"not a remote log metadata checkpoint (magic {magic!r})")
    if version != _VERSION:
        raise _corrupt(
            path, f"unsupported checkpoint format version {version}; only {_VERSION} is read"
        )
    entries_end = _HEADER.size + entries_length
    if entries_end + _CRC.size > size:
        raise _corrupt(
            path, f"truncated: {entries_end + _CRC.size - size} bytes missing from the end"
        )
    if entries_end + _CRC.size < size:
        raise _corrupt(path, f"{size - entries_end - _CRC.size} trailing bytes after the checksum")
    (stored,) = _CRC.unpack_from(view, entries_end)
    computed = crc32c(view[:entries_end])
    if stored != computed:
        raise _corrupt(path, f"checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")
    try:
        with _collector_paused():
            return _decode_entries(view[:entries_end], count)
    except _Malformed as err:
        raise _corrupt(path, str(err)) from None
    except MetadataFormatError as err:
        raise _corrupt(path, str(err)) from err
    except UnicodeDecodeError as err:
        raise _corrupt(path, f"a topic name is not valid UTF-8: {err}") from err
    except (ValueError, TypeError) as err:  # the model rejected a decoded value
        raise _corrupt(path, f"holds values the model rejects: {err}") from err


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Loading creates hundreds of thousands of long-lived objects and no garbage; the cyclic
    collector's passes over them while they are being created cost a third of the load time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class _Malformed(Exception):
    """Entries inconsistent with their own lengths; only a faulty writer makes these."""


def _corrupt(path: Path, reason: str) -> MetadataFormatError:
    return MetadataFormatError(f"remote log metadata checkpoint {path}: {reason}")


def _decode_entries(view: memoryview, count: int) -> dict[TopicIdPartition, PartitionSnapshot]:
    size = len(view)
    position = _HEADER.size
    snapshots: dict[TopicIdPartition, PartitionSnapshot] = {}
    for _ in range(count):
        start = position
        _need(size, position, _NAME_LENGTH.size + _PARTITION.size, start)
        (name_length,) = _NAME_LENGTH.unpack_from(view, position)
        position += _NAME_LENGTH.size
        if name_length < 0:
            raise _Malformed(f"entry at byte {start} has a negative topic name length")
        _need(size, position, name_length + _PARTITION.size, start)
        name = str(view[position : position + name_length], "utf-8")
        position += name_length
        topic_id, partition, consumed_offset, delete_length = _PARTITION.unpack_from(view, position)
        position += _PARTITION.size
        tip = TopicIdPartition(Uuid(topic_id), TopicPartition(name, partition))

        delete_state = None
        if delete_length != -1:
            if delete_length < 0:
                raise _Malformed(f"entry at byte {start} has a negative delete state length")
            _need(size, position, delete_length, start)
            event = decode_event(view[position : position + delete_length])
            if not isinstance(event, RemotePartitionDeleteMetadata):
                raise _Malformed(
                    f"entry at byte {start} holds a {type(event).__name__} as its delete state"
                )
            delete_state = event
            position += delete_length

        _need(size, position, _COUNT.size, start)
        (segment_count,) = _COUNT.unpack_from(view, position)
        position += _COUNT.size
        segments = []
        unpack_length = _COUNT.unpack_from
        by_uuid: dict[bytes, Uuid] = {}
        for _ in range(segment_count):  # checks inlined: this runs once per segment
            if position + 4 > size:
                _need(size, position, 4, start)
            (length,) = unpack_length(view, position)
            end = position + 4 + length
            if end > size:
                _need(size, position + 4, length, start)
            segment = decode_event(view[position + 4 : end])
            position = end
            if type(segment) is not RemoteLogSegmentMetadata:
                raise _Malformed(
                    f"entry at byte {start} holds a {type(segment).__name__} as a segment"
                )
            segments.append(segment)
            segment_uuid = segment.remote_log_segment_id.id
            by_uuid[segment_uuid.value] = segment_uuid
        if segments and segments[0].remote_log_segment_id.topic_id_partition == tip:
            tip = segments[0].remote_log_segment_id.topic_id_partition  # shared by all of them

        _need(size, position, _COUNT.size, start)
        (epoch_count,) = _COUNT.unpack_from(view, position)
        position += _COUNT.size
        epochs = []
        for _ in range(epoch_count):
            _need(size, position, _EPOCH.size, start)
            leader_epoch, highest, served_count = _EPOCH.unpack_from(view, position)
            position += _EPOCH.size
            _need(size, position, served_count * _SERVED.size, start)
            served = []
            for offset, raw in _SERVED.iter_unpack(
                view[position : position + served_count * _SERVED.size]
            ):
                known = by_uuid.get(raw)
                served.append((offset, known if known is not None else Uuid(raw)))
            position += served_count * _SERVED.size
            epochs.append(
                EpochSnapshot(leader_epoch, None if highest == -1 else highest, tuple(served))
            )

        if tip in snapshots:
            raise _Malformed(f"entry at byte {start} repeats partition {tip}")
        snapshots[tip] = PartitionSnapshot(tip, consumed_offset, segments, epochs, delete_state)
    if position != size:
        raise _Malformed(f"{size - position} bytes after the last of {count} entries")
    return snapshots


def _need(size: int, position: int, length: int, entry_start: int) -> None:
    if position + length > size:
        raise _Malformed(
            f"entry at byte {entry_start} runs {position + length - size} bytes past the entries"
        )
