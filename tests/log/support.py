"""Helpers shared by the partition-log tests: batches, a settable clock, opening logs."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tierlog.log import FetchIsolation, LogConfig, PartitionLog, iter_log_batches
from tierlog.records import (
    Compression,
    ControlType,
    RecordBatch,
    RecordBatchBuilder,
    build_control_batch,
    iter_batches,
)

#: A realistic "now": producer state expires producers whose last write is a day old.
T0 = (int(time.time()) // 1000) * 1_000_000


class Clock:
    """A clock the test moves by hand (epoch milliseconds)."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def batch(
    count: int = 1,
    *,
    timestamp: int = T0,
    value_size: int = 20,
    compression: Compression = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    key: bytes | None = b"k",
    tag: int = 0,
) -> bytes:
    """A batch of ``count`` records with timestamps ``timestamp``, ``timestamp + 1``..."""
    builder = RecordBatchBuilder(
        compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=transactional,
    )
    for i in range(count):
        value = f"{tag}:{i}:".encode().ljust(value_size, b"x")
        builder.append(timestamp + i, key, value)
    return builder.build()


def idempotent(
    producer_id: int, sequence: int, count: int = 1, *, epoch: int = 0, **kwargs: Any
) -> bytes:
    return batch(
        count, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence, **kwargs
    )


def marker(
    control: ControlType, producer_id: int, *, epoch: int = 0, coordinator_epoch: int = 0
) -> bytes:
    return build_control_batch(
        control,
        producer_id=producer_id,
        producer_epoch=epoch,
        timestamp=T0,
        coordinator_epoch=coordinator_epoch,
    )


def open_log(
    directory: Path,
    config: Mapping[str, Any] | LogConfig | None = None,
    clock: Clock | None = None,
) -> PartitionLog:
    if not isinstance(config, LogConfig):
        config = dict(config or {})
    return PartitionLog.open(directory, config, clock=clock or Clock())


def all_batches(log: PartitionLog, start: int = 0) -> list[RecordBatch]:
    return list(iter_log_batches(log, start))


def all_values(log: PartitionLog, start: int = 0) -> list[bytes | None]:
    return [record.value for b in all_batches(log, start) for record in b.records()]


def batches_of(data: bytes | memoryview) -> list[RecordBatch]:
    return list(iter_batches(data))


def read_all(log: PartitionLog, isolation: FetchIsolation = FetchIsolation.LOG_END) -> bytes:
    """Every byte of the log from its local start, fetched in 64 KiB reads."""
    out = bytearray()
    offset = log.local_log_start_offset
    while True:
        info = log.read(offset, 65536, isolation)
        if not info.records:
            return bytes(out)
        out += info.records
        offset = batches_of(info.records)[-1].next_offset


def file_names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def segment_bases(log: PartitionLog) -> list[int]:
    return [s.base_offset for s in log.segments()]


def append_all(log: PartitionLog, payloads: Iterable[bytes], epoch: int = 0) -> list[int]:
    return [log.append_as_leader(p, epoch).first_offset for p in payloads]
