"""The binary form of remote log metadata events on the ``__remote_log_metadata`` topic.

Every event starts with the format version and the event type, one unsigned byte each (types: 0
segment metadata, 1 segment update, 2 partition delete), followed by a big-endian body. The body
carries the topic name as well as its id, as Kafka's records do, so a broker can name a partition
without asking anyone. Strings and byte arrays are length-prefixed (``int16`` topic names,
``int32`` custom metadata with -1 for none), states are their Kafka wire ids as ``int8``::

    segment metadata  name | topic id | partition | segment id | start offset | end offset |
                      broker id | max timestamp | event timestamp | segment size |
                      epoch count | (leader epoch, start offset)... | custom metadata | state |
                      txn index empty
    segment update    name | topic id | partition | segment id | broker id | event timestamp |
                      custom metadata | state
    partition delete  name | topic id | partition | broker id | event timestamp | state

A broker decodes every event of its metadata partitions at start-up, so decoding reads each fixed
run of fields with one precompiled ``struct`` call. Input from the topic is untrusted: anything
that is not exactly one valid event raises ``MetadataFormatError`` saying what is wrong and where.
"""

from __future__ import annotations

import functools
import struct
from typing import Final, TypeAlias

from ..errors import MetadataFormatError
from ..model import (
    CustomMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
    TopicPartition,
    Uuid,
)

__all__ = ["FORMAT_VERSION", "MetadataEvent", "decode_event", "encode_event"]

MetadataEvent: TypeAlias = (
    RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate | RemotePartitionDeleteMetadata
)

#: The one format version written and read; any other version is rejected, never guessed at.
FORMAT_VERSION: Final[int] = 0

_SEGMENT_METADATA: Final = 0
_SEGMENT_UPDATE: Final = 1
_PARTITION_DELETE: Final = 2
_EVENT_NAMES: Final = {
    _SEGMENT_METADATA: "segment metadata",
    _SEGMENT_UPDATE: "segment update",
    _PARTITION_DELETE: "partition delete",
}

_SEGMENT_STATES: Final = {state.value: state for state in RemoteLogSegmentState}
_PARTITION_STATES: Final = {state.value: state for state in RemotePartitionDeleteState}
_MAX_NAME_BYTES: Final = 0x7FFF


class _Fields:
    """Fixed-size fields read with one struct call, named so a short read says where it stopped."""

    def __init__(self, *fields: tuple[str, str]) -> None:
        compiled = struct.Struct(">" + "".join(code for _name, code in fields))
        self.size = compiled.size
        self.pack = compiled.pack
        self.unpack_from = compiled.unpack_from
        self._ends: list[tuple[int, int, str]] = []
        end = 0
        for name, code in fields:
            width = struct.calcsize(">" + code)
            end += width
            self._ends.append((end, width, name))

    def truncated(self, kind: str, available: int, position: int) -> MetadataFormatError:
        """The error for only ``available`` bytes of these fields being left at ``position``."""
        for end, width, name in self._ends:
            if end > available:
                return MetadataFormatError(
                    f"truncated {kind} event: {end - available} bytes missing in field "
                    f"{name!r} at byte {position + end - width}"
                )
        raise AssertionError(f"{available} bytes hold all {self.size}")  # pragma: no cover


_HEAD = _Fields(("format version", "B"), ("event type", "B"), ("topic name length", "h"))
_SEGMENT_FIXED = _Fields(
    ("topic id", "16s"),
    ("partition", "i"),
    ("segment id", "16s"),
    ("start offset", "q"),
    ("end offset", "q"),
    ("broker id", "i"),
    ("max timestamp", "q"),
    ("event timestamp", "q"),
    ("segment size", "q"),
    ("leader epoch count", "i"),
)
_EPOCH = struct.Struct(">iq")
_CUSTOM_LENGTH = _Fields(("custom metadata length", "i"))
_SEGMENT_TAIL = _Fields(("state", "b"), ("txn index empty", "B"))
_UPDATE_FIXED = _Fields(
    ("topic id", "16s"),
    ("partition", "i"),
    ("segment id", "16s"),
    ("broker id", "i"),
    ("event timestamp", "q"),
    ("custom metadata length", "i"),
)
_UPDATE_TAIL = _Fields(("state", "b"))
_DELETE_FIXED = _Fields(
    ("topic id", "16s"),
    ("partition", "i"),
    ("broker id", "i"),
    ("event timestamp", "q"),
    ("state", "b"),
)


