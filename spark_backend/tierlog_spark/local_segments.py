"""Records not tiered yet, read from a broker's local log: the ``includeLocal`` option.

A partition's log is its tiered segments followed by the segments still only on the brokers'
disks. With ``includeLocal`` the reader continues each partition's remote plan with the local
log, from the offset after the highest tiered one the plan covers, so no offset is read twice
and none is skipped. It reads what a consumer of the partition would be served:

* up to the high watermark in the replica's ``replication-offset-checkpoint`` (without an entry,
  up to the last complete batch, which is logged);
* under read_committed, also up to the last stable offset: before the first offset of a
  transaction still open there (transactional batches of a producer with no later COMMIT or
  ABORT marker below the high watermark). Aborted transactions are dropped with the local
  ``.txnindex`` entries, as for remote ranges (``local_aborts``).

Several brokers' log dirs may hold a replica of a partition: the one whose log reaches
furthest (highest log end offset, then the earlier log dir in ``log.dirs``) is read, so a
lagging follower never hides records the leader holds. A replica directory whose
``partition.metadata`` names another topic id than the remote plan reads (an earlier topic of
the same name) is ignored.

Brokers may append while a query reads: every segment's size is taken at planning and only the
whole batches within it are planned, so a batch half-written at the tail is never decoded. A
local range's ``segment_id`` is ``local:<base offset of its segment>``. Tasks read the files
directly, so the log dirs must be reachable under the same paths from the executors (local mode,
or a mount every executor shares).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
from pyspark.sql.datasource import InputPartition
from tierlog.errors import CorruptRecordError
from tierlog.log import files
from tierlog.log.checkpoint import read_offset_checkpoint
from tierlog.log.index_file import as_int32_columns
from tierlog.log.partition_log import HIGH_WATERMARK_CHECKPOINT
from tierlog.log.txn_index import AbortedTxn
from tierlog.model import TopicPartition, Uuid
from tierlog.records import HEADER_SIZE, LOG_OVERHEAD, RecordBatch, read_batch_fields
from tierlog.records.batch import CONTROL_MASK, TRANSACTIONAL_MASK
from tierlog.records.control import EndTxnMarker

from .planning import Bounds, SegmentRange, plan_reads

if TYPE_CHECKING:
    import pyarrow as pa
    from tierlog.metadata.cache import RemoteLogMetadataCache
    from tierlog.model import TopicIdPartition

    from .options import ReadOptions
    from .pushdown import Selection

__all__ = [
    "LOCAL_SEGMENT_PREFIX",
    "LocalRange",
    "LocalSegmentPartition",
    "plan_local_reads",
    "plan_local_tasks",
    "read_local_range",
]

log = logging.getLogger(__name__)

#: A local range's ``segment_id`` is this followed by its segment's base offset.
LOCAL_SEGMENT_PREFIX = "local:"


@attrs.frozen
class LocalRange:
    """Offsets ``first_offset..last_offset`` of one local segment file, to be read in one task.

    ``start_position..end_position`` (end exclusive) are whole batches measured at planning.
    """

    topic: str
    partition: int
    log_path: str
    base_offset: int
    first_offset: int
    last_offset: int
    start_position: int
    end_position: int
    #: Aborted transactions overlapping the range, from the replica's ``.txnindex`` files.
    aborted: frozenset[AbortedTxn] = frozenset()

    @property
    def segment_id(self) -> str:
        return f"{LOCAL_SEGMENT_PREFIX}{self.base_offset}"


@attrs.frozen
class LocalSegmentPartition(InputPartition):
    """One task: a range of one local segment file."""

    range: LocalRange


@attrs.frozen
class _Batch:
    """What planning needs of one batch header."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    producer_id: int
    attributes: int

    @property
    def end_position(self) -> int:
        return self.position + self.size


@attrs.frozen
class _Replica:
    """One broker's copy of a partition's log."""

    log_dir: Path
    directory: Path
    #: Base offsets and sizes of the segment files, as taken at planning.
    segments: tuple[tuple[int, int], ...]
    log_end_offset: int


def plan_local_tasks(
    options: ReadOptions,
    selection: Selection,
    caches: Mapping[TopicIdPartition, RemoteLogMetadataCache],
) -> list[LocalSegmentPartition]:
    """The tasks reading the local logs after what ``caches`` hold tiered (``includeLocal``)."""
    remote = plan_reads(caches, topics=selection.topics, partitions=selection.partitions)
    ranges = plan_local_reads(
        options.log_dirs,
        remote,
        topics=selection.topics,
        partitions=selection.partitions,
        bounds=selection.bounds,
        read_committed=options.read_committed,
        max_bytes=options.max_bytes_per_task,
    )
    return [LocalSegmentPartition(planned) for planned in ranges]


