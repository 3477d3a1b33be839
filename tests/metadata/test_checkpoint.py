"""The broker's remote log metadata checkpoint file."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tierlog.errors import KafkaStorageError, MetadataFormatError
from tierlog.metadata.checkpoint import (
    CHECKPOINT_FILE_NAME,
    EpochSnapshot,
    PartitionSnapshot,
    read_checkpoint,
    write_checkpoint,
)
from tierlog.metadata.serde import encode_event
from tierlog.model import (
    CustomMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
    Uuid,
)
from tierlog.records import crc32c

from .support import DELETE_STARTED, FINISHED, OTHER_TIP, TIP, Segments
from .test_serde import segment_metadata, topic_id_partitions, uuids

HEADER = struct.Struct(">4sHQI")


def snapshot_of(
    tip: TopicIdPartition, consumed_offset: int = 41, *, segment_count: int = 2
) -> PartitionSnapshot:
    """A partition with finished segments of epochs 0 and 1, one being deleted, and custom
    metadata on the last."""
    make = Segments()
    segments = [
        attrs.evolve(
            make.new(100 * i, 100 * i + 99, {i % 2: 100 * i}, partition=tip), state=FINISHED
        )
        for i in range(segment_count)
    ]
    if segments:
        segments[-1] = attrs.evolve(segments[-1], custom_metadata=CustomMetadata(b"\x00meta"))
        segments[0] = attrs.evolve(segments[0], state=DELETE_STARTED)
    epochs = [
        EpochSnapshot(
            epoch,
            max(
                (s.end_offset for s in segments if s.leader_epochs.get(epoch) is not None),
                default=None,
            ),
            [
                (s.start_offset, s.remote_log_segment_id.id)
                for s in segments
                if epoch in s.leader_epochs and s.state is FINISHED
            ],
        )
        for epoch in (0, 1)
    ]
    return PartitionSnapshot(tip, consumed_offset, segments, epochs, None)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / CHECKPOINT_FILE_NAME


@pytest.fixture
def small(path: Path) -> bytes:
    """The bytes of a small checkpoint: one partition with one segment."""
    write_checkpoint(path, [snapshot_of(TIP, segment_count=1)])
    return path.read_bytes()


def rejected(path: Path) -> str:
    with pytest.raises(MetadataFormatError) as info:
        read_checkpoint(path)
    message = str(info.value)
    assert str(path) in message
    return message


def with_crc(body: bytes | bytearray) -> bytes:
    """``body`` (everything but the checksum) followed by its CRC-32C."""
    return bytes(body) + struct.pack(">I", crc32c(bytes(body)))


# --- round trips -------------------------------------------------------------------------------


def test_round_trip(path: Path) -> None:
    deleting = RemotePartitionDeleteMetadata(
        OTHER_TIP, RemotePartitionDeleteState.DELETE_PARTITION_STARTED, 1_000, 3
    )
    empty = TopicIdPartition.of(Uuid.random(), "payments-ü", 4)
    snapshots = [
        snapshot_of(TIP, 41, segment_count=5),
        attrs.evolve(snapshot_of(OTHER_TIP, 7), delete_state=deleting),
        PartitionSnapshot(empty, -1, (), (EpochSnapshot(3, None, ()),), None),
    ]
    write_checkpoint(path, snapshots)
    assert read_checkpoint(path) == {s.topic_id_partition: s for s in snapshots}
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind


def test_round_trip_of_no_partitions(path: Path) -> None:
    write_checkpoint(path, [])
    assert read_checkpoint(path) == {}


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    topic_id_partitions.flatmap(
        lambda tip: st.tuples(
            st.just(tip),
            st.lists(
                segment_metadata(st.builds(RemoteLogSegmentId, st.just(tip), uuids)),
                max_size=4,
                unique_by=lambda s: s.remote_log_segment_id,
            ),
        )
    ),
    st.integers(-1, 1 << 62),
)
def test_any_segments_round_trip(
    path: Path,
    partition: tuple[TopicIdPartition, list[RemoteLogSegmentMetadata]],
    consumed_offset: int,
) -> None:
    tip, segments = partition
    snapshot = PartitionSnapshot(tip, consumed_offset, segments, (), None)
    write_checkpoint(path, [snapshot])
    assert read_checkpoint(path) == {tip: snapshot}


def test_restored_epochs_reuse_the_segments_ids(path: Path) -> None:
    write_checkpoint(path, [snapshot_of(TIP)])
    restored = read_checkpoint(path)[TIP]
    (served_offset, served_id), *_ = restored.epochs[1].referenced
    (segment,) = [s for s in restored.segments if s.start_offset == served_offset]
    assert segment.remote_log_segment_id.id is served_id


def test_missing_file_is_an_empty_checkpoint(path: Path) -> None:
    assert read_checkpoint(path) == {}


# --- what a snapshot may hold ------------------------------------------------------------------


def test_snapshot_rejects_segments_of_another_partition() -> None:
    foreign = Segments().new(0, 9, partition=OTHER_TIP)
    with pytest.raises(ValueError, match="is not of"):
        PartitionSnapshot(TIP, 0, [foreign], (), None)
    deleting = RemotePartitionDeleteMetadata(
        OTHER_TIP, RemotePartitionDeleteState.DELETE_PARTITION_MARKED, 1, 1
    )
    with pytest.raises(ValueError, match="delete state"):
        PartitionSnapshot(TIP, 0, (), (), deleting)
    with pytest.raises(ValueError, match="consumed_offset"):
        PartitionSnapshot(TIP, -2, (), (), None)
    unknown = EpochSnapshot(0, 9, [(0, Uuid.random())])
    with pytest.raises(ValueError, match="which the snapshot does not hold"):
        PartitionSnapshot(TIP, 0, (), [unknown], None)


def test_epoch_snapshot_rejects_unordered_or_negative_values() -> None:
    with pytest.raises(ValueError, match="not strictly increasing"):
        EpochSnapshot(0, 10, [(5, Uuid.random()), (5, Uuid.random())])
    with pytest.raises(ValueError, match="leader epoch"):
        EpochSnapshot(-1, None, ())
    with pytest.raises(ValueError, match="highest_log_offset"):
        EpochSnapshot(0, -1, ())


def test_two_snapshots_of_one_partition_are_refused(path: Path) -> None:
    with pytest.raises(ValueError, match="two snapshots"):
        write_checkpoint(path, [snapshot_of(TIP), snapshot_of(TIP)])
    assert not path.exists()


# --- damaged files -----------------------------------------------------------------------------


def test_every_flipped_byte_is_detected(path: Path, small: bytes) -> None:
    for position in range(len(small)):
        damaged = bytearray(small)
        damaged[position] ^= 0xFF
        path.write_bytes(damaged)
        rejected(path)


def test_every_truncation_is_detected(path: Path, small: bytes) -> None:
    for length in range(len(small)):
        path.write_bytes(small[:length])
        message = rejected(path)
        assert "truncated" in message or "checksum" in message, message
    path.write_bytes(small[:-1])
    assert "truncated: 1 bytes missing from the end" in rejected(path)


def test_trailing_bytes_are_detected(path: Path, small: bytes) -> None:
    path.write_bytes(small + b"\x00")
    assert "1 trailing bytes after the checksum" in rejected(path)


def test_a_checksum_mismatch_is_named(path: Path, small: bytes) -> None:
    damaged = bytearray(small)
    damaged[HEADER.size + 3] ^= 0x01
    path.write_bytes(damaged)
    assert "checksum mismatch" in rejected(path)


def test_another_format_version_is_rejected(path: Path, small: bytes) -> None:
    magic, _version, length, count = HEADER.unpack_from(small)
    future = HEADER.pack(magic, 1, length, count) + small[HEADER.size : -4]
    path.write_bytes(with_crc(future))
    assert "unsupported checkpoint format version 1; only 0 is read" in rejected(path)


def test_another_file_is_not_taken_for_a_checkpoint(path: Path) -> None:
    path.write_bytes(b"0\n1\norders 0 0\n" + bytes(20))
    assert "not a remote log metadata checkpoint" in rejected(path)


def test_entries_inconsistent_with_a_valid_checksum_are_rejected(path: Path, small: bytes) -> None:
    magic, version, length, _count = HEADER.unpack_from(small)
    body = small[HEADER.size : -4]
    path.write_bytes(with_crc(HEADER.pack(magic, version, length, 2) + body))
    assert "runs" in rejected(path) and "past the entries" in rejected(path)
    path.write_bytes(with_crc(HEADER.pack(magic, version, length, 0) + body))
    assert f"{length} bytes after the last of 0 entries" in rejected(path)


def test_a_repeated_partition_is_rejected(path: Path, small: bytes) -> None:
    magic, version, length, _count = HEADER.unpack_from(small)
    body = small[HEADER.size : -4]
    path.write_bytes(with_crc(HEADER.pack(magic, version, 2 * length, 2) + body + body))
    assert "repeats partition" in rejected(path)


def checkpoint_bytes(
    tip: TopicIdPartition,
    consumed_offset: int,
    delete_state: bytes | None,
    segments: list[bytes],
    epochs: list[tuple[int, int, list[tuple[int, Uuid]]]],
) -> bytes:
    """A one-partition checkpoint built by hand from the documented layout."""
    name = tip.topic.encode()
    entry = b"".join(
        [
            struct.pack(">h", len(name)),
            name,
            struct.pack(
                ">16siqi",
                tip.topic_id.value,
                tip.partition,
                consumed_offset,
                -1 if delete_state is None else len(delete_state),
            ),
            delete_state or b"",
            struct.pack(">I", len(segments)),
            *(struct.pack(">I", len(segment)) + segment for segment in segments),
            struct.pack(">I", len(epochs)),
            *(
                struct.pack(">iqI", epoch, highest, len(served))
                + b"".join(struct.pack(">q16s", o, u.value) for o, u in served)
                for epoch, highest, served in epochs
            ),
        ]
    )
    return with_crc(HEADER.pack(b"TLRM", 0, len(entry), 1) + entry)


def test_the_file_follows_the_documented_layout(path: Path) -> None:
    snapshot = snapshot_of(TIP, 41, segment_count=2)
    write_checkpoint(path, [snapshot])
    assert path.read_bytes() == checkpoint_bytes(
        TIP,
        41,
        None,
        [encode_event(segment) for segment in snapshot.segments],
        [
            (
                epoch.leader_epoch,
                -1 if epoch.highest_log_offset is None else epoch.highest_log_offset,
                list(epoch.referenced),
            )
            for epoch in snapshot.epochs
        ],
    )


def test_events_in_the_wrong_place_are_rejected(path: Path) -> None:
    segment = Segments().new(0, 9)
    update = encode_event(Segments().update(segment, FINISHED))
    path.write_bytes(checkpoint_bytes(TIP, 0, None, [update], []))
    assert "holds a RemoteLogSegmentMetadataUpdate as a segment" in rejected(path)
    path.write_bytes(checkpoint_bytes(TIP, 0, encode_event(segment), [], []))
    assert "holds a RemoteLogSegmentMetadata as its delete state" in rejected(path)


def test_undecodable_events_are_rejected_with_the_reason(path: Path) -> None:
    damaged = encode_event(Segments().new(0, 9))[:-1] + b"\x09"
    path.write_bytes(checkpoint_bytes(TIP, 0, None, [damaged], []))
    assert "invalid txn index empty flag 9" in rejected(path)


def test_values_the_model_rejects_are_format_errors(path: Path) -> None:
    served = [(5, Uuid.random()), (1, Uuid.random())]
    path.write_bytes(checkpoint_bytes(TIP, 0, None, [], [(0, 9, served)]))
    assert "holds values the model rejects" in rejected(path)
    path.write_bytes(checkpoint_bytes(TIP, -7, None, [], []))
    assert "consumed_offset" in rejected(path)
    not_utf8 = checkpoint_bytes(TopicIdPartition.of(TIP.topic_id, "ab", 0), 0, None, [], [])
    path.write_bytes(
        with_crc(not_utf8[: HEADER.size + 2] + b"\xff\xfe" + not_utf8[HEADER.size + 4 : -4])
    )
    assert "not valid UTF-8" in rejected(path)


# --- atomic replacement ------------------------------------------------------------------------


def test_a_failing_snapshot_leaves_the_old_file(path: Path, small: bytes) -> None:
    unencodable = attrs.evolve(snapshot_of(OTHER_TIP), consumed_offset=1 << 63)

    def snapshots() -> Iterator[PartitionSnapshot]:
        yield snapshot_of(TIP, 99)
        yield unencodable

    with pytest.raises(ValueError, match="cannot checkpoint"):
        write_checkpoint(path, snapshots())
    assert path.read_bytes() == small
    assert list(path.parent.iterdir()) == [path]


def test_a_failing_write_leaves_the_old_file(path: Path, small: bytes) -> None:
    path.with_name(path.name + ".tmp").mkdir()  # the temporary file cannot be created
    with pytest.raises(KafkaStorageError, match=CHECKPOINT_FILE_NAME):
        write_checkpoint(path, [snapshot_of(TIP, 99)])
    assert path.read_bytes() == small
    assert read_checkpoint(path)[TIP].consumed_offset == 41


def test_a_rewrite_replaces_the_whole_file(path: Path, small: bytes) -> None:
    write_checkpoint(path, [snapshot_of(OTHER_TIP, 5)])
    assert set(read_checkpoint(path)) == {OTHER_TIP}
