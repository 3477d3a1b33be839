"""Real segment files for the storage tests: a ``.log`` plus its auxiliary files on local disk."""

from __future__ import annotations

import os
from pathlib import Path

import attrs
from tierlog.model import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
    Uuid,
)

INDEX_FILES = {
    IndexType.OFFSET: ".index",
    IndexType.TIMESTAMP: ".timeindex",
    IndexType.PRODUCER_SNAPSHOT: ".snapshot",
    IndexType.TRANSACTION: ".txnindex",
}


def record_batch_head(codec: int) -> bytes:
    """The first 23 bytes of a v2 record batch whose attributes name ``codec`` (4 = zstd)."""
    return bytes(16) + b"\x02" + bytes(4) + codec.to_bytes(2, "big")


def compressible(size: int) -> bytes:
    """Text-like bytes that zstd shrinks a lot."""
    line = b"offset=%08d key=customer-%04d value=order placed, status=ok\n"
    out = bytearray()
    number = 0
    while len(out) < size:
        out += line % (number, number % 977)
        number += 1
    return bytes(out[:size])


@attrs.define
class Segment:
    """One rolled segment on disk and the metadata that names it."""

    metadata: RemoteLogSegmentMetadata
    data: LogSegmentData
    payload: bytes
    indexes: dict[IndexType, bytes]

    @property
    def uuid(self) -> str:
        return str(self.metadata.remote_log_segment_id.id)

    def object_base(self, root: str) -> str:
        """The documented object name (without kind) under ``root``."""
        tip = self.metadata.topic_id_partition
        return (
            f"{root.rstrip('/')}/{tip.topic}-{tip.topic_id}/{tip.partition}/"
            f"{self.metadata.start_offset:020d}-{self.uuid}"
        )


def make_segment(
    directory: Path,
    *,
    payload: bytes | None = None,
    size: int = 4096 * 3 + 123,
    partition: TopicIdPartition | None = None,
    start_offset: int = 0,
    transaction_index: bytes | None = None,
    snapshot: bytes | None = None,
) -> Segment:
    """Write a segment's files into ``directory`` and return them with fresh metadata."""
    partition = partition or TopicIdPartition.of(Uuid.random(), "orders", 0)
    payload = os.urandom(size) if payload is None else payload
    directory.mkdir(parents=True, exist_ok=True)
    base = directory / f"{start_offset:020d}"
    log = base.with_suffix(".log")
    log.write_bytes(payload)
    indexes = {
        IndexType.OFFSET: os.urandom(8 * 12),
        IndexType.TIMESTAMP: os.urandom(12 * 12),
        IndexType.PRODUCER_SNAPSHOT: b"snapshot" + os.urandom(40) if snapshot is None else snapshot,
        IndexType.LEADER_EPOCH: f"0\n1\n0 {start_offset}\n".encode(),
    }
    paths = {}
    for index_type, suffix in INDEX_FILES.items():
        if index_type is IndexType.TRANSACTION:
            if transaction_index is None:
                continue
            indexes[index_type] = transaction_index
        path = base.with_suffix(suffix)
        path.write_bytes(indexes[index_type])
        paths[index_type] = path
    metadata = RemoteLogSegmentMetadata(
        remote_log_segment_id=RemoteLogSegmentId.generate_new(partition),
        start_offset=start_offset,
        end_offset=start_offset + 99,
        max_timestamp_ms=1_700_000_000_000,
        broker_id=0,
        event_timestamp_ms=1_700_000_000_000,
        segment_size_in_bytes=len(payload),
        segment_leader_epochs={0: start_offset},
    )
    data = LogSegmentData(
        log_segment=log,
        offset_index=paths[IndexType.OFFSET],
        time_index=paths[IndexType.TIMESTAMP],
        transaction_index=paths.get(IndexType.TRANSACTION),
        producer_snapshot_index=paths[IndexType.PRODUCER_SNAPSHOT],
        leader_epoch_index=indexes[IndexType.LEADER_EPOCH],
    )
    return Segment(metadata, data, payload, indexes)
