"""The binary event format of the ``__remote_log_metadata`` topic."""

from __future__ import annotations

import contextlib
import struct

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tierlog.errors import MetadataFormatError
from tierlog.metadata.serde import FORMAT_VERSION, MetadataEvent, decode_event, encode_event
from tierlog.model import (
    CustomMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
    Uuid,
)

INT32 = (-(1 << 31), (1 << 31) - 1)
INT64 = (-(1 << 63), (1 << 63) - 1)

# --- strategies --------------------------------------------------------------------------------

uuids = st.binary(min_size=16, max_size=16).map(Uuid)
topic_names = st.text(min_size=1, max_size=40)
topic_id_partitions = st.builds(TopicIdPartition.of, uuids, topic_names, st.integers(0, INT32[1]))
segment_ids = st.builds(RemoteLogSegmentId, topic_id_partitions, uuids)
custom_metadata = st.one_of(
    st.none(), st.just(CustomMetadata(b"")), st.binary(max_size=200).map(CustomMetadata)
)
timestamps = st.integers(*INT64)
broker_ids = st.integers(*INT32)


@st.composite
def segment_metadata(
    draw: st.DrawFn, segment_id: st.SearchStrategy[RemoteLogSegmentId] = segment_ids
) -> RemoteLogSegmentMetadata:
    """Valid metadata: up to five epochs, each starting at or after the one before."""
    start = draw(st.integers(0, INT64[1]))
    end = draw(st.integers(start, INT64[1]))
    epochs = sorted(draw(st.sets(st.integers(0, INT32[1]), min_size=1, max_size=5)))
    offsets = sorted(draw(st.lists(st.integers(start, end), min_size=len(epochs), max_size=5)))
    return RemoteLogSegmentMetadata(
        remote_log_segment_id=draw(segment_id),
        start_offset=start,
        end_offset=end,
        max_timestamp_ms=draw(timestamps),
        broker_id=draw(broker_ids),
        event_timestamp_ms=draw(timestamps),
        segment_size_in_bytes=draw(st.integers(0, INT64[1])),
        segment_leader_epochs=tuple(zip(epochs, offsets, strict=False)),
        custom_metadata=draw(custom_metadata),
        state=draw(st.sampled_from(RemoteLogSegmentState)),
        txn_idx_empty=draw(st.booleans()),
    )


segment_updates = st.builds(
    RemoteLogSegmentMetadataUpdate,
    remote_log_segment_id=segment_ids,
    event_timestamp_ms=timestamps,
    custom_metadata=custom_metadata,
    state=st.sampled_from(
        [s for s in RemoteLogSegmentState if s is not RemoteLogSegmentState.COPY_SEGMENT_STARTED]
    ),
    broker_id=broker_ids,
)
partition_deletes = st.builds(
    RemotePartitionDeleteMetadata,
    topic_id_partition=topic_id_partitions,
    state=st.sampled_from(RemotePartitionDeleteState),
    event_timestamp_ms=timestamps,
    broker_id=broker_ids,
)
events = st.one_of(segment_metadata(), segment_updates, partition_deletes)

# --- a known event, byte by byte ---------------------------------------------------------------

TIP = TopicIdPartition.of(Uuid(bytes(range(16))), "orders", 7)
SEGMENT = RemoteLogSegmentMetadata(
    remote_log_segment_id=RemoteLogSegmentId(TIP, Uuid(bytes(range(16, 32)))),
    start_offset=100,
    end_offset=199,
    max_timestamp_ms=1_700_000_000_123,
    broker_id=3,
    event_timestamp_ms=1_700_000_000_456,
    segment_size_in_bytes=4096,
    segment_leader_epochs=((2, 100), (3, 150)),
    custom_metadata=CustomMetadata(b"\x01\x02"),
    state=RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
    txn_idx_empty=True,
)
SEGMENT_BYTES = bytes.fromhex(
    "00"  # format version
    "00"  # event type: segment metadata
    "0006" + b"orders".hex() + "000102030405060708090a0b0c0d0e0f"  # topic name, topic id
    "00000007"  # partition
    "101112131415161718191a1b1c1d1e1f"  # segment id
    "0000000000000064"  # start offset 100
    "00000000000000c7"  # end offset 199
    "00000003"  # broker id
    "0000018bcfe5687b"  # max timestamp
    "0000018bcfe569c8"  # event timestamp
    "0000000000001000"  # segment size 4096
    "00000002"  # two leader epochs
    "00000002"
    "0000000000000064"  # epoch 2 from offset 100
    "00000003"
    "0000000000000096"  # epoch 3 from offset 150
    "00000002"
    "0102"  # custom metadata
    "01"  # COPY_SEGMENT_FINISHED
    "01"  # txn index empty
)
UPDATE = RemoteLogSegmentMetadataUpdate(
    SEGMENT.remote_log_segment_id, 5, None, RemoteLogSegmentState.DELETE_SEGMENT_STARTED, 4
)
DELETE = RemotePartitionDeleteMetadata(
    TIP, RemotePartitionDeleteState.DELETE_PARTITION_STARTED, 6, 5
)

