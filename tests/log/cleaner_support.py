"""Helpers of the log cleaner tests: keyed batches, a cleaner on a test clock, reading back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from tierlog.log import PartitionLog, files
from tierlog.log.cleaner import CleanerSettings, LogCleaner
from tierlog.records import Compression, RecordBatchBuilder

from .support import T0, Clock, all_batches

#: Topic settings of a compacted log cut into many small segments.
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": 400,
    "min.cleanable.dirty.ratio": 0.0,
    "delete.retention.ms": 1000,
    "file.delete.delay.ms": 0,
}

Entry = tuple[int, bytes | None, bytes | None]


def keyed(
    pairs: Sequence[tuple[bytes, bytes | None]],
    *,
    timestamp: int = T0,
    compression: Compression = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    """One batch of ``(key, value)`` records (a None value is a tombstone)."""
    builder = RecordBatchBuilder(
        compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=transactional,
    )
    for key, value in pairs:
        builder.append(timestamp, key, value)
    return builder.build()


def entries(log: PartitionLog) -> list[Entry]:
    """Every data record from the log start: ``(offset, key, value)``."""
    return [
        (r.offset, r.key, r.value)
        for b in all_batches(log)
        if not b.is_control
        for r in b.records()
    ]


def cleaner_for(
    logs: Callable[[], list[PartitionLog]], clock: Clock, **settings: object
) -> LogCleaner:
    """A cleaner on ``logs`` that runs rounds in the caller's thread (``clean_once``)."""
    values = CleanerSettings(**settings)  # type: ignore[arg-type]
    return LogCleaner(lambda: values, logs, clock=clock)


def transient_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(files.TRANSIENT_SUFFIXES))
