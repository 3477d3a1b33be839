"""Reconciling remote storage with the remote log metadata.

Two ways they drift apart, both invisible to the runtime until a consumer trips on them:

* a segment the metadata calls finished is gone or damaged. Every finished segment is fetched
  through the storage plugin, in parallel Spark tasks, and each batch's CRC checked; its size and
  last offset must be the metadata's.
* objects nobody will ever delete: uploads with no metadata, uploads whose copy never finished,
  and segments whose deletion never finished. They are orphans once older than a grace period
  (a copy or a deletion may be under way), and can be deleted through the plugin's delete hook.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from tierlog.config import BrokerConfig
from tierlog.errors import CorruptRecordError, RemoteResourceNotFoundError
from tierlog.model import RemoteLogSegmentMetadata, RemoteLogSegmentState
from tierlog.records import LOG_OVERHEAD, iter_batches
from tierlog.spi import RemoteStorageManager

from .options import ReadOptions, source_options
from .remote_objects import ListingNotSupportedError, SegmentUpload, list_uploads

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "Orphan",
    "SegmentProblem",
    "VerifyReport",
    "check_segment",
    "scan_segment",
    "verify",
]

log = logging.getLogger(__name__)

DEFAULT_GRACE_MS = 3_600_000

NO_METADATA = "no metadata"
COPY_NOT_FINISHED = "copy never finished"
DELETE_NOT_FINISHED = "deleted segment still present"


@attrs.frozen
class SegmentProblem:
    """A finished segment that is missing or fails its checks; ``position`` is the bad byte."""

    topic: str
    partition: int
    segment_id: str
    start_offset: int
    end_offset: int
    problem: str
    position: int | None = None


@attrs.frozen
class Orphan:
    """Objects of one upload that no live segment owns."""

    topic: str
    partition: int
    topic_id: str
    segment_id: str
    start_offset: int
    reason: str
    objects: tuple[str, ...]
    deleted: bool = False


@attrs.frozen
class VerifyReport:
    checked_segments: int
    problems: tuple[SegmentProblem, ...]
    orphans: tuple[Orphan, ...]
    #: Why orphans were not looked for, when they were not.
    orphans_not_listed: str | None = None

    @property
    def clean(self) -> bool:
        return not self.problems and not any(not orphan.deleted for orphan in self.orphans)

    def to_json(self) -> dict[str, Any]:
        return {
            "checked_segments": self.checked_segments,
            "problems": [attrs.asdict(problem) for problem in self.problems],
            "orphans": [attrs.asdict(orphan) for orphan in self.orphans],
            "orphans_not_listed": self.orphans_not_listed,
            "clean": self.clean,
        }

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=2) + "\n")


def check_segment(
    settings: Mapping[str, Any], segment: RemoteLogSegmentMetadata
) -> tuple[str, int | None] | None:
    """What is wrong with ``segment`` in remote storage and at which byte, or None.

    Runs in a Spark task, so a bad segment is a result, never an exception. When the plugin
    refuses the whole segment (its own checksums failed), it is read again batch by batch to
    find the first batch it cannot serve.
    """
    from .storage import storage_for

    storage = storage_for(settings)
    try:
        data = _fetch(storage, segment, 0, None)
    except RemoteResourceNotFoundError as err:
        return f"missing: {err}", None
    except Exception as err:  # every failure to read is reported
        return f"unreadable: {err}", _first_unreadable(storage, segment)
    return scan_segment(data, segment)


def scan_segment(data: bytes, segment: RemoteLogSegmentMetadata) -> tuple[str, int | None] | None:
    """What is wrong with the bytes of ``segment``: a batch that fails its checks (CRC
    included) and where it starts, a size or a last offset other than the metadata's."""
    last = None
    try:
        for batch in iter_batches(data):
            last = batch.last_offset
    except CorruptRecordError as err:
        return f"corrupt batch: {err.reason}", err.position
    if len(data) != segment.segment_size_in_bytes:
        return f"size is {len(data)} bytes, the metadata says {segment.segment_size_in_bytes}", None
    if last != segment.end_offset:
        return f"ends at offset {last}, the metadata says {segment.end_offset}", None
    return None


def _first_unreadable(
    storage: RemoteStorageManager, segment: RemoteLogSegmentMetadata
) -> int | None:
    """Where the first batch starts that cannot be fetched or fails its checks."""
    position, size = 0, segment.segment_size_in_bytes
    while position < size:
        try:
            head = _fetch(storage, segment, position, position + LOG_OVERHEAD - 1)
            length = LOG_OVERHEAD + int.from_bytes(head[8:12], "big", signed=True)
            data = _fetch(storage, segment, position, position + length - 1)
            for _batch in iter_batches(data):
                pass
        except Exception:  # the first batch the plugin or the checks refuse
            return position
        position += length
    return None


def _fetch(
    storage: RemoteStorageManager, segment: RemoteLogSegmentMetadata, start: int, end: int | None
) -> bytes:
    stream = storage.fetch_log_segment(segment, start, end)
    try:
        return bytes(stream.read())
    finally:
        stream.close()


