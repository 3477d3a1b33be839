"""The domain model: validation on construction, Kafka's state machines, named constructors."""

from __future__ import annotations

import itertools
from pathlib import Path

import attrs
import pytest
from tierlog.errors import CustomMetadataSizeLimitExceededError, InvalidStateTransitionError
from tierlog.model import (
    CustomMetadata,
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteState,
    TopicIdPartition,
    TopicPartition,
    Uuid,
    check_transition,
)

S = RemoteLogSegmentState
D = RemotePartitionDeleteState
TIP = TopicIdPartition.of(Uuid.from_longs(1, 2), "orders", 3)


def metadata(**changes: object) -> RemoteLogSegmentMetadata:
    fields: dict[str, object] = dict(
        remote_log_segment_id=RemoteLogSegmentId(TIP, Uuid.from_longs(5, 6)),
        start_offset=100,
        end_offset=199,
        max_timestamp_ms=5000,
        broker_id=1,
        event_timestamp_ms=6000,
        segment_size_in_bytes=4096,
        segment_leader_epochs={3: 150, 2: 100},
    )
    fields.update(changes)
    return RemoteLogSegmentMetadata(**fields)  # type: ignore[arg-type]


def test_uuid_text_form_matches_kafka() -> None:
    # Kafka prints Uuid(0, 1) as base64url of 15 zero bytes and a 1, without padding.
    assert str(Uuid.from_longs(0, 1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    negative = Uuid.from_longs(-1, -2)
    assert negative.most_significant_bits == -1 and negative.least_significant_bits == -2
    fresh = Uuid.random()
    assert Uuid.from_string(str(fresh)) == fresh
    assert not str(fresh).startswith("-")


@pytest.mark.parametrize(
    "text", ["", "short", "A" * 23, "!!!!!!!!!!!!!!!!!!!!!!", "AAAAAAAAAAAAAAAAAAAAA/"]
)
def test_bad_uuid_text_is_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        Uuid.from_string(text)


def test_partitions_validate_and_are_hashable_values() -> None:
    with pytest.raises(ValueError, match="partition must be a non-negative integer"):
        TopicPartition("t", -1)
    with pytest.raises(ValueError, match="topic"):
        TopicPartition("", 0)
    assert {TopicPartition("t", 1), TopicPartition("t", 1)} == {TopicPartition("t", 1)}
    assert TIP.topic == "orders" and TIP.partition == 3
    assert len({RemoteLogSegmentId.generate_new(TIP) for _ in range(50)}) == 50


KAFKA_SEGMENT_RULES = {
    (None, S.COPY_SEGMENT_STARTED),
    (S.COPY_SEGMENT_STARTED, S.COPY_SEGMENT_FINISHED),
    (S.COPY_SEGMENT_STARTED, S.DELETE_SEGMENT_STARTED),
    (S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED),
    (S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_FINISHED),
} | {(state, state) for state in S}


@pytest.mark.parametrize("source,target", list(itertools.product([None, *S], S)))
def test_segment_state_machine_matches_kafka(source: S | None, target: S) -> None:
    allowed = (source, target) in KAFKA_SEGMENT_RULES
    assert S.is_valid_transition(source, target) is allowed
    if allowed:
        check_transition(source, target)
    else:
        with pytest.raises(InvalidStateTransitionError, match=target.name):
            check_transition(source, target)


def test_partition_delete_state_machine() -> None:
    assert D.is_valid_transition(None, D.DELETE_PARTITION_MARKED)
    assert not D.is_valid_transition(None, D.DELETE_PARTITION_STARTED)
    assert D.is_valid_transition(D.DELETE_PARTITION_MARKED, D.DELETE_PARTITION_STARTED)
    assert D.is_valid_transition(D.DELETE_PARTITION_STARTED, D.DELETE_PARTITION_STARTED)
    assert not D.is_valid_transition(D.DELETE_PARTITION_MARKED, D.DELETE_PARTITION_FINISHED)
    assert not D.is_valid_transition(D.DELETE_PARTITION_FINISHED, D.DELETE_PARTITION_MARKED)
    with pytest.raises(InvalidStateTransitionError):
        check_transition(S.COPY_SEGMENT_STARTED, D.DELETE_PARTITION_MARKED)


def test_state_ids_are_kafkas_wire_ids() -> None:
    assert [s.value for s in S] == [0, 1, 2, 3]
    assert S.for_id(2) is S.DELETE_SEGMENT_STARTED
    with pytest.raises(ValueError, match="unknown remote log segment state id 9"):
        S.for_id(9)


def test_segment_metadata_keeps_epochs_sorted_and_answers_epoch_ranges() -> None:
    meta = metadata()
    assert meta.segment_leader_epochs == ((2, 100), (3, 150))
    assert meta.leader_epochs == {2: 100, 3: 150}
    assert meta.end_offset_for_epoch(2) == 149
    assert meta.end_offset_for_epoch(3) == 199
    assert meta.end_offset_for_epoch(7) is None
    assert hash(meta) == hash(metadata())


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"start_offset": -1}, "start_offset must be a non-negative integer"),
        ({"end_offset": 50}, "end_offset 50 is below start_offset 100"),
        ({"segment_leader_epochs": {}}, "must not be empty"),
        ({"segment_leader_epochs": {1: 99}}, "outside the segment"),
        ({"segment_leader_epochs": {1: 150, 2: 120}}, "must not decrease"),
        ({"segment_size_in_bytes": "big"}, "segment_size_in_bytes"),
        ({"custom_metadata": b"raw"}, "custom_metadata"),
    ],
)
def test_invalid_segment_metadata_is_rejected_with_the_field_named(
    changes: dict[str, object], message: str
) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        metadata(**changes)


