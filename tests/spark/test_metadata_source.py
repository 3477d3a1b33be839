"""Reading ``__remote_log_metadata`` offline, from log dirs written here in Kafka's format."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from tierlog.metadata.partitioner import metadata_partition
from tierlog.metadata.serde import encode_event
from tierlog.model import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
    Uuid,
)
from tierlog.records import RecordBatchBuilder
from tierlog_spark.metadata_source import load_remote_log_metadata

FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
TOPIC_ID = Uuid.random()
ORDERS = [TopicIdPartition.of(TOPIC_ID, "orders", n) for n in range(4)]
PAYMENTS = TopicIdPartition.of(Uuid.random(), "payments", 0)


def _segment(tip: TopicIdPartition, start: int, end: int) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        RemoteLogSegmentId.generate_new(tip), start, end, 0, 0, 1, 100, {0: start}
    )


def _finished(metadata: RemoteLogSegmentMetadata) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(metadata.remote_log_segment_id, 2, None, FINISHED, 0)


def _upload(tip: TopicIdPartition, start: int, end: int) -> list[object]:
    metadata = _segment(tip, start, end)
    return [metadata, _finished(metadata)]


def _write(
    log_dir: Path, partition: int, values: list[bytes], *, per_file: int = 3, torn: bool = False
) -> None:
    """Writes ``values`` as one-record batches, ``per_file`` per segment file."""
    directory = log_dir / f"__remote_log_metadata-{partition}"
    directory.mkdir(parents=True)
    for first in range(0, len(values), per_file):
        data = b""
        for offset in range(first, min(first + per_file, len(values))):
            builder = RecordBatchBuilder(base_offset=offset)
            builder.append(0, None, values[offset])
            data += builder.build()
        (directory / f"{first:020d}.log").write_bytes(data)
        (directory / f"{first:020d}.index").write_bytes(b"")
    if torn:
        last = sorted(directory.glob("*.log"))[-1]
        builder = RecordBatchBuilder(base_offset=len(values))
        builder.append(0, None, b"being written")
        with last.open("ab") as file:
            file.write(builder.build()[:-7])


def _encoded(events: list[object]) -> list[bytes]:
    return [encode_event(event) for event in events]  # type: ignore[arg-type]


def _finished_ranges(cache: object) -> list[tuple[int, int]]:
    return [
        (s.start_offset, s.end_offset)
        for s in cache.list_all_remote_log_segments()  # type: ignore[attr-defined]
        if s.state is FINISHED
    ]


def test_events_are_applied_per_user_partition_in_offset_order(tmp_path: Path) -> None:
    events = [*_upload(ORDERS[0], 0, 9), *_upload(ORDERS[1], 0, 4), *_upload(ORDERS[0], 10, 19)]
    _write(tmp_path / "logs", 0, _encoded(events))
    caches = load_remote_log_metadata([tmp_path / "logs"])
    assert _finished_ranges(caches[ORDERS[0]]) == [(0, 9), (10, 19)]
    assert _finished_ranges(caches[ORDERS[1]]) == [(0, 4)]
    assert all(cache.is_initialized for cache in caches.values())


def test_a_torn_last_batch_is_ignored(tmp_path: Path) -> None:
    _write(tmp_path / "logs", 0, _encoded(_upload(ORDERS[0], 0, 9)), torn=True)
    caches = load_remote_log_metadata([tmp_path / "logs"])
    assert _finished_ranges(caches[ORDERS[0]]) == [(0, 9)]


def test_the_fullest_copy_of_a_metadata_partition_is_read(tmp_path: Path) -> None:
    events = [*_upload(ORDERS[0], 0, 9), *_upload(ORDERS[0], 10, 19), *_upload(ORDERS[0], 20, 29)]
    _write(tmp_path / "broker-0", 0, _encoded(events[:4]))
    _write(tmp_path / "broker-1", 0, _encoded(events))
    _write(tmp_path / "broker-2", 0, _encoded(events[:2]))
    caches = load_remote_log_metadata([tmp_path / f"broker-{n}" for n in range(3)])
    assert _finished_ranges(caches[ORDERS[0]]) == [(0, 9), (10, 19), (20, 29)]


def test_undecodable_events_are_logged_and_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    values = _encoded(_upload(ORDERS[0], 0, 9))
    values.insert(1, b"\x07 not an event")
    _write(tmp_path / "logs", 0, values)
    with caplog.at_level(logging.ERROR):
        caches = load_remote_log_metadata([tmp_path / "logs"])
    assert _finished_ranges(caches[ORDERS[0]]) == [(0, 9)]
    (message,) = [r.getMessage() for r in caplog.records]
    assert "00000000000000000000.log offset 1" in message


def test_topics_filter_the_partitions_returned(tmp_path: Path) -> None:
    _write(tmp_path / "logs", 0, _encoded([*_upload(ORDERS[0], 0, 9), *_upload(PAYMENTS, 0, 9)]))
    caches = load_remote_log_metadata([tmp_path / "logs"], topics={"payments"})
    assert list(caches) == [PAYMENTS]


def test_a_finished_partition_deletion_forgets_earlier_segments(tmp_path: Path) -> None:
    deleted = RemotePartitionDeleteMetadata(
        ORDERS[0], RemotePartitionDeleteState.DELETE_PARTITION_FINISHED, 5, 0
    )
    events = [*_upload(ORDERS[0], 0, 9), deleted, *_upload(ORDERS[0], 0, 3)]
    _write(tmp_path / "logs", 0, _encoded(events))
    caches = load_remote_log_metadata([tmp_path / "logs"])
    assert _finished_ranges(caches[ORDERS[0]]) == [(0, 3)]


def test_with_the_partition_count_known_misplaced_events_are_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    candidates = [TopicIdPartition.of(TOPIC_ID, "orders", n) for n in range(64)]
    right = next(tip for tip in candidates if metadata_partition(tip, 2) == 0)
    wrong = next(tip for tip in candidates if metadata_partition(tip, 2) == 1)
    _write(tmp_path / "logs", 0, _encoded([*_upload(right, 0, 9), *_upload(wrong, 0, 9)]))
    with caplog.at_level(logging.WARNING):
        caches = load_remote_log_metadata([tmp_path / "logs"], num_partitions=2)
    assert list(caches) == [right]
    assert "belongs in another metadata partition" in caplog.text
    assert set(load_remote_log_metadata([tmp_path / "logs"])) == {right, wrong}


def test_a_partition_beyond_the_known_count_is_an_error(tmp_path: Path) -> None:
    _write(tmp_path / "logs", 4, _encoded(_upload(ORDERS[0], 0, 9)))
    with pytest.raises(ValueError, match=r"__remote_log_metadata-4 .* rlmm\.num\.partitions"):
        load_remote_log_metadata([tmp_path / "logs"], num_partitions=3)


def test_a_missing_log_dir_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="log dir"):
        load_remote_log_metadata([tmp_path / "nowhere"])
