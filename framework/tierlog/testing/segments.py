"""Real rolled segments on local disk, as the log hands them to ``copy_log_segment_data``.

The ``.log`` holds real record batches, the indexes point at their real positions, and the
producer snapshot and leader-epoch checkpoint are in Kafka's formats, so a plugin that parses,
transforms or validates what it uploads is tested on what a broker really gives it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import attrs

from ..log.epoch_cache import EpochEntry, LeaderEpochCheckpointFile
from ..log.offset_index import OffsetIndex
from ..log.snapshot import EMPTY_SNAPSHOT, SnapshotEntry, encode_snapshot
from ..log.time_index import TimeIndex
from ..log.txn_index import AbortedTxn
from ..model import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
    Uuid,
)
from ..records import Compression, ControlType, RecordBatchBuilder, build_control_batch

BASE_TIMESTAMP_MS = 1_700_000_000_000
PRODUCER_ID = 4242


@attrs.frozen
class LocalSegment:
    """One segment's files, the bytes in them, and the metadata of its upload."""

    metadata: RemoteLogSegmentMetadata
    data: LogSegmentData
    log: bytes
    #: Byte position of each record batch in the ``.log``.
    batch_positions: tuple[int, ...]
    #: The expected content of every index the segment has (no TRANSACTION key without one).
    indexes: Mapping[IndexType, bytes]

    @property
    def size(self) -> int:
        return len(self.log)

    @property
    def segment_id(self) -> RemoteLogSegmentId:
        return self.metadata.remote_log_segment_id