def test_updates_apply_event_fields_and_never_restart_a_copy() -> None:
    meta = metadata()
    update = RemoteLogSegmentMetadataUpdate(
        meta.remote_log_segment_id, 7000, CustomMetadata(b"key"), S.COPY_SEGMENT_FINISHED, 2
    )
    finished = meta.create_with_updates(update)
    assert (finished.state, finished.broker_id, finished.event_timestamp_ms) == (
        S.COPY_SEGMENT_FINISHED,
        2,
        7000,
    )
    assert finished.custom_metadata == CustomMetadata(b"key")
    assert (finished.start_offset, finished.segment_leader_epochs) == (
        meta.start_offset,
        meta.segment_leader_epochs,
    )
    with pytest.raises(InvalidStateTransitionError, match="COPY_SEGMENT_STARTED"):
        RemoteLogSegmentMetadataUpdate(
            meta.remote_log_segment_id, 1, None, S.COPY_SEGMENT_STARTED, 0
        )
    other = attrs.evolve(update, remote_log_segment_id=RemoteLogSegmentId.generate_new(TIP))
    with pytest.raises(ValueError, match="applied to"):
        meta.create_with_updates(other)


def test_custom_metadata_cap_is_kafkas_128_bytes() -> None:
    CustomMetadata(b"x" * 128).check_size()
    with pytest.raises(CustomMetadataSizeLimitExceededError, match=r"129 bytes.*128"):
        CustomMetadata(b"x" * 129).check_size()
    CustomMetadata(b"x" * 200).check_size(max_bytes=256)


def test_log_segment_data_requires_all_but_the_transaction_index(tmp_path: Path) -> None:
    data = LogSegmentData(
        log_segment=str(tmp_path / "a.log"),
        offset_index=tmp_path / "a.index",
        time_index=tmp_path / "a.timeindex",
        transaction_index=None,
        producer_snapshot_index=tmp_path / "a.snapshot",
        leader_epoch_index=b"0\n0\n",
    )
    assert data.log_segment == tmp_path / "a.log"
    assert data.index_path(IndexType.TRANSACTION) is None
    assert data.index_path(IndexType.TIMESTAMP) == tmp_path / "a.timeindex"
    with pytest.raises(ValueError, match="missing"):
        LogSegmentData(None, "i", "t", None, "s", b"")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="leader_epoch_index"):
        LogSegmentData("l", "i", "t", None, "s", "text")  # type: ignore[arg-type]


def test_index_types_follow_kafkas_order_and_suffixes() -> None:
    assert [t.name for t in IndexType] == [
        "OFFSET",
        "TIMESTAMP",
        "PRODUCER_SNAPSHOT",
        "TRANSACTION",
        "LEADER_EPOCH",
    ]
    assert IndexType.TRANSACTION.suffix == ".txnindex"