# --- encoding ----------------------------------------------------------------------------------


def encode_event(event: MetadataEvent) -> bytes:
    """The bytes of ``event`` in the current format.

    Raises ValueError for values the format cannot hold (an integer wider than its field, a topic
    name over 32767 UTF-8 bytes) and TypeError for anything that is not a metadata event.
    """
    try:
        if isinstance(event, RemoteLogSegmentMetadata):
            return _encode_segment(event)
        if isinstance(event, RemoteLogSegmentMetadataUpdate):
            return _encode_update(event)
        if isinstance(event, RemotePartitionDeleteMetadata):
            return _encode_delete(event)
    except struct.error as err:
        raise ValueError(f"cannot encode {event!r}: {err}") from err
    raise TypeError(f"not a remote log metadata event: {event!r}")


def _topic_name(topic_id_partition: TopicIdPartition) -> bytes:
    name = topic_id_partition.topic.encode()
    if len(name) > _MAX_NAME_BYTES:
        raise ValueError(f"topic name is {len(name)} UTF-8 bytes; at most {_MAX_NAME_BYTES} fit")
    return name


def _custom_bytes(custom_metadata: CustomMetadata | None) -> bytes:
    return b"" if custom_metadata is None else custom_metadata.value


def _encode_segment(event: RemoteLogSegmentMetadata) -> bytes:
    segment_id = event.remote_log_segment_id
    tip = segment_id.topic_id_partition
    name = _topic_name(tip)
    custom = event.custom_metadata
    return b"".join(
        (
            _HEAD.pack(FORMAT_VERSION, _SEGMENT_METADATA, len(name)),
            name,
            _SEGMENT_FIXED.pack(
                tip.topic_id.value,
                tip.topic_partition.partition,
                segment_id.id.value,
                event.start_offset,
                event.end_offset,
                event.broker_id,
                event.max_timestamp_ms,
                event.event_timestamp_ms,
                event.segment_size_in_bytes,
                len(event.segment_leader_epochs),
            ),
            *[_EPOCH.pack(epoch, offset) for epoch, offset in event.segment_leader_epochs],
            _CUSTOM_LENGTH.pack(-1 if custom is None else len(custom.value)),
            _custom_bytes(custom),
            _SEGMENT_TAIL.pack(event.state.value, event.txn_idx_empty),
        )
    )


def _encode_update(event: RemoteLogSegmentMetadataUpdate) -> bytes:
    segment_id = event.remote_log_segment_id
    tip = segment_id.topic_id_partition
    name = _topic_name(tip)
    custom = event.custom_metadata
    return b"".join(
        (
            _HEAD.pack(FORMAT_VERSION, _SEGMENT_UPDATE, len(name)),
            name,
            _UPDATE_FIXED.pack(
                tip.topic_id.value,
                tip.topic_partition.partition,
                segment_id.id.value,
                event.broker_id,
                event.event_timestamp_ms,
                -1 if custom is None else len(custom.value),
            ),
            _custom_bytes(custom),
            _UPDATE_TAIL.pack(event.state.value),
        )
    )


def _encode_delete(event: RemotePartitionDeleteMetadata) -> bytes:
    tip = event.topic_id_partition
    name = _topic_name(tip)
    return b"".join(
        (
            _HEAD.pack(FORMAT_VERSION, _PARTITION_DELETE, len(name)),
            name,
            _DELETE_FIXED.pack(
                tip.topic_id.value,
                tip.topic_partition.partition,
                event.broker_id,
                event.event_timestamp_ms,
                event.state.value,
            ),
        )
    )


# --- decoding ----------------------------------------------------------------------------------