def build_segment(
    directory: Path,
    *,
    partition: TopicIdPartition | None = None,
    base_offset: int = 0,
    batches: int = 8,
    records_per_batch: int = 10,
    value_size: int = 100,
    leader_epochs: Mapping[int, int] | None = None,
    aborted_transactions: bool = False,
    segment_id: RemoteLogSegmentId | None = None,
    compression: Compression | str = Compression.NONE,
    transactional: bool = False,
    control_records: bool = False,
    empty_producer_snapshot: bool = False,
) -> LocalSegment:
    """Write a segment's files into ``directory`` (created) and describe its upload.

    ``leader_epochs`` maps each epoch to its first offset (default: epoch 0 from
    ``base_offset``); ``aborted_transactions`` adds a transaction index (without it the segment
    has none, as most segments); ``segment_id`` reuses an upload's id, as a retried copy does.
    ``compression`` names the codec of every batch (a ``Compression`` or Kafka's name:
    ``"zstd"``); ``transactional`` writes the batches as one transactional producer's, and
    ``control_records`` ends each transaction with a COMMIT marker, a control batch of its own
    (so ``batches`` counts data batches). ``empty_producer_snapshot`` gives the segment the
    empty, segment-aligned snapshot the runtime writes for a segment that has none (KIP-952).
    """
    if batches < 1 or records_per_batch < 1:
        raise ValueError("a rolled segment holds at least one record")
    if control_records and not transactional:
        raise ValueError("control records end transactions: set transactional too")
    codec = Compression.from_name(compression) if isinstance(compression, str) else compression
    if segment_id is None:
        partition = partition or TopicIdPartition.of(Uuid.random(), "kit-orders", 0)
        segment_id = RemoteLogSegmentId.generate_new(partition)
    epochs = dict(leader_epochs or {0: base_offset})
    per_batch = records_per_batch + (1 if control_records else 0)
    end_offset = base_offset + batches * per_batch - 1

    log = bytearray()
    positions: list[int] = []
    offset_index = bytearray()
    time_index = bytearray()
    for number in range(batches):
        first = base_offset + number * per_batch
        epoch = _epoch_at(epochs, first)
        builder = RecordBatchBuilder(
            codec,
            base_offset=first,
            partition_leader_epoch=epoch,
            producer_id=PRODUCER_ID if transactional else -1,
            producer_epoch=0 if transactional else -1,
            base_sequence=number * records_per_batch if transactional else -1,
            is_transactional=transactional,
        )
        for offset in range(first, first + records_per_batch):
            builder.append(
                BASE_TIMESTAMP_MS + offset,
                f"key-{offset}".encode(),
                os.urandom(value_size),
                [("kit", str(number).encode())],
            )
        written = [builder.build()]
        if control_records:
            marker = first + records_per_batch
            written.append(
                build_control_batch(
                    ControlType.COMMIT,
                    producer_id=PRODUCER_ID,
                    producer_epoch=0,
                    timestamp=BASE_TIMESTAMP_MS + marker,
                    base_offset=marker,
                    partition_leader_epoch=epoch,
                )
            )
        batch_first = first
        for batch in written:
            positions.append(len(log))
            offset_index += OffsetIndex.ENTRY.pack(batch_first - base_offset, len(log))
            last = first + per_batch - 1 if batch is written[-1] else first + records_per_batch - 1
            time_index += TimeIndex.ENTRY.pack(BASE_TIMESTAMP_MS + last, last - base_offset)
            log += batch
            batch_first = first + records_per_batch

    indexes: dict[IndexType, bytes] = {
        IndexType.OFFSET: bytes(offset_index),
        IndexType.TIMESTAMP: bytes(time_index),
        IndexType.PRODUCER_SNAPSHOT: EMPTY_SNAPSHOT
        if empty_producer_snapshot
        else encode_snapshot(
            [
                SnapshotEntry(
                    producer_id=PRODUCER_ID,
                    producer_epoch=0,
                    last_sequence=end_offset - base_offset,
                    last_offset=end_offset,
                    offset_delta=per_batch - 1,
                    timestamp=BASE_TIMESTAMP_MS + end_offset,
                    coordinator_epoch=-1,
                    current_txn_first_offset=-1,
                )
            ]
        ),
        IndexType.LEADER_EPOCH: LeaderEpochCheckpointFile.encode(
            EpochEntry(epoch, start) for epoch, start in sorted(epochs.items())
        ),
    }
    if aborted_transactions:
        indexes[IndexType.TRANSACTION] = (
            AbortedTxn(
                PRODUCER_ID, base_offset, base_offset + records_per_batch, base_offset
            ).encode()
            + AbortedTxn(PRODUCER_ID + 1, base_offset + 1, end_offset, base_offset).encode()
        )

    directory.mkdir(parents=True, exist_ok=True)
    stem = directory / f"{base_offset:020d}"
    paths: dict[IndexType, Path] = {}
    for index_type, content in indexes.items():
        if index_type is IndexType.LEADER_EPOCH:
            continue
        name = f"{end_offset + 1:020d}" if index_type is IndexType.PRODUCER_SNAPSHOT else stem.name
        path = directory / (name + index_type.suffix)
        path.write_bytes(content)
        paths[index_type] = path
    log_path = stem.with_suffix(".log")
    log_path.write_bytes(log)

    metadata = RemoteLogSegmentMetadata(
        remote_log_segment_id=segment_id,
        start_offset=base_offset,
        end_offset=end_offset,
        max_timestamp_ms=BASE_TIMESTAMP_MS + end_offset,
        broker_id=0,
        event_timestamp_ms=BASE_TIMESTAMP_MS,
        segment_size_in_bytes=len(log),
        segment_leader_epochs=epochs,
        txn_idx_empty=not aborted_transactions,
    )
    data = LogSegmentData(
        log_segment=log_path,
        offset_index=paths[IndexType.OFFSET],
        time_index=paths[IndexType.TIMESTAMP],
        transaction_index=paths.get(IndexType.TRANSACTION),
        producer_snapshot_index=paths[IndexType.PRODUCER_SNAPSHOT],
        leader_epoch_index=indexes[IndexType.LEADER_EPOCH],
    )
    return LocalSegment(metadata, data, bytes(log), tuple(positions), indexes)


def _epoch_at(epochs: Mapping[int, int], offset: int) -> int:
    current = min(epochs)
    for epoch, start in sorted(epochs.items()):
        if start <= offset:
            current = epoch
    return current
