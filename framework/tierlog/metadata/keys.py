"""The record keys of ``__remote_log_metadata`` events, which let the topic be compacted.

The topic is compacted, so what survives is the latest record per key. Each event is keyed by
what it describes *and* the state it moves that thing to:

    segment key    kind 0 (uint8) | topic id (16) | partition (int32) | segment id (16) |
                   segment state (int8)
    partition key  kind 1 (uint8) | topic id (16) | partition (int32) | delete state (int8)

A live segment therefore keeps one record per state it went through (its full metadata at
COPY_SEGMENT_STARTED, then at most one update each for COPY_SEGMENT_FINISHED and
DELETE_SEGMENT_STARTED), and the records that survive compaction are a subsequence of the
history in its original order. Replaying them rebuilds what replaying the whole history would,
except for what only deleted segments contributed (an epoch's highest tiered offset once every
segment of the epoch is gone, which the checkpoint keeps).

Once a segment reaches DELETE_SEGMENT_FINISHED, the writer follows that event with a tombstone
for every key of the segment, so compaction removes the segment from the topic altogether;
DELETE_PARTITION_FINISHED likewise tombstones the partition's keys and those of every segment
still listed for it. A partition whose remote data is all deleted leaves nothing to replay.
Retrying an event in the same state reuses its key, so retries do not grow the topic either.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Final

from ..model import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)
from .serde import MetadataEvent

__all__ = ["event_key", "partition_keys", "segment_keys"]

_SEGMENT_KIND: Final = 0
_PARTITION_KIND: Final = 1
_SEGMENT_KEY = struct.Struct(">B16si16sb")
_PARTITION_KEY = struct.Struct(">B16sib")


def _segment_key(segment_id: RemoteLogSegmentId, state: RemoteLogSegmentState) -> bytes:
    tip = segment_id.topic_id_partition
    return _SEGMENT_KEY.pack(
        _SEGMENT_KIND, tip.topic_id.value, tip.partition, segment_id.id.value, state.value
    )


def _partition_key(tip: TopicIdPartition, state: RemotePartitionDeleteState) -> bytes:
    return _PARTITION_KEY.pack(_PARTITION_KIND, tip.topic_id.value, tip.partition, state.value)


def event_key(event: MetadataEvent) -> bytes:
    """The key ``event`` is published under."""
    if isinstance(event, RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate):
        return _segment_key(event.remote_log_segment_id, event.state)
    if isinstance(event, RemotePartitionDeleteMetadata):
        return _partition_key(event.topic_id_partition, event.state)
    raise TypeError(f"not a remote log metadata event: {event!r}")


def segment_keys(segment_id: RemoteLogSegmentId) -> list[bytes]:
    """Every key a segment's events can have: what its deletion tombstones."""
    return [_segment_key(segment_id, state) for state in RemoteLogSegmentState]


def partition_keys(
    tip: TopicIdPartition, segment_ids: Iterable[RemoteLogSegmentId] = ()
) -> list[bytes]:
    """Every key of a partition's deletion events, then those of ``segment_ids``: what a
    finished partition deletion tombstones."""
    keys = [_partition_key(tip, state) for state in RemotePartitionDeleteState]
    for segment_id in segment_ids:
        keys += segment_keys(segment_id)
    return keys