def plan_local_reads(
    log_dirs: Sequence[str | Path],
    remote: Sequence[SegmentRange],
    *,
    topics: Collection[str] | None,
    partitions: Collection[int] | None,
    bounds: Bounds,
    read_committed: bool,
    max_bytes: int,
) -> list[LocalRange]:
    """The local ranges continuing ``remote`` (the partitions' remote plan without bounds) for
    the wanted partitions found under ``log_dirs``, cut to ``bounds``; see the module doc."""
    if bounds.is_empty:
        return []
    tiered_end: dict[tuple[str, int], int] = {}
    topic_ids: dict[str, Uuid] = {}
    for planned in remote:
        tip = planned.topic_id_partition
        key = (tip.topic, tip.partition)
        tiered_end[key] = max(tiered_end.get(key, -1), planned.last_offset)
        topic_ids[tip.topic] = tip.topic_id
    found = _replica_dirs(log_dirs, topics, partitions)
    for topic, partition in sorted(tiered_end.keys() - found.keys()):
        log.info(
            "no local replica of %s-%d in %s: reading its remote segments only",
            topic,
            partition,
            ", ".join(map(str, log_dirs)),
        )
    result: list[LocalRange] = []
    for topic, partition in sorted(found):
        replicas = []
        for log_dir, directory in found[topic, partition]:
            if not _same_topic(directory, topic_ids.get(topic)):
                continue
            replica = _read_replica(log_dir, directory)
            if replica is not None:
                replicas.append(replica)
        if not replicas:
            continue
        # max keeps the first of equals: the earlier log dir in ``log_dirs``.
        chosen = max(replicas, key=lambda replica: replica.log_end_offset)
        highest_tiered = tiered_end.get((topic, partition))
        result.extend(
            _local_ranges(
                chosen,
                TopicPartition(topic, partition),
                highest_tiered,
                bounds=bounds,
                read_committed=read_committed,
                max_bytes=max_bytes,
            )
        )
    return result


def _replica_dirs(
    log_dirs: Sequence[str | Path],
    topics: Collection[str] | None,
    partitions: Collection[int] | None,
) -> dict[tuple[str, int], list[tuple[Path, Path]]]:
    """Per wanted partition, its (log dir, partition directory) in each log dir holding one.

    Directories being deleted or moved (``-delete``, ``-future``) are not replicas to read.
    """
    found: dict[tuple[str, int], list[tuple[Path, Path]]] = {}
    for log_dir in map(Path, log_dirs):
        try:
            entries = sorted(log_dir.iterdir())
        except OSError as err:
            log.warning(
                "cannot list log dir %s, reading no local segments from it: %s", log_dir, err
            )
            continue
        for entry in entries:
            try:
                tp = files.parse_log_dir_name(entry.name)
            except ValueError:
                continue
            if entry.name != files.log_dir_name(tp) or not entry.is_dir():
                continue
            if topics is None and tp.topic.startswith("__"):
                continue
            if topics is not None and tp.topic not in topics:
                continue
            if partitions is not None and tp.partition not in partitions:
                continue
            found.setdefault((tp.topic, tp.partition), []).append((log_dir, entry))
    return found


def _same_topic(directory: Path, topic_id: Uuid | None) -> bool:
    from tierlog.server.partition import read_partition_metadata

    if topic_id is None:
        return True
    local_id = read_partition_metadata(directory)
    if local_id is None or local_id == topic_id:
        return True
    log.warning(
        "%s belongs to topic id %s, not %s whose remote data is read; not reading it",
        directory,
        local_id,
        topic_id,
    )
    return False


def _read_replica(log_dir: Path, directory: Path) -> _Replica | None:
    segments = []
    try:
        names = [p.name for p in directory.iterdir()]
    except OSError as err:
        log.warning("cannot list %s, reading no local segments from it: %s", directory, err)
        return None
    for name in sorted(n for n in names if files.is_segment_file(n, files.LOG_SUFFIX)):
        base = files.offset_from_file_name(name)
        try:
            size = (directory / name).stat().st_size
        except FileNotFoundError:  # deleted since listed
            continue
        segments.append((base, size))
    if not segments:
        return None
    base, size = segments[-1]
    path = files.segment_file(directory, base, files.LOG_SUFFIX)
    batches = _scan(path, size, _index_position(directory, base, None, size))
    log_end = batches[-1].last_offset + 1 if batches else base
    return _Replica(log_dir, directory, tuple(segments), log_end)


