"""The leader-epoch lineage check that keeps a deposed leader's uploads out of retention."""

from __future__ import annotations

from tierlog.log import EpochEntry
from tierlog.model import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
    Uuid,
)
from tierlog.remote.expiration import within_lineage

TIP = TopicIdPartition.of(Uuid.random(), "t", 0)


def segment(start: int, end: int, epochs: dict[int, int]) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        RemoteLogSegmentId.generate_new(TIP), start, end, 0, 0, 0, 100, epochs
    )


LINEAGE = [EpochEntry(0, 0), EpochEntry(2, 100), EpochEntry(5, 200)]


def test_segments_of_the_lineage_are_valid() -> None:
    assert within_lineage(segment(0, 99, {0: 0}), LINEAGE, 300)
    assert within_lineage(segment(50, 149, {0: 50, 2: 100}), LINEAGE, 300)
    assert within_lineage(segment(150, 249, {2: 150, 5: 200}), LINEAGE, 300)


def test_segments_of_another_lineage_are_not() -> None:
    assert not within_lineage(segment(50, 149, {0: 50, 1: 100}), LINEAGE, 300)  # unknown epoch
    assert not within_lineage(segment(50, 149, {0: 50, 2: 120}), LINEAGE, 300)  # epoch moved
    assert not within_lineage(segment(50, 120, {0: 50}), LINEAGE, 300)  # epoch 0 ended at 99
    assert not within_lineage(segment(250, 320, {5: 250}), LINEAGE, 300)  # past the log end
    assert not within_lineage(segment(300, 320, {6: 300}), LINEAGE, 400)  # a newer epoch


def test_epochs_before_a_truncated_lineage_start_are_ignored() -> None:
    truncated = [EpochEntry(2, 120), EpochEntry(5, 200)]  # log start moved to 120
    assert within_lineage(segment(50, 149, {0: 50, 2: 100}), truncated, 300)
    assert not within_lineage(segment(0, 99, {0: 0}), truncated, 300)