#: Where the fixed fields of SEGMENT_BYTES start (after the 4-byte head and the 6-byte name).
BODY = 10


def segment_bytes(
    *,
    name: bytes = b"orders",
    name_length: int | None = None,
    partition: int = 7,
    start: int = 100,
    end: int = 199,
    epochs: list[tuple[int, int]] | None = None,
    epoch_count: int | None = None,
    custom: bytes | None = None,
    custom_length: int | None = None,
    state: int = 1,
    txn: int = 0,
) -> bytes:
    """A segment metadata event built field by field, so each field can be made wrong."""
    epochs = [(0, start)] if epochs is None else epochs
    if custom_length is None:
        custom_length = -1 if custom is None else len(custom)
    return b"".join(
        [
            struct.pack(">BBh", 0, 0, len(name) if name_length is None else name_length),
            name,
            struct.pack(
                ">16si16sqqiqqq", bytes(range(16)), partition, bytes(16), start, end, 1, 2, 3, 4
            ),
            struct.pack(">i", len(epochs) if epoch_count is None else epoch_count),
            *(struct.pack(">iq", epoch, offset) for epoch, offset in epochs),
            struct.pack(">i", custom_length),
            custom or b"",
            struct.pack(">bB", state, txn),
        ]
    )


def rejected(data: bytes | bytearray) -> str:
    with pytest.raises(MetadataFormatError) as info:
        decode_event(data)
    return str(info.value)


# --- round trips -------------------------------------------------------------------------------


def test_a_segment_event_is_laid_out_field_by_field() -> None:
    assert encode_event(SEGMENT) == SEGMENT_BYTES
    assert decode_event(SEGMENT_BYTES) == SEGMENT


def test_update_and_delete_events_are_laid_out_field_by_field() -> None:
    head = "0006" + b"orders".hex() + "000102030405060708090a0b0c0d0e0f" + "00000007"
    assert (
        encode_event(UPDATE)
        == bytes.fromhex(
            "0001" + head + "101112131415161718191a1b1c1d1e1f"
            "00000004"  # broker id
            "0000000000000005"  # event timestamp
            "ffffffff"  # no custom metadata
            "02"  # DELETE_SEGMENT_STARTED
        )
    )
    assert (
        encode_event(DELETE)
        == bytes.fromhex(
            "0002" + head + "00000005"  # broker id
            "0000000000000006"  # event timestamp
            "01"  # DELETE_PARTITION_STARTED
        )
    )


@given(events)
def test_every_event_round_trips(event: MetadataEvent) -> None:
    data = encode_event(event)
    assert data[0] == FORMAT_VERSION
    assert decode_event(data) == event
    assert decode_event(bytearray(data)) == event
    assert decode_event(memoryview(b"xx" + data)[2:]) == event