def _local_ranges(
    replica: _Replica,
    tp: TopicPartition,
    highest_tiered: int | None,
    *,
    bounds: Bounds,
    read_committed: bool,
    max_bytes: int,
) -> list[LocalRange]:
    """The ranges of ``replica`` after ``highest_tiered`` (None: nothing is tiered)."""
    start = 0 if highest_tiered is None else highest_tiered + 1
    segments = replica.segments
    first_local = segments[0][0]
    if highest_tiered is not None and first_local > start:
        log.warning(
            "%s starts at offset %d but remote storage ends at %d: offsets %d..%d are in "
            "neither; reading the local log from %d",
            replica.directory,
            first_local,
            highest_tiered,
            start,
            first_local - 1,
            first_local,
        )
    high_watermark = read_offset_checkpoint(
        replica.directory / HIGH_WATERMARK_CHECKPOINT, tp.topic, tp.partition
    )
    if high_watermark is None:
        high_watermark = read_offset_checkpoint(
            replica.log_dir / HIGH_WATERMARK_CHECKPOINT, tp.topic, tp.partition
        )
    if high_watermark is None:
        log.warning(
            "%s: no high watermark checkpointed for %s; reading its local log to the last "
            "complete batch",
            replica.directory,
            tp,
        )

    scanned: list[tuple[int, Path, list[_Batch]]] = []
    for index, (base, size) in enumerate(segments):
        if index + 1 < len(segments) and segments[index + 1][0] <= start:
            continue  # every offset in it is tiered
        if high_watermark is not None and base >= high_watermark:
            break
        path = files.segment_file(replica.directory, base, files.LOG_SUFFIX)
        position = _index_position(replica.directory, base, start, size)
        batches = [
            batch
            for batch in _scan(path, size, position)
            if batch.last_offset >= start
            and (high_watermark is None or batch.base_offset < high_watermark)
        ]
        scanned.append((base, path, batches))

    end = high_watermark  # the first offset not to read
    if read_committed:
        open_at = _first_open_transaction(
            [(path, batch) for _, path, batches in scanned for batch in batches]
        )
        if open_at is not None:
            end = open_at if end is None else min(end, open_at)
    last = bounds.last_offset
    if end is not None:
        last = end - 1 if last is None else min(last, end - 1)
    first = max(start, bounds.first_offset)
    if last is not None and last < first:
        return []

    aborted: frozenset[AbortedTxn] = frozenset()
    if read_committed:
        from .local_aborts import local_aborted_transactions

        key = (tp.topic, tp.partition)
        aborted = local_aborted_transactions([replica.log_dir], [key])[key]

    ranges: list[LocalRange] = []
    for base, path, batches in scanned:
        wanted = [
            batch
            for batch in batches
            if batch.last_offset >= first and (last is None or batch.base_offset <= last)
        ]
        for window in _windows(wanted, max_bytes):
            window_first = max(first, window[0].base_offset)
            window_last = (
                window[-1].last_offset if last is None else min(last, window[-1].last_offset)
            )
            ranges.append(
                LocalRange(
                    tp.topic,
                    tp.partition,
                    str(path),
                    base,
                    window_first,
                    window_last,
                    window[0].position,
                    window[-1].end_position,
                    frozenset(
                        txn
                        for txn in aborted
                        if txn.last_offset >= window_first and txn.first_offset <= window_last
                    ),
                )
            )
    return ranges


def _windows(batches: list[_Batch], max_bytes: int) -> Iterator[list[_Batch]]:
    """``batches`` (consecutive in one file) in runs of about ``max_bytes``, one batch at least."""
    window: list[_Batch] = []
    for batch in batches:
        if window and batch.end_position - window[0].position > max_bytes:
            yield window
            window = []
        window.append(batch)
    if window:
        yield window


def _first_open_transaction(batches: list[tuple[Path, _Batch]]) -> int | None:
    """The first offset of the earliest transaction ``batches`` leave open (the LSO), or None."""
    open_transactions: dict[int, int] = {}
    for path, batch in batches:
        if batch.producer_id < 0 or not batch.attributes & TRANSACTIONAL_MASK:
            continue
        if batch.attributes & CONTROL_MASK:
            if _is_end_marker(path, batch):
                open_transactions.pop(batch.producer_id, None)
        else:
            open_transactions.setdefault(batch.producer_id, batch.base_offset)
    return min(open_transactions.values(), default=None)