def decode_event(data: bytes | bytearray | memoryview) -> MetadataEvent:
    """The event ``data`` holds; MetadataFormatError if it is not exactly one valid event."""
    view = memoryview(data)
    if view.format != "B" or view.ndim != 1 or not view.c_contiguous:
        view = memoryview(view.tobytes())
    size = len(view)
    if size < _HEAD.size:
        raise _head_error(view)
    version, event_type, name_length = _unpack_head(view)
    position = _HEAD.size + name_length
    if (
        version != FORMAT_VERSION
        or event_type > _PARTITION_DELETE
        or name_length < 0
        or position > size
    ):
        raise _head_error(view)
    name = view[_HEAD.size : position].tobytes()
    try:
        if event_type == _SEGMENT_METADATA:
            return _decode_segment(view, position, size, name)
        if event_type == _SEGMENT_UPDATE:
            return _decode_update(view, position, size, name)
        return _decode_delete(view, position, size, name)
    except MetadataFormatError:
        raise
    except UnicodeDecodeError as err:
        raise MetadataFormatError(
            f"{_EVENT_NAMES[event_type]} event: topic name is not valid UTF-8: {err}"
        ) from err
    except (ValueError, TypeError) as err:
        raise MetadataFormatError(
            f"{_EVENT_NAMES[event_type]} event holds values the model rejects: {err}"
        ) from err


@functools.lru_cache(maxsize=8192)
def _topic_id_partition(name: bytes, topic_id: bytes, partition: int) -> TopicIdPartition:
    """Shared per partition: start-up decodes many events of each of a few thousand partitions."""
    return TopicIdPartition(Uuid(topic_id), TopicPartition(name.decode(), partition))


# Bound once: decoding looks these up for every event.
_unpack_head = _HEAD.unpack_from
_unpack_segment = _SEGMENT_FIXED.unpack_from
_unpack_update = _UPDATE_FIXED.unpack_from
_unpack_delete = _DELETE_FIXED.unpack_from
_unpack_epoch = _EPOCH.unpack_from
_iter_unpack_epochs = _EPOCH.iter_unpack
_unpack_length = _CUSTOM_LENGTH.unpack_from
_unpack_segment_tail = _SEGMENT_TAIL.unpack_from
_unpack_update_tail = _UPDATE_TAIL.unpack_from


def _decode_segment(
    view: memoryview, position: int, size: int, name: bytes
) -> RemoteLogSegmentMetadata:
    if size - position < _SEGMENT_FIXED.size:
        raise _SEGMENT_FIXED.truncated("segment metadata", size - position, position)
    (
        topic_id,
        partition,
        segment_id,
        start_offset,
        end_offset,
        broker_id,
        max_timestamp_ms,
        event_timestamp_ms,
        segment_size,
        epoch_count,
    ) = _unpack_segment(view, position)
    position += _SEGMENT_FIXED.size
    epochs_end = position + epoch_count * _EPOCH.size
    if epoch_count < 0 or epochs_end > size:
        raise _epoch_count_error(epoch_count, size - position)
    if epoch_count == 1:
        epochs: tuple[tuple[int, int], ...] = (_unpack_epoch(view, position),)
    else:
        epochs = tuple(_iter_unpack_epochs(view[position:epochs_end]))
    if size - epochs_end < _CUSTOM_LENGTH.size:
        raise _CUSTOM_LENGTH.truncated("segment metadata", size - epochs_end, epochs_end)
    (custom_length,) = _unpack_length(view, epochs_end)
    position = epochs_end + _CUSTOM_LENGTH.size
    custom_metadata = None
    if custom_length != -1:
        custom_metadata = _custom_metadata(view, position, size, custom_length, "segment metadata")
        position += custom_length
    if size - position != _SEGMENT_TAIL.size:
        raise _end_error(_SEGMENT_TAIL, "segment metadata", position, size)
    state_id, txn_idx_empty = _unpack_segment_tail(view, position)
    state = _SEGMENT_STATES.get(state_id)
    if state is None:
        raise MetadataFormatError(
            f"segment metadata event has an invalid segment state id {state_id}"
        )
    if txn_idx_empty > 1:
        raise MetadataFormatError(
            "segment metadata event has an invalid txn index empty flag "
            f"{txn_idx_empty} (not 0 or 1)"
        )
    return RemoteLogSegmentMetadata(
        RemoteLogSegmentId(_topic_id_partition(name, topic_id, partition), Uuid(segment_id)),
        start_offset,
        end_offset,
        max_timestamp_ms,
        broker_id,
        event_timestamp_ms,
        segment_size,
        epochs,
        custom_metadata,
        state,
        txn_idx_empty == 1,
    )