def test_decoding_accepts_any_byte_buffer() -> None:
    spread = bytes(byte for value in SEGMENT_BYTES for byte in (value, 0xEE))
    assert decode_event(memoryview(spread)[::2]) == SEGMENT
    rows = memoryview(SEGMENT_BYTES).cast("B", (2, len(SEGMENT_BYTES) // 2))
    assert decode_event(rows) == SEGMENT


@given(segment_metadata())
def test_segment_metadata_keeps_every_field(event: RemoteLogSegmentMetadata) -> None:
    decoded = decode_event(encode_event(event))
    assert isinstance(decoded, RemoteLogSegmentMetadata)
    assert decoded.topic_id_partition.topic == event.topic_id_partition.topic
    assert decoded.segment_leader_epochs == event.segment_leader_epochs
    assert decoded.custom_metadata == event.custom_metadata
    assert decoded.state is event.state
    assert decoded.txn_idx_empty is event.txn_idx_empty


def test_empty_custom_metadata_is_not_none() -> None:
    event = RemoteLogSegmentMetadataUpdate(
        SEGMENT.remote_log_segment_id, 5, CustomMetadata(b""), UPDATE.state, 4
    )
    decoded = decode_event(encode_event(event))
    assert isinstance(decoded, RemoteLogSegmentMetadataUpdate)
    assert decoded.custom_metadata == CustomMetadata(b"")


def test_decoded_events_of_one_partition_share_its_identity() -> None:
    first, second = decode_event(SEGMENT_BYTES), decode_event(encode_event(DELETE))
    assert first.topic_id_partition == TIP
    assert first.topic_id_partition is second.topic_id_partition


def test_encoding_rejects_values_the_format_cannot_hold() -> None:
    with pytest.raises(ValueError, match="cannot encode"):
        encode_event(attrs.evolve(SEGMENT, broker_id=1 << 31))
    with pytest.raises(ValueError, match="32767"):
        long_name = TopicIdPartition.of(TIP.topic_id, "é" * 20_000, 0)
        encode_event(attrs.evolve(DELETE, topic_id_partition=long_name))
    with pytest.raises(TypeError, match="not a remote log metadata event"):
        encode_event(TIP)  # type: ignore[arg-type]


# --- rejected input ----------------------------------------------------------------------------


def test_a_future_format_version_is_rejected_clearly() -> None:
    future = bytes([FORMAT_VERSION + 1]) + SEGMENT_BYTES[1:]
    assert rejected(future) == (
        f"unknown metadata event format version {FORMAT_VERSION + 1}; "
        f"only version {FORMAT_VERSION} is supported"
    )
    assert "version 255" in rejected(b"\xff")


def test_an_unknown_event_type_is_rejected() -> None:
    message = rejected(b"\x00\x03" + SEGMENT_BYTES[2:])
    assert message.startswith("unknown metadata event type 3")
    assert "0 (segment metadata), 1 (segment update), 2 (partition delete)" in message
    assert "type 9" in rejected(b"\x00\x09")


def test_empty_and_short_heads_are_truncated() -> None:
    assert rejected(b"") == (
        "truncated metadata event: 1 bytes missing in field 'format version' at byte 0"
    )
    assert rejected(b"\x00") == (
        "truncated metadata event: 1 bytes missing in field 'event type' at byte 1"
    )
    assert rejected(b"\x00\x02\x00") == (
        "truncated partition delete event: 1 bytes missing in field 'topic name length' at byte 2"
    )


def test_truncation_names_the_field_and_the_missing_bytes() -> None:
    # 'end offset' starts at BODY + 16 + 4 + 16 + 8; keep 3 of its 8 bytes.
    end_offset_at = BODY + 44
    message = rejected(SEGMENT_BYTES[: end_offset_at + 3])
    assert message == (
        f"truncated segment metadata event: 5 bytes missing in field 'end offset' "
        f"at byte {end_offset_at}"
    )
    assert "missing in field 'txn index empty'" in rejected(SEGMENT_BYTES[:-1])
    assert "1 bytes missing in field 'state'" in rejected(encode_event(UPDATE)[:-1])
    assert "missing in field 'custom metadata length'" in rejected(encode_event(UPDATE)[:-5])


def test_every_truncation_of_every_event_type_is_rejected() -> None:
    for event in (SEGMENT, UPDATE, DELETE):
        data = encode_event(event)
        for length in range(len(data)):
            message = rejected(data[:length])
            assert "truncated" in message or "exceeds" in message, message


def test_trailing_bytes_are_rejected() -> None:
    size = len(SEGMENT_BYTES)
    assert rejected(SEGMENT_BYTES + b"\x00\x00") == (
        f"2 trailing bytes after the segment metadata event (it ends at byte {size})"
    )
    assert "1 trailing bytes after the partition delete event" in rejected(
        encode_event(DELETE) + b"!"
    )
    assert "trailing bytes after the segment update event" in rejected(encode_event(UPDATE) + b"!")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (segment_bytes(state=4), "invalid segment state id 4"),
        (segment_bytes(state=-1), "invalid segment state id -1"),
        (segment_bytes(txn=2), "invalid txn index empty flag 2"),
    ],
)
def test_invalid_enum_ids_are_rejected(data: bytes, expected: str) -> None:
    assert expected in rejected(data)