def _is_end_marker(path: Path, batch: _Batch) -> bool:
    """Whether the control batch is a COMMIT or ABORT marker."""
    with open(path, "rb") as file:
        data = os.pread(file.fileno(), batch.size, batch.position)
    try:
        EndTxnMarker.from_batch(RecordBatch.parse(data))
    except CorruptRecordError:
        return False
    return True


def _index_position(directory: Path, base: int, offset: int | None, size: int) -> int:
    """A batch boundary in segment ``base`` before the batch holding ``offset`` (None: the
    last one the offset index knows), from the segment's offset index; 0 without an index."""
    if offset is not None and offset <= base:
        return 0
    path = files.segment_file(directory, base, files.INDEX_SUFFIX)
    try:
        data = path.read_bytes()
    except OSError:
        return 0
    relative, positions = as_int32_columns(data[: len(data) - len(data) % 8])
    best = 0
    previous: tuple[int, int] | None = None
    for delta, position in zip(relative, positions, strict=True):
        entry = (base + delta, position)
        if previous is not None and (entry[0] <= previous[0] or entry[1] <= previous[1]):
            break  # the zeroed tail of a preallocated index
        if position >= size or (offset is not None and entry[0] > offset):
            break
        best = position
        previous = entry
    return best


def _scan(path: Path, size: int, position: int) -> list[_Batch]:
    """The whole batches of ``path`` from ``position`` up to byte ``size``, by header.

    A batch running past ``size`` is one still being written: the scan stops before it. A
    position the index gave that turns out not to be a batch boundary is scanned from 0. A
    damaged header ends the scan, with a warning: a broker recovering the log would truncate
    it there.
    """
    try:
        with open(path, "rb") as file:
            batches, damage = _scan_file(file.fileno(), size, position)
    except FileNotFoundError:  # deleted since listed
        return []
    if damage is not None and position and not batches:
        log.warning("%s: the offset index misled (%s); scanning from the start", path, damage)
        return _scan(path, size, 0)
    if damage is not None:
        log.warning("%s: not reading past a damaged batch: %s", path, damage)
    return batches


def _scan_file(fd: int, size: int, position: int) -> tuple[list[_Batch], str | None]:
    batches: list[_Batch] = []
    while position + HEADER_SIZE <= size:
        header = os.pread(fd, HEADER_SIZE, position)
        if len(header) < HEADER_SIZE:
            break
        try:
            fields = read_batch_fields(memoryview(header), 0)
        except CorruptRecordError as err:
            return batches, f"{err.reason} at byte {position}"
        batch_size = LOG_OVERHEAD + fields[1]
        if position + batch_size > size:
            break
        if batches and fields[0] <= batches[-1].last_offset:
            damage = f"batch at offset {fields[0]} follows one ending at {batches[-1].last_offset}"
            return batches, f"{damage}, at byte {position}"
        batches.append(
            _Batch(position, batch_size, fields[0], fields[0] + fields[6], fields[9], fields[5])
        )
        position += batch_size
    return batches, None


def read_local_range(
    planned: LocalRange,
    *,
    min_timestamp: int | None,
    max_timestamp: int | None,
    read_committed: bool,
) -> Iterator[pa.RecordBatch]:
    """The records of ``planned`` as ``decode.SCHEMA`` batches, read from its file."""
    from .decode import decode_segment

    length = planned.end_position - planned.start_position
    data = _read_bytes(Path(planned.log_path), planned.start_position, length)
    if len(data) < length:
        raise CorruptRecordError(
            f"{planned.log_path} has {planned.start_position + len(data)} bytes, fewer than the "
            f"{planned.end_position} it had when the query was planned (truncated since); "
            "run the query again"
        )
    return decode_segment(
        data,
        topic=planned.topic,
        partition=planned.partition,
        segment_id=planned.segment_id,
        start_offset=planned.first_offset,
        end_offset=planned.last_offset,
        min_timestamp=min_timestamp,
        max_timestamp=max_timestamp,
        aborted=[(txn.producer_id, txn.first_offset) for txn in planned.aborted],
        read_committed=read_committed,
    )


def _read_bytes(path: Path, position: int, length: int) -> bytes:
    """The bytes of a segment file; one retention renamed for deletion is still read."""
    for candidate in (path, path.with_name(path.name + files.DELETED_SUFFIX)):
        try:
            with open(candidate, "rb") as file:
                return os.pread(file.fileno(), length, position)
        except FileNotFoundError:
            continue
    raise FileNotFoundError(
        f"{path} was deleted since the query was planned (or is not reachable from this "
        "executor: local segments need the log dirs under the same path on every executor)"
    )
