"""Remote log metadata read offline, straight from the brokers' copies of ``__remote_log_metadata``.

A Spark job must not depend on a running broker to learn what is tiered, so the driver replays
the internal topic's partitions from the log dirs, as a broker's consumer task would, into one
``RemoteLogMetadataCache`` per user partition.

The segment files are read as plain bytes, never through ``PartitionLog``: a broker may be
running and appending to them, so the last batch of a partition may be cut short (it is
skipped) and nothing here takes locks, recovers or truncates anything. When several brokers hold
a replica of a metadata partition, the copy with the most data is read.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path

import attrs
from tierlog.errors import (
    CorruptRecordError,
    InvalidStateTransitionError,
    MetadataFormatError,
    RemoteResourceNotFoundError,
)
from tierlog.metadata.cache import RemoteLogMetadataCache
from tierlog.metadata.partitioner import metadata_partition
from tierlog.metadata.serde import MetadataEvent, decode_event
from tierlog.metadata.topic_config import TOPIC_NAME
from tierlog.model import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)
from tierlog.records import iter_batches

__all__ = ["MetadataPartitionCopy", "find_metadata_partitions", "load_remote_log_metadata"]

log = logging.getLogger(__name__)

_PARTITION_DIR = re.compile(re.escape(TOPIC_NAME) + r"-(\d+)")
_SEGMENT_FILE = re.compile(r"(\d{20})\.log")


@attrs.frozen
class MetadataPartitionCopy:
    """One broker's copy of a metadata partition: its directory and segment files by offset."""

    partition: int
    directory: Path
    segments: tuple[Path, ...]

    @property
    def fullness(self) -> tuple[int, int]:
        """How much the copy holds: its newest segment's base offset, then its bytes."""
        newest = int(self.segments[-1].name[:20]) if self.segments else -1
        return newest, sum(_file_size(segment) for segment in self.segments)


def find_metadata_partitions(log_dirs: Iterable[str | Path]) -> dict[int, MetadataPartitionCopy]:
    """The fullest copy of every metadata partition found under ``log_dirs``."""
    best: dict[int, MetadataPartitionCopy] = {}
    for log_dir in log_dirs:
        root = Path(log_dir)
        if not root.is_dir():
            raise FileNotFoundError(f"log dir {root} does not exist or is not a directory")
        for directory in sorted(root.iterdir()):
            match = _PARTITION_DIR.fullmatch(directory.name)
            if match is None or not directory.is_dir():
                continue
            segments = sorted(
                path for path in directory.iterdir() if _SEGMENT_FILE.fullmatch(path.name)
            )
            copy = MetadataPartitionCopy(int(match.group(1)), directory, tuple(segments))
            current = best.get(copy.partition)
            if current is None or copy.fullness > current.fullness:
                best[copy.partition] = copy
    return best


def load_remote_log_metadata(
    log_dirs: Iterable[str | Path],
    *,
    topics: Collection[str] | None = None,
    num_partitions: int | None = None,
) -> dict[TopicIdPartition, RemoteLogMetadataCache]:
    """Every user partition's remote segments, as the brokers' metadata topic records them.

    ``topics`` keeps only the partitions of those topic names. ``num_partitions`` is the
    metadata topic's partition count when known: events found in a metadata partition other
    than the one Kafka's partitioner assigns their user partition are then ignored, as brokers
    never read them. Undecodable events and events the cache refuses are logged and skipped.
    """
    copies = find_metadata_partitions(log_dirs)
    if num_partitions is not None:
        extra = sorted(n for n in copies if n >= num_partitions)
        if extra:
            raise ValueError(
                f"found {TOPIC_NAME}-{extra[0]} but the metadata topic is said to have "
                f"{num_partitions} partitions; set the right rlmm.num.partitions"
            )
    caches: dict[TopicIdPartition, RemoteLogMetadataCache] = {}
    wanted = None if topics is None else frozenset(topics)
    for partition in sorted(copies):
        copy = copies[partition]
        for source, offset, event in _events(copy):
            tip = _partition_of(event)
            if wanted is not None and tip.topic not in wanted:
                continue
            if num_partitions is not None and metadata_partition(tip, num_partitions) != partition:
                log.warning(
                    "%s offset %d: ignoring an event of %s, which belongs in another metadata "
                    "partition",
                    source,
                    offset,
                    tip,
                )
                continue
            cache = caches.get(tip)
            if cache is None:
                cache = caches[tip] = RemoteLogMetadataCache(tip, initialized=False)
            try:
                cache = _apply(cache, event)
            except (InvalidStateTransitionError, RemoteResourceNotFoundError, ValueError) as err:
                log.warning("%s offset %d: ignoring an event of %s: %s", source, offset, tip, err)
                continue
            caches[tip] = cache
    for cache in caches.values():
        cache.mark_initialized()
    return caches


def _events(copy: MetadataPartitionCopy) -> Iterator[tuple[Path, int, MetadataEvent]]:
    """The decodable events of one copy in offset order, with their file and offset."""
    last = len(copy.segments) - 1
    for index, segment in enumerate(copy.segments):
        try:
            data = segment.read_bytes()
        except FileNotFoundError:  # deleted by retention since it was listed
            continue
        try:
            for batch in iter_batches(data, allow_partial_tail=index == last):
                if batch.is_control:
                    continue
                for record in batch.records():
                    if record.value is None:
                        continue
                    try:
                        event = decode_event(record.value)
                    except MetadataFormatError as err:
                        log.error(
                            "%s offset %d: skipping an unreadable remote log metadata event: %s",
                            segment,
                            record.offset,
                            err,
                        )
                        continue
                    yield segment, record.offset, event
        except CorruptRecordError as err:
            log.error(
                "%s: stopped reading at byte %s, the batch there is corrupt: %s",
                segment,
                err.position,
                err.reason,
            )


def _partition_of(event: MetadataEvent) -> TopicIdPartition:
    if isinstance(event, RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate):
        return event.remote_log_segment_id.topic_id_partition
    return event.topic_id_partition


def _apply(cache: RemoteLogMetadataCache, event: MetadataEvent) -> RemoteLogMetadataCache:
    """The cache after ``event``; a finished partition deletion starts a new, empty one."""
    if isinstance(event, RemoteLogSegmentMetadata):
        cache.add_copy_in_progress_segment(event)
    elif isinstance(event, RemoteLogSegmentMetadataUpdate):
        cache.update_remote_log_segment_metadata(event)
    elif (
        isinstance(event, RemotePartitionDeleteMetadata)
        and event.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED
    ):
        return RemoteLogMetadataCache(cache.topic_id_partition, initialized=False)
    return cache


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