def _decode_update(
    view: memoryview, position: int, size: int, name: bytes
) -> RemoteLogSegmentMetadataUpdate:
    if size - position < _UPDATE_FIXED.size:
        raise _UPDATE_FIXED.truncated("segment update", size - position, position)
    topic_id, partition, segment_id, broker_id, event_timestamp_ms, custom_length = _unpack_update(
        view, position
    )
    position += _UPDATE_FIXED.size
    custom_metadata = None
    if custom_length != -1:
        custom_metadata = _custom_metadata(view, position, size, custom_length, "segment update")
        position += custom_length
    if size - position != _UPDATE_TAIL.size:
        raise _end_error(_UPDATE_TAIL, "segment update", position, size)
    (state_id,) = _unpack_update_tail(view, position)
    state = _SEGMENT_STATES.get(state_id)
    if state is None:
        raise MetadataFormatError(
            f"segment update event has an invalid segment state id {state_id}"
        )
    return RemoteLogSegmentMetadataUpdate(
        RemoteLogSegmentId(_topic_id_partition(name, topic_id, partition), Uuid(segment_id)),
        event_timestamp_ms,
        custom_metadata,
        state,
        broker_id,
    )


def _decode_delete(
    view: memoryview, position: int, size: int, name: bytes
) -> RemotePartitionDeleteMetadata:
    if size - position != _DELETE_FIXED.size:
        raise _end_error(_DELETE_FIXED, "partition delete", position, size)
    topic_id, partition, broker_id, event_timestamp_ms, state_id = _unpack_delete(view, position)
    state = _PARTITION_STATES.get(state_id)
    if state is None:
        raise MetadataFormatError(
            f"partition delete event has an invalid partition delete state id {state_id}"
        )
    return RemotePartitionDeleteMetadata(
        _topic_id_partition(name, topic_id, partition), state, event_timestamp_ms, broker_id
    )


# --- what is wrong with an event that does not decode -------------------------------------------


def _head_error(view: memoryview) -> MetadataFormatError:
    size = len(view)
    if size >= 1 and view[0] != FORMAT_VERSION:
        return MetadataFormatError(
            f"unknown metadata event format version {view[0]}; "
            f"only version {FORMAT_VERSION} is supported"
        )
    if size >= 2 and view[1] not in _EVENT_NAMES:
        known = ", ".join(f"{code} ({name})" for code, name in _EVENT_NAMES.items())
        return MetadataFormatError(f"unknown metadata event type {view[1]}; known: {known}")
    kind = _EVENT_NAMES[view[1]] if size >= 2 else "metadata"
    if size < _HEAD.size:
        return _HEAD.truncated(kind, size, 0)
    name_length = _unpack_head(view)[2]
    if name_length < 0:
        return MetadataFormatError(f"{kind} event has a negative topic name length {name_length}")
    return _too_long(kind, "topic name", name_length, size - _HEAD.size)


def _epoch_count_error(count: int, remaining: int) -> MetadataFormatError:
    if count < 0:
        return MetadataFormatError(
            f"segment metadata event has a negative leader epoch count {count}"
        )
    return MetadataFormatError(
        f"segment metadata event: leader epoch count {count} needs {count * _EPOCH.size} bytes "
        f"and exceeds the {remaining} bytes left in the event"
    )


def _custom_metadata(
    view: memoryview, position: int, size: int, length: int, kind: str
) -> CustomMetadata:
    if length < 0:
        raise MetadataFormatError(f"{kind} event has a negative custom metadata length {length}")
    if length > size - position:
        raise _too_long(kind, "custom metadata", length, size - position)
    return CustomMetadata(view[position : position + length])


def _too_long(kind: str, field: str, length: int, remaining: int) -> MetadataFormatError:
    return MetadataFormatError(
        f"{kind} event: {field} length {length} exceeds the {remaining} bytes left in the event"
    )


def _end_error(last: _Fields, kind: str, position: int, size: int) -> MetadataFormatError:
    """The event does not end right after its ``last`` fields at ``position``."""
    if size - position < last.size:
        return last.truncated(kind, size - position, position)
    end = position + last.size
    return MetadataFormatError(
        f"{size - end} trailing bytes after the {kind} event (it ends at byte {end})"
    )