def test_invalid_state_ids_of_updates_and_deletes_are_rejected() -> None:
    assert "invalid segment state id 7" in rejected(encode_event(UPDATE)[:-1] + b"\x07")
    assert "invalid partition delete state id 3" in rejected(encode_event(DELETE)[:-1] + b"\x03")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (segment_bytes(name_length=-1), "negative topic name length -1"),
        (segment_bytes(epoch_count=-1), "negative leader epoch count -1"),
        (segment_bytes(custom_length=-2), "negative custom metadata length -2"),
    ],
)
def test_negative_counts_and_lengths_are_rejected(data: bytes, expected: str) -> None:
    assert expected in rejected(data)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (segment_bytes(name_length=0x7FFF), "topic name length 32767 exceeds the"),
        (
            segment_bytes(epoch_count=(1 << 31) - 1),
            "leader epoch count 2147483647 needs 25769803764 bytes and exceeds the",
        ),
        (segment_bytes(custom_length=(1 << 31) - 1), "custom metadata length 2147483647 exceeds"),
    ],
)
def test_lengths_beyond_the_event_are_rejected(data: bytes, expected: str) -> None:
    assert expected in rejected(data)


def test_a_topic_name_that_is_not_utf8_is_rejected() -> None:
    assert "topic name is not valid UTF-8" in rejected(segment_bytes(name=b"\xff\xfe"))


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (segment_bytes(name=b""), "topic must be a non-empty string"),
        (segment_bytes(partition=-1), "partition must be a non-negative integer"),
        (segment_bytes(start=10, end=5, epochs=[(0, 10)]), "end_offset 5 is below start_offset 10"),
        (segment_bytes(epochs=[]), "segment_leader_epochs must not be empty"),
        (segment_bytes(epochs=[(0, 500)]), "outside the segment"),
        (segment_bytes(start=-5, epochs=[(0, 0)]), "start_offset must be a non-negative"),
    ],
)
def test_values_the_model_rejects_are_format_errors(data: bytes, expected: str) -> None:
    message = rejected(data)
    assert message.startswith("segment metadata event holds values the model rejects")
    assert expected in message


def test_an_update_back_to_copy_started_is_rejected() -> None:
    message = rejected(encode_event(UPDATE)[:-1] + b"\x00")
    assert message.startswith("segment update event holds values the model rejects")
    assert "COPY_SEGMENT_STARTED" in message


def test_format_errors_are_value_errors() -> None:
    with pytest.raises(ValueError):
        decode_event(b"")


# --- fuzzing -----------------------------------------------------------------------------------


@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_format_errors(data: bytes) -> None:
    with contextlib.suppress(MetadataFormatError):
        decode_event(data)


@given(st.binary(max_size=120), st.sampled_from([0, 1, 2]))
def test_arbitrary_bodies_raise_only_format_errors(body: bytes, event_type: int) -> None:
    with contextlib.suppress(MetadataFormatError):
        decode_event(bytes([FORMAT_VERSION, event_type]) + body)


@given(events, st.data())
def test_damaged_events_raise_only_format_errors(event: MetadataEvent, data: st.DataObject) -> None:
    damaged = bytearray(encode_event(event))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(damaged) - 1))
        damaged[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(damaged) + 2))
    damaged = damaged[:cut] + b"\x00" * max(0, cut - len(damaged))
    try:
        decoded = decode_event(damaged)
    except MetadataFormatError:
        return
    assert isinstance(
        decoded,
        RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate | RemotePartitionDeleteMetadata,
    )
