"""Benchmarks of the partition log, each against a baseline measured in the same run.

* append throughput (1 KiB, 16 KiB, 1 MiB batches) vs ``os.write`` of the same bytes, one write
  per batch, to a plain file in the same directory;
* sequential fetch by offset through the index vs ``os.pread`` of the same files in the same
  chunk size;
* record build and parse rate vs kafka-python's ``DefaultRecordBatchBuilder`` and
  ``DefaultRecordBatch`` (the PyPI implementation of the format);
* peak RSS (``VmHWM``; ``ru_maxrss`` where there is no /proc) of a child process appending and
  then reading a 2 GiB log (256 MiB in quick mode), next to that of a child that only imports
  tierlog.

``run(quick)`` returns rows ``{name, value, unit, baseline, ratio, target, ok}``. Throughput
rows have ``ratio = value / baseline`` and ``target`` a minimum ratio (None: reported only);
the RSS row's ``target`` is a maximum in MiB for ``value``. Figures are medians of repetitions
that alternate between the log and its baseline, with the page cache written back before each.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tierlog.log import PartitionLog
from tierlog.records import Compression, RecordBatch, RecordBatchBuilder

KIB = 1024
MIB = 1024 * KIB
_T0 = 1_700_000_000_000


def _row(
    name: str,
    value: float,
    unit: str,
    baseline: float,
    target: float | None,
    *,
    ratio: float | None = None,
    at_most: bool = False,
) -> dict[str, Any]:
    if ratio is None:
        ratio = value / baseline if baseline else 0.0
    ok: bool | None
    if target is None:
        ok = None  # no target: the row reports, it does not pass or fail
    elif at_most:
        ok = value <= target
    else:
        ok = ratio >= target
    return {
        "name": name,
        "value": round(value, 3),
        "unit": unit,
        "baseline": round(baseline, 3),
        "ratio": round(ratio, 3),
        "target": target,
        "ok": ok,
    }


def _batch_of_size(size: int) -> bytes:
    """An uncompressed batch of exactly ``size`` bytes: 1 KiB records, the last one padded."""
    record_value = min(size // 2, KIB)
    count = max(1, size // (record_value + 20))

    def build(filler: int) -> bytes:
        builder = RecordBatchBuilder()
        for i in range(count - 1):
            builder.append(_T0 + i, None, b"v" * (record_value - 16))
        builder.append(_T0, None, b"x" * filler)
        return builder.build()

    filler = 0
    for _ in range(8):  # the varint of the padding's length may grow: settle in a few steps
        built = build(filler)
        if len(built) == size:
            return built
        filler += size - len(built)
    raise AssertionError(f"cannot build a batch of exactly {size} bytes")


def _median_pair(
    ours: Callable[[], float], baseline: Callable[[], float], repetitions: int
) -> tuple[float, float]:
    """Median seconds of ``ours`` and ``baseline``, run alternately after a writeback."""
    mine, base = [], []
    for _ in range(repetitions):
        os.sync()
        base.append(baseline())
        os.sync()
        mine.append(ours())
    return statistics.median(mine), statistics.median(base)


# --- append ------------------------------------------------------------------------------------


def _append_rows(quick: bool) -> list[dict[str, Any]]:
    volume = (16 if quick else 64) * MIB
    repetitions = 3 if quick else 5
    rows = []
    for size, target in ((KIB, None), (16 * KIB, 0.5), (MIB, 0.8)):
        data = _batch_of_size(size)
        count = volume // size
        root = Path(tempfile.mkdtemp(prefix="tierlog-bench-"))
        try:
            # Both sides write from the same 16 rotating buffers, as request buffers would be.
            buffers = [bytearray(data) for _ in range(16)]

            def raw(
                count: int = count, buffers: list[bytearray] = buffers, root: Path = root
            ) -> float:
                path = root / "raw.bin"
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                start = time.perf_counter()
                for i in range(count):
                    os.write(fd, buffers[i & 15])
                elapsed = time.perf_counter() - start
                os.close(fd)
                path.unlink()
                return elapsed

            def log(
                count: int = count, buffers: list[bytearray] = buffers, root: Path = root
            ) -> float:
                directory = root / "bench-0"
                partition = PartitionLog.open(directory, {"segment.bytes": 1 << 30})
                # Appends rewrite offsets in place, as they would in a request buffer.
                append = partition.append_as_leader
                start = time.perf_counter()
                for i in range(count):
                    append(buffers[i & 15], 0)
                elapsed = time.perf_counter() - start
                partition.close()
                shutil.rmtree(directory)
                return elapsed

            mine, base = _median_pair(log, raw, repetitions)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        label = f"{size // MIB} MiB" if size >= MIB else f"{size // KIB} KiB"
        rows.append(
            _row(
                f"log append, {label} batches",
                volume / mine / MIB,
                "MiB/s",
                volume / base / MIB,
                target,
            )
        )
    return rows


# --- fetch -------------------------------------------------------------------------------------


def _fetch_rows(quick: bool) -> list[dict[str, Any]]:
    volume = (64 if quick else 256) * MIB
    repetitions = 3 if quick else 5
    rows = []
    root = Path(tempfile.mkdtemp(prefix="tierlog-bench-"))
    try:
        directory = root / "fetch-0"
        partition = PartitionLog.open(directory, {"segment.bytes": 128 * MIB})
        data = _batch_of_size(16 * KIB)
        buffer = bytearray(data)
        for _ in range(volume // len(data)):
            partition.append_as_leader(buffer, 0)
        partition.flush()
        end = partition.log_end_offset
        segment_files = [info.log_path for info in partition.segments()]
        for fetch_size, target in ((16 * KIB, None), (MIB, 0.8)):

            def raw(fetch_size: int = fetch_size) -> float:
                start = time.perf_counter()
                total = 0
                for path in segment_files:
                    fd = os.open(path, os.O_RDONLY)
                    position = 0
                    while True:
                        chunk = os.pread(fd, fetch_size, position)
                        if not chunk:
                            break
                        position += len(chunk)
                    total += position
                    os.close(fd)
                elapsed = time.perf_counter() - start
                assert total >= volume
                return elapsed

            def fetch(fetch_size: int = fetch_size) -> float:
                read = partition.read
                offset = 0
                start = time.perf_counter()
                while offset < end:
                    offset = read(offset, fetch_size).next_offset
                return time.perf_counter() - start

            raw()  # both read from the page cache
            mine, base = _median_pair(fetch, raw, repetitions)
            label = f"{fetch_size // MIB} MiB" if fetch_size >= MIB else f"{fetch_size // KIB} KiB"
            rows.append(
                _row(
                    f"log sequential fetch, {label} fetches",
                    volume / mine / MIB,
                    "MiB/s",
                    volume / base / MIB,
                    target,
                )
            )
        partition.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


# --- records -----------------------------------------------------------------------------------


def _codec_rows(quick: bool) -> list[dict[str, Any]]:
    try:
        from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    except ImportError:
        return [_row("record build/parse vs kafka-python (not installed)", 0, "rec/s", 0, None)]
    batches = 20 if quick else 100
    per_batch = 500
    repetitions = 3 if quick else 5
    values = [os.urandom(100) for _ in range(per_batch)]
    keys = [f"key-{i}".encode() for i in range(per_batch)]
    headers = [("h", b"1")]

    def build_ours() -> float:
        start = time.perf_counter()
        for _ in range(batches):
            builder = RecordBatchBuilder(Compression.NONE)
            for i in range(per_batch):
                builder.append(_T0 + i, keys[i], values[i], headers)
            builder.build()
        return time.perf_counter() - start

    def build_theirs() -> float:
        start = time.perf_counter()
        for _ in range(batches):
            builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
            for i in range(per_batch):
                builder.append(i, _T0 + i, keys[i], values[i], headers)
            builder.build()
        return time.perf_counter() - start

    builder = RecordBatchBuilder(Compression.NONE)
    for i in range(per_batch):
        builder.append(_T0 + i, keys[i], values[i], headers)
    encoded = builder.build()

    def parse_ours() -> float:
        start = time.perf_counter()
        for _ in range(batches):
            for record in RecordBatch.parse(encoded).records():
                record.value  # noqa: B018 - the field access is the work measured
        return time.perf_counter() - start

    def parse_theirs() -> float:
        start = time.perf_counter()
        for _ in range(batches):
            for record in DefaultRecordBatch(bytearray(encoded)):
                record.value  # noqa: B018
        return time.perf_counter() - start

    records = batches * per_batch
    rows = []
    for name, ours, theirs in (
        ("record build (100 B values)", build_ours, build_theirs),
        ("record parse (100 B values)", parse_ours, parse_theirs),
    ):
        mine = statistics.median(ours() for _ in range(repetitions))
        base = statistics.median(theirs() for _ in range(repetitions))
        rows.append(_row(f"{name} vs kafka-python", records / mine, "rec/s", records / base, 1.0))
    return rows


# --- memory ------------------------------------------------------------------------------------

_RSS_CHILD = textwrap.dedent(
    """
    import resource, sys, time
    from pathlib import Path
    from tierlog.log import PartitionLog
    from tierlog.records import RecordBatchBuilder

    directory, total = Path(sys.argv[1]), int(sys.argv[2])
    if total:
        builder = RecordBatchBuilder()
        for i in range(64):
            builder.append(1_700_000_000_000 + i, None, bytes(16 * 1024 - 40))
        batch = bytearray(builder.build())
        log = PartitionLog.open(directory, {})
        written = 0
        while written < total:
            log.append_as_leader(batch, 0)
            written += len(batch)
        log.flush()
        offset = 0
        while offset < log.log_end_offset:
            offset = log.read(offset, 1 << 20).next_offset
        log.close()
    # VmHWM starts afresh at exec; ru_maxrss would carry over the forking parent's peak.
    try:
        status = Path("/proc/self/status").read_text()
        peak_kib = int(next(l for l in status.splitlines() if l.startswith("VmHWM")).split()[1])
    except (OSError, StopIteration):
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        peak_kib //= 1024 if sys.platform == "darwin" else 1
    print(peak_kib)
    """
)


def _peak_rss_mib(directory: Path, total: int) -> float:
    out = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, str(directory), str(total)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return int(out.strip().splitlines()[-1]) / 1024


def _rss_rows(quick: bool) -> list[dict[str, Any]]:
    total = (256 if quick else 2048) * MIB
    root = Path(tempfile.mkdtemp(prefix="tierlog-bench-"))
    try:
        idle = _peak_rss_mib(root / "idle-0", 0)
        busy = _peak_rss_mib(root / "rss-0", total)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    size = "256 MiB (quick)" if quick else "2 GiB"
    return [
        _row(
            f"peak RSS appending then reading a {size} log (limit 200 MiB)",
            busy,
            "MiB",
            idle,
            200.0,
            at_most=True,
        )
    ]


def run(quick: bool) -> list[dict[str, Any]]:
    """Every benchmark of the partition log; see the module docstring for the row format."""
    return _append_rows(quick) + _fetch_rows(quick) + _codec_rows(quick) + _rss_rows(quick)


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    results = run(quick)
    for row in results:
        target = "" if row["target"] is None else f" target {row['target']}"
        print(
            f"{row['name']}: {row['value']} {row['unit']} (baseline {row['baseline']}, "
            f"ratio {row['ratio']}{target}) {'ok' if row['ok'] else 'MISSED'}"
        )
    if "--json" in sys.argv:
        Path(sys.argv[sys.argv.index("--json") + 1]).write_text(json.dumps(results, indent=2))
