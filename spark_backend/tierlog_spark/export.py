"""Incremental, exactly-once export of tiered topics to Parquet.

The output directory holds Parquet files partitioned ``topic=/partition=/date=`` (the record's
UTC date) and ``_tierlog_offsets.json``: per topic and partition, the next offset to export.
A run reads, per partition, from that offset to the end of what is tiered when it starts, so
the records it exports are fixed before anything is written.

A run must never leave records without their offsets, or offsets without their records. So it
writes into ``_staging/<run>/``, then writes a commit note there listing the new files and the
new offsets, then moves the files into place, then replaces the offsets file, then removes the
staging directory. The next run first finishes every staged run that has a commit note (moves
and offsets are idempotent) and removes every one that has none. A lock file keeps two runs of
the same output apart.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from .options import ReadOptions, source_options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["ExportResult", "export", "read_committed_offsets"]

log = logging.getLogger(__name__)

OFFSETS_FILE = "_tierlog_offsets.json"
STAGING_DIR = "_staging"
LOCK_FILE = "_tierlog_export.lock"
COMMIT_NOTE = "_commit.json"
_DATA = "data"
_MS_PER_DAY = 86_400_000

#: Per (topic, partition), the next offset to export.
Offsets = dict[tuple[str, int], int]


@attrs.frozen
class ExportResult:
    """What one run exported: per (topic, partition), the offsets ``[start, end)`` and rows."""

    ranges: Mapping[tuple[str, int], tuple[int, int]]
    rows: int
    files: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not self.ranges


def read_committed_offsets(output: str | os.PathLike[str]) -> Offsets:
    """The offsets file of ``output`` (empty when nothing was exported yet)."""
    path = Path(output) / OFFSETS_FILE
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    return {
        (topic, int(partition)): int(offset)
        for topic, partitions in raw.items()
        for partition, offset in partitions.items()
    }


def export(
    spark: SparkSession,
    source: Mapping[str, Any] | str | os.PathLike[str],
    topics: Sequence[str],
    output: str | os.PathLike[str],
    *,
    extra_options: Mapping[str, str] | None = None,
) -> ExportResult:
    """Export what was tiered in ``topics`` since the last run into ``output`` (see the module doc).

    ``source`` is the runtime settings or a config file; ``extra_options`` are further
    ``tierlog`` source options (``log.dirs``, ``isolation.level``, ...).
    """
    import pyarrow.parquet as pq

    options = source_options(source) | dict(extra_options or {})
    options["topics"] = ",".join(topics)
    parsed = ReadOptions.from_options(options)
    root = Path(output)
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root):
        recover(root)
        committed = read_committed_offsets(root)
        ranges = _pending_ranges(parsed, committed)
        if not ranges:
            return ExportResult({}, 0, ())
        staging = root / STAGING_DIR / uuid.uuid4().hex
        frame = _records(spark, options, ranges)
        frame.write.partitionBy("topic", "partition", "date").parquet(str(staging / _DATA))
        files = tuple(_data_files(staging / _DATA))
        offsets = dict(committed) | {key: end for key, (_start, end) in ranges.items()}
        _write_atomically(
            staging / COMMIT_NOTE,
            {"files": list(files), "offsets": _offsets_json(offsets)},
        )
        _finish(root, staging)
        rows = sum(pq.read_metadata(root / name).num_rows for name in files)
        return ExportResult(ranges, rows, files)


def recover(root: Path) -> None:
    """Finish the staged runs of ``root`` that reached their commit note, drop the others."""
    staging_root = root / STAGING_DIR
    if not staging_root.is_dir():
        return
    for staging in sorted(staging_root.iterdir()):
        if (staging / COMMIT_NOTE).is_file():
            log.warning("finishing export run %s, which stopped after it committed", staging.name)
            _finish(root, staging)
        else:
            log.warning("removing export run %s, which stopped before it committed", staging.name)
            shutil.rmtree(staging)


def _finish(root: Path, staging: Path) -> None:
    note = json.loads((staging / COMMIT_NOTE).read_text())
    for name in note["files"]:
        source, target = staging / _DATA / name, root / name
        if source.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)
    _write_atomically(root / OFFSETS_FILE, note["offsets"])
    shutil.rmtree(staging)


def _pending_ranges(
    options: ReadOptions, committed: Offsets
) -> dict[tuple[str, int], tuple[int, int]]:
    """Per partition with new tiered records, ``[next offset, end of the tiered log)``."""
    from .metadata_source import load_remote_log_metadata
    from .planning import plan_reads

    caches = load_remote_log_metadata(
        options.log_dirs, topics=options.topics, num_partitions=options.num_partitions
    )
    bounds: dict[tuple[str, int], tuple[int, int]] = {}
    for planned in plan_reads(caches, topics=options.topics, partitions=options.partitions):
        tip = planned.topic_id_partition
        key = (tip.topic, tip.partition)
        first, last = bounds.get(key, (planned.first_offset, planned.last_offset))
        bounds[key] = (min(first, planned.first_offset), max(last, planned.last_offset))
    ranges = {}
    for key, (first, last) in sorted(bounds.items()):
        start = committed.get(key, 0)
        if start < first:
            if key in committed:
                log.warning(
                    "%s-%d: offsets %d..%d were deleted from remote storage before export",
                    *key,
                    start,
                    first - 1,
                )
            start = first
        if start <= last:
            ranges[key] = (start, last + 1)
    return ranges


def _records(
    spark: SparkSession,
    options: Mapping[str, str],
    ranges: Mapping[tuple[str, int], tuple[int, int]],
) -> DataFrame:
    """The records of ``ranges`` with a ``date`` column, one source read per topic."""
    from functools import reduce

    from pyspark.sql import functions as F

    frames = []
    for topic in sorted({topic for topic, _partition in ranges}):
        mine = {partition: span for (name, partition), span in ranges.items() if name == topic}
        reader = spark.read.format("tierlog")
        for key, value in options.items():
            reader = reader.option(key, value)
        frame = (
            reader.option("topics", topic)
            .option("partitions", ",".join(str(p) for p in sorted(mine)))
            .option("startingOffset", str(min(start for start, _end in mine.values())))
            .option("endingOffset", str(max(end for _start, end in mine.values())))
            .load()
        )
        wanted = reduce(
            lambda either, condition: either | condition,
            (
                (F.col("partition") == partition)
                & (F.col("offset") >= start)
                & (F.col("offset") < end)
                for partition, (start, end) in sorted(mine.items())
            ),
        )
        frames.append(frame.where(wanted))
    records = reduce(lambda left, right: left.unionByName(right), frames)
    days = F.floor(F.unix_millis(F.col("timestamp")) / _MS_PER_DAY).cast("int")
    return records.withColumn("date", F.date_from_unix_date(days))


def _data_files(data: Path) -> Iterator[str]:
    """The Parquet files Spark wrote under ``data``, relative to it (not its checksums)."""
    if not data.is_dir():
        return
    for path in sorted(data.rglob("*.parquet")):
        if not path.name.startswith("."):
            yield path.relative_to(data).as_posix()


def _offsets_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    result: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(partition)] = offset
    return result


def _write_atomically(path: Path, content: Any) -> None:
    temp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with temp.open("w") as handle:
        json.dump(content, handle, indent=2, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    with (root / LOCK_FILE).open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RuntimeError(f"another export into {root} is running") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