def verify(
    spark: SparkSession,
    source: Mapping[str, Any] | str | os.PathLike[str],
    *,
    topics: Collection[str] | None = None,
    grace_ms: int = DEFAULT_GRACE_MS,
    delete_orphans: bool = False,
    extra_options: Mapping[str, str] | None = None,
    now_ms: int | None = None,
) -> VerifyReport:
    """Check every finished segment of ``topics`` (default: all) and look for orphans.

    ``source`` is the runtime settings or a config file; ``extra_options`` are further
    ``tierlog`` source options (``log.dirs``, ``rlmm.num.partitions``).
    """
    from .metadata_source import load_remote_log_metadata

    options = source_options(source) | dict(extra_options or {})
    if topics:
        options["topics"] = ",".join(topics)
    parsed = ReadOptions.from_options(options, need_topics=False)
    settings, log_dirs, num_partitions = parsed.settings, parsed.log_dirs, parsed.num_partitions
    topics = parsed.topics or None
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    caches = load_remote_log_metadata(log_dirs, topics=topics, num_partitions=num_partitions)
    segments = {
        (str(s.topic_id_partition.topic_id), str(s.remote_log_segment_id.id)): s
        for cache in caches.values()
        for s in cache.list_all_remote_log_segments()
    }
    finished = sorted(
        (s for s in segments.values() if s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED),
        key=lambda s: (s.topic_id_partition.topic, s.topic_id_partition.partition, s.start_offset),
    )
    problems = _check_all(spark, settings, finished)

    orphans: list[Orphan] = []
    not_listed = None
    try:
        uploads = list_uploads(settings, topics)
    except ListingNotSupportedError as err:
        uploads, not_listed = [], str(err)
    for upload in uploads:
        key = (str(upload.topic_id_partition.topic_id), str(upload.segment_id))
        orphan = _orphan(upload, segments.get(key), grace_ms, now_ms)
        if orphan is not None:
            orphans.append(orphan)
    if delete_orphans and orphans:
        orphans = _delete(settings, orphans, uploads, segments)
    return VerifyReport(len(finished), tuple(problems), tuple(orphans), not_listed)


def _check_all(
    spark: SparkSession, settings: Mapping[str, Any], finished: list[RemoteLogSegmentMetadata]
) -> list[SegmentProblem]:
    if not finished:
        return []
    settings = dict(settings)

    def check(segments: Iterator[RemoteLogSegmentMetadata]) -> Iterator[Any]:
        for segment in segments:
            yield segment, check_segment(settings, segment)

    slices = min(len(finished), spark.sparkContext.defaultParallelism * 4)
    checked = spark.sparkContext.parallelize(finished, slices).mapPartitions(check).collect()
    problems = []
    for segment, problem in checked:
        if problem is None:
            continue
        text, position = problem
        tip = segment.topic_id_partition
        problems.append(
            SegmentProblem(
                tip.topic,
                tip.partition,
                str(segment.remote_log_segment_id.id),
                segment.start_offset,
                segment.end_offset,
                text,
                position,
            )
        )
    return problems


def _orphan(
    upload: SegmentUpload,
    segment: RemoteLogSegmentMetadata | None,
    grace_ms: int,
    now_ms: int,
) -> Orphan | None:
    if segment is None:
        reason, since = NO_METADATA, upload.modified_ms
    elif segment.state is RemoteLogSegmentState.COPY_SEGMENT_STARTED:
        reason, since = COPY_NOT_FINISHED, segment.event_timestamp_ms
    elif segment.state is RemoteLogSegmentState.DELETE_SEGMENT_STARTED:
        reason, since = DELETE_NOT_FINISHED, segment.event_timestamp_ms
    else:
        return None
    if since is not None and now_ms - since < grace_ms:
        return None
    tip = upload.topic_id_partition
    return Orphan(
        tip.topic,
        tip.partition,
        str(tip.topic_id),
        str(upload.segment_id),
        upload.start_offset,
        reason,
        upload.paths,
    )


def _delete(
    settings: Mapping[str, Any],
    orphans: list[Orphan],
    uploads: list[SegmentUpload],
    segments: Mapping[tuple[str, str], RemoteLogSegmentMetadata],
) -> list[Orphan]:
    """``orphans`` after deleting each through the storage plugin's delete hook."""
    from tierlog.host import PluginHost

    by_id = {(str(u.topic_id_partition.topic_id), str(u.segment_id)): u for u in uploads}
    host = PluginHost.create(BrokerConfig.from_mapping(settings))
    host.start()
    result = []
    try:
        for orphan in orphans:
            key = (orphan.topic_id, orphan.segment_id)
            metadata = segments.get(key) or by_id[key].as_metadata()
            try:
                host.storage.delete_log_segment_data(metadata)
            except Exception as err:  # reported; the others are still deleted
                log.error("could not delete the orphan objects of %s: %s", orphan.segment_id, err)
                result.append(orphan)
                continue
            result.append(attrs.evolve(orphan, deleted=True))
    finally:
        host.close()
    return result
