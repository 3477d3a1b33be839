"""The log cleaner's throughput against reading the same segments, measured in the same run.

A compacted log of keyed records (100-byte values, ten records a batch, each key written ten
times, so a round keeps about a tenth) is cleaned in one round by ``Cleaner``; the figure is
MB/s of input segments cleaned. The baseline reads the same segments the way any reader of
them must: every batch checked (CRC) and every record decoded. A second, informational row
compares with reading the segment files' bytes alone (``os.pread``), which decodes nothing.
Each measurement runs on a fresh copy of the log, with the page cache warm for both sides;
figures are medians of alternating repetitions.

``rows(quick)`` returns rows ``{name, value, unit, baseline, ratio, target, ok}``; run
``python -m benchmarks.groups_cleaner [--quick]`` to print them.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tierlog.log import PartitionLog
from tierlog.log.cleaner import Cleaner, OffsetMap, cleanable_range
from tierlog.records import RecordBatchBuilder, iter_batches

MB = 1_000_000
_T0 = 1_700_000_000_000
_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": 8 * 1024 * 1024,
    "min.cleanable.dirty.ratio": 0.0,
    "file.delete.delay.ms": 0,
}
#: The ratio the cleaner must reach against the record-by-record read.
TARGET = 0.3


def _build(directory: Path, records: int) -> int:
    """A rolled compacted log of ``records`` records; returns its size in bytes."""
    keys = max(records // 10, 1)
    log = PartitionLog.open(directory, _CONFIG, clock=lambda: _T0)
    try:
        for start in range(0, records, 10):
            builder = RecordBatchBuilder()
            for i in range(start, min(start + 10, records)):
                key = f"group-{i * 7919 % keys:08d}".encode()
                builder.append(_T0 + i, key, i.to_bytes(8, "big") * 12 + b"....")
            log.append_as_leader(builder.build(), 0)
        log.update_high_watermark(log.log_end_offset)
        log.roll()
        return log.size
    finally:
        log.close()


def _clean(directory: Path) -> float:
    log = PartitionLog.open(directory, _CONFIG, clock=lambda: _T0)
    try:
        target, _ = cleanable_range(log, _T0)
        start = time.perf_counter()
        Cleaner(OffsetMap(128 * 1024 * 1024)).clean(target)
        return time.perf_counter() - start
    finally:
        log.close()


def _segment_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name.endswith(".log"))


def _read_records(directory: Path) -> float:
    start = time.perf_counter()
    count = 0
    for path in _segment_files(directory):
        data = path.read_bytes()
        for batch in iter_batches(data):
            for _record in batch.records():
                count += 1
    elapsed = time.perf_counter() - start
    assert count > 0
    return elapsed


def _read_bytes(directory: Path) -> float:
    start = time.perf_counter()
    for path in _segment_files(directory):
        fd = os.open(path, os.O_RDONLY)
        try:
            position = 0
            while chunk := os.pread(fd, 1 << 20, position):
                position += len(chunk)
        finally:
            os.close(fd)
    return time.perf_counter() - start


def rows(quick: bool) -> list[dict[str, Any]]:
    records = 100_000 if quick else 400_000
    repeats = 3 if quick else 5
    with tempfile.TemporaryDirectory(prefix="cleaner-bench-") as tmp:
        source = Path(tmp) / "source" / "compacted-0"
        size = _build(source, records)
        cleans, reads, raw = [], [], []
        for n in range(repeats):
            copy = Path(tmp) / f"run-{n}" / "compacted-0"
            shutil.copytree(source, copy)
            reads.append(_read_records(copy))
            raw.append(_read_bytes(copy))
            cleans.append(_clean(copy))
            shutil.rmtree(copy.parent)
    clean_mbps = size / MB / statistics.median(cleans)
    read_mbps = size / MB / statistics.median(reads)
    raw_mbps = size / MB / statistics.median(raw)
    return [
        _row("cleaner throughput vs record-by-record read", clean_mbps, read_mbps, TARGET),
        _row("cleaner throughput vs byte read (informational)", clean_mbps, raw_mbps, None),
    ]


def _row(name: str, value: float, baseline: float, target: float | None) -> dict[str, Any]:
    ratio = value / baseline if baseline else 0.0
    return {
        "name": name,
        "value": round(value, 2),
        "unit": "MB/s",
        "baseline": round(baseline, 2),
        "ratio": round(ratio, 3),
        "target": target,
        "ok": None if target is None else ratio >= target,
    }


if __name__ == "__main__":
    for row in rows("--quick" in sys.argv[1:]):
        print(row)
