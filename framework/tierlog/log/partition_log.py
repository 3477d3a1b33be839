"""A partition's local log: ordered segments, offsets, producer state, epochs, recovery, retention.

This is Kafka's ``UnifiedLog`` + ``LocalLog`` + ``LogLoader`` for one partition directory. The
append path validates batch headers (length, magic, CRC) and, for a client's batches, every
record (``records.validation``: Kafka's ``LogValidator``), rewrites the base offset, partition
leader epoch and (under LogAppendTime, or when the records disagree with it) the max timestamp
in place, checks idempotent and transactional producers, and writes the bytes with one
``os.pwrite`` (one ``os.pwritev`` of stamped header copies and the untouched records for
read-only input). The read path finds the batch holding the fetch offset through the sparse
offset index and returns whole batches with one ``os.pread``.

Offsets the log keeps, lowest to highest::

    log_start_offset <= local_log_start_offset <= last_stable_offset <= high_watermark
        <= log_end_offset

``log_start_offset`` is the first offset of the partition anywhere (local or tiered);
``local_log_start_offset`` the first one still on local disk. The two differ only when the
topic is tiered and local retention removed segments that remote storage still holds.

Durability: batches reach the page cache at once and the device at ``flush`` (by
``flush.messages``, ``flush.ms``, at every roll, and at close). After an unclean stop (no
``.kafka_cleanshutdown`` marker) the segments from the recovery point on are scanned, the tail
after the last valid batch is cut, indexes are rebuilt and producer state is replayed.

Thread-safety: one lock per partition log. Appends hold it throughout; reads hold it only to
find the segment and position, then read the file without it (the segment's file stays open
until the read is done, even if retention deletes the segment meanwhile).

The larger pieces live in their own modules, as functions that take the log: opening and crash
recovery in ``loading``, the append path in ``appending``, the read path in ``reading``,
truncation and starts from remote storage in ``truncation``, the retention rules in
``retention``, ListOffsets' search in ``timestamp_search``, what tiered storage may copy in
``uploadable``, and compaction in the ``cleaner`` package.
"""

from __future__ import annotations

import bisect
import logging
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

from ..config import TopicConfig
from ..errors import KafkaStorageError, OffsetOutOfRangeError
from ..model import TopicPartition
from . import files, reading, truncation
from .appending import append
from .checkpoint import OFFSET_CHECKPOINT_VERSION, read_offset_checkpoint, write_atomically
from .epoch_cache import EpochEntry, LeaderEpochCache, LeaderEpochCheckpointFile
from .files import HIGH_WATERMARK_CHECKPOINT as HIGH_WATERMARK_CHECKPOINT
from .loading import load
from .log_batches import iter_log_batches
from .log_config import LogConfig
from .producer_state import AppendOrigin, CompletedTxn, ProducerStateManager
from .results import (
    FetchDataInfo,
    FetchIsolation,
    LogAppendInfo,
    LogOffsetMetadata,
    SegmentInfo,
    TimestampAndOffset,
)
from .retention import apply_retention, delete_while
from .segment import LogSegment
from .snapshot import decode_snapshot
from .timestamp_search import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    is_search_by_time,
    offset_for_timestamp,
)
from .txn_index import AbortedTxn
from .uploadable import UploadableSegment, segments_eligible_for_upload

log = logging.getLogger(__name__)

#: Rolled segments whose indexes stay in memory at once; the others load on use. A 1 GiB
#: segment's indexes take about 5 MB, so a long log must not keep them all.
LOADED_INDEX_LIMIT: Final = 8

Clock = Callable[[], int]


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class PartitionLog:
    """The local log of one partition, in its own directory (``<topic>-<partition>``).

    Open one with ``PartitionLog.open``; close it with ``close`` (a clean shutdown: the next
    open trusts the files instead of scanning them).
    """

    def __init__(
        self,
        directory: Path,
        topic_partition: TopicPartition,
        config: LogConfig,
        clock: Clock,
    ) -> None:
        """Use ``PartitionLog.open``: this only sets fields, it reads nothing."""
        self._dir = directory
        self._topic_partition = topic_partition
        self._config = config
        self._clock = clock
        self._lock = threading.RLock()
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._next_offset = 0
        self._log_start_offset = 0
        self._local_log_start_offset = 0
        self._high_watermark = 0
        self._recovery_point = 0
        self._unflushed_messages = 0
        self._last_flush_ms = clock()
        self._roll_jitter_ms = 0
        self._highest_offset_in_remote_storage = -1
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._bound_cache: tuple[int, int, int] | None = None
        #: Rolled segments with loaded indexes, least recently used first.
        self._index_lru: OrderedDict[int, LogSegment] = OrderedDict()
        self._closed = False
        #: The log cleaner's first dirty offset: unread (None) until the cleaner first asks.
        self._cleaner_checkpoint: int | None = None
        self._cleaner_checkpoint_read = False
        epochs_file = LeaderEpochCheckpointFile.in_directory(directory)
        #: The checkpoint was missing or unreadable: loading rebuilds the cache from the batches.
        self._epochs_lost = not epochs_file.path.exists()
        #: A tiered log whose log-start checkpoint was missing: it starts at 0 until the remote
        #: log manager has seen where remote storage starts (``restore_remote_lineage``).
        self._log_start_lost = False
        try:
            self._epoch_cache = LeaderEpochCache(epochs_file)
        except KafkaStorageError as err:
            log.warning("%s; rebuilding the leader epochs from the log", err)
            self._epoch_cache = LeaderEpochCache(epochs_file, entries=())
            self._epochs_lost = True
        #: The cache's latest epoch, kept here for the append path; the log is the only one that
        #: changes the cache, and refreshes this after every change.
        self._latest_epoch: int | None = None
        self._producer_state = ProducerStateManager(
            directory, producer_id_expiration_ms=config.producer_id_expiration_ms
        )

    # --- opening ----------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path | str,
        config: LogConfig | TopicConfig | Mapping[str, Any] | None = None,
        *,
        topic_partition: TopicPartition | None = None,
        clock: Clock | None = None,
    ) -> PartitionLog:
        """Opens (creating if needed) the log in ``directory`` and recovers it if it must.

        ``topic_partition`` defaults to the one the directory's name (``<topic>-<partition>``)
        says. ``clock`` gives the time in epoch milliseconds (segment age, retention, append
        time). Raises KafkaStorageError if the directory cannot be read or written.
        """
        path = Path(directory)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise KafkaStorageError(f"cannot create log directory {path}: {err}") from err
        if topic_partition is None:
            topic_partition = files.parse_log_dir_name(path.name)
        log_config = LogConfig.of(config)
        self = cls(path, topic_partition, log_config, clock or _wall_clock_ms)
        self._roll_jitter_ms = self._new_roll_jitter()
        load(self)
        return self

    # --- segments ---------------------------------------------------------------------------

    def _new_segment(self, base_offset: int) -> LogSegment:
        return LogSegment.create(
            self._dir,
            base_offset,
            index_interval_bytes=self._config.index_interval_bytes,
            max_index_size=self._config.segment_index_bytes,
            now_ms=self._clock(),
        )

    def _add_segment(self, segment: LogSegment) -> None:
        self._segments.append(segment)
        self._bases.append(segment.base_offset)

    def _segment_index(self, offset: int) -> int:
        """Index of the segment holding ``offset`` (the last one starting at or before it)."""
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    @property
    def _active(self) -> LogSegment:
        return self._segments[-1]

    def _touch(self, segment: LogSegment) -> LogSegment:
        """Notes a use of a rolled segment's indexes, unloading the least recently used ones."""
        if segment is self._segments[-1]:
            return segment
        lru = self._index_lru
        lru.pop(segment.base_offset, None)
        lru[segment.base_offset] = segment
        while len(lru) > LOADED_INDEX_LIMIT:
            _, oldest = lru.popitem(last=False)
            if oldest is not self._segments[-1]:
                oldest.unload_indexes()
        return segment

    def _forget(self, segment: LogSegment) -> None:
        self._index_lru.pop(segment.base_offset, None)

    def _new_roll_jitter(self) -> int:
        jitter = self._config.segment_jitter_ms
        return random.randrange(jitter) if jitter > 0 else 0

    # --- facts ------------------------------------------------------------------------------

    @property
    def directory(self) -> Path:
        return self._dir

    @property
    def topic_partition(self) -> TopicPartition:
        return self._topic_partition

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_start_lost(self) -> bool:
        """Whether the log start is a guess (0) for want of its checkpoint, to be raised to
        where remote storage starts; a log that kept its checkpoint knows its start."""
        return self._log_start_lost

    @property
    def local_log_start_offset(self) -> int:
        return self._local_log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        with self._lock:
            active = self._active
            return LogOffsetMetadata(self._next_offset, active.base_offset, active.size)

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self.update_high_watermark(offset)

    def update_high_watermark(self, offset: int) -> int:
        """Sets the high watermark, bounded to ``[log_start_offset, log_end_offset]``."""
        with self._lock:
            return self._set_high_watermark(offset)

    def _set_high_watermark(self, offset: int) -> int:
        bounded = min(max(offset, self._log_start_offset), self._next_offset)
        self._high_watermark = bounded
        self._producer_state.on_high_watermark_updated(bounded)
        return bounded

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction not yet decided and replicated."""
        with self._lock:
            return self._producer_state.first_unstable_offset()

    @property
    def last_stable_offset(self) -> int:
        """The LSO: read_committed consumers read below it. At most the high watermark."""
        with self._lock:
            unstable = self._producer_state.first_unstable_offset()
            hw = self._high_watermark
            return unstable if unstable is not None and unstable < hw else hw

    @property
    def recovery_point(self) -> int:
        """Offsets below this are on the device; recovery scans from here."""
        return self._recovery_point

    @property
    def size(self) -> int:
        """Bytes of all local segments."""
        with self._lock:
            return sum(segment.size for segment in self._segments)

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        return self._epoch_cache

    @property
    def producer_state_manager(self) -> ProducerStateManager:
        return self._producer_state

    @property
    def latest_epoch(self) -> int | None:
        return self._epoch_cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: the largest epoch at or below ``epoch`` and where it ends."""
        with self._lock:
            return self._epoch_cache.end_offset_for(epoch, self._next_offset)

    def segments(self) -> list[SegmentInfo]:
        with self._lock:
            last = len(self._segments) - 1
            return [
                SegmentInfo(
                    s.base_offset,
                    s.size,
                    s.log_path,
                    i == last,
                    s.offset_index.is_loaded and s.time_index.is_loaded,
                )
                for i, s in enumerate(self._segments)
            ]

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    # --- append -----------------------------------------------------------------------------

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> LogAppendInfo:
        """Appends a producer's batches, assigning their offsets; returns what was appended.

        Each batch is checked (length, magic 2, CRC, ``max.message.bytes``) before anything is
        written, and a client's (``origin`` CLIENT) is decoded record by record against the
        topic's rules (``validate_produced_batch``). Its base offset and partition leader epoch
        are then set in place and, under LogAppendTime, its timestamps; under CreateTime a max
        timestamp the records disagree with is corrected, as Kafka does. A ``bytearray`` or
        writable memoryview is rewritten where it is. Of read-only input such as ``bytes`` only
        the 61-byte headers are copied (control batches, LogAppendTime and a corrected max
        timestamp need whole writable batches, so such input is copied whole).
        Idempotent and transactional producers are checked: a retried batch is answered with
        its original offsets (``duplicate``) and nothing is written; an out-of-order sequence or
        a stale epoch raises. Every error leaves the log exactly as it was.

        Raises CorruptRecordError, RecordTooLargeError, InvalidRecordError and
        InvalidTimestampError (a client's batch breaking a rule, with ``record_errors``),
        FencedLeaderEpochError (an epoch older than the log's latest),
        OutOfOrderSequenceError, InvalidProducerEpochError, InvalidTxnStateError,
        TransactionCoordinatorFencedError, KafkaStorageError.
        """
        view = memoryview(records)
        if type(records) is not bytearray and (view.format != "B" or view.ndim != 1):
            view = view.cast("B")
        return append(self, view, origin, leader_epoch)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Appends batches a leader already assigned offsets and epochs to, as they are.

        The batches must start at or after the log end and increase. Epochs found in the
        batches are recorded in the leader-epoch cache.
        """
        view = memoryview(records)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        return append(self, view, AppendOrigin.REPLICATION, None)

    def _complete_txn(self, txn: CompletedTxn, segment: LogSegment) -> None:
        producers = self._producer_state
        last_stable = producers.last_stable_offset(txn)
        if txn.is_aborted:
            segment.txn_index.append(
                AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, last_stable)
            )
        producers.complete_txn(txn)

    # --- roll -------------------------------------------------------------------------------

    def _maybe_roll(
        self, size: int, max_timestamp: int, first_offset: int, last_offset: int, now: int
    ) -> LogSegment:
        segment = self._active
        config = self._config
        if segment.size == 0:
            if segment.base_offset <= first_offset and segment.can_convert_to_relative_offset(
                last_offset
            ):
                return segment
        elif not (
            segment.size > config.segment_bytes - size
            or segment.is_full
            or not segment.can_convert_to_relative_offset(last_offset)
            or segment.time_waited_for_roll(now, max_timestamp)
            > config.segment_ms - self._roll_jitter_ms
        ):
            return segment
        return self._roll_locked(first_offset, now)

    def roll(self) -> int:
        """Closes the active segment and starts a new one at the log end (unless it is empty).

        Returns the new active segment's base offset.
        """
        with self._lock:
            self._check_open()
            if self._active.size:
                self._roll_locked(self._next_offset, self._clock())
            return self._active.base_offset

    def _roll_locked(self, new_base: int, now: int) -> LogSegment:
        old = self._active
        if old.size == 0:
            # An empty active segment is replaced rather than left behind.
            self._segments.pop()
            self._bases.pop()
            old.delete()
        else:
            old.on_become_inactive()
        producers = self._producer_state
        producers.update_map_end_offset(new_base)
        producers.take_snapshot()
        segment = self._new_segment(new_base)
        self._add_segment(segment)
        self._roll_jitter_ms = self._new_roll_jitter()
        if old.size:
            self._flush_locked(now, up_to=new_base)
            self._touch(old)
        log.debug("rolled %s to a new segment at offset %d", self._dir, new_base)
        return segment

    # --- reads ------------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        isolation: FetchIsolation = FetchIsolation.LOG_END,
        *,
        min_one_message: bool = True,
    ) -> FetchDataInfo:
        """Whole batches from the one holding ``fetch_offset``, at most ``max_bytes`` of them.

        ``isolation`` bounds the read by the log end (followers), the high watermark, or the
        last stable offset (read_committed, which also gets the aborted transactions that
        overlap the batches returned). With ``min_one_message`` (Kafka's behaviour for the
        first partition of a fetch) a first batch larger than ``max_bytes`` is returned whole.
        Raises OffsetOutOfRangeError for an offset below the local log start or past the end.
        """
        return reading.read(self, fetch_offset, max_bytes, isolation, min_one_message)

    def collect_aborted_transactions(self, start: int, upper: int) -> tuple[AbortedTxn, ...]:
        """The aborted transactions overlapping offsets ``[start, upper)``."""
        return reading.collect_aborted_txns(self, start, upper)

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets on the local log: the first record at or after ``timestamp``.

        Also answers Kafka's special timestamps: -2 (earliest), -4 (earliest local),
        -1 (latest: the log end), -3 (the record with the largest timestamp). -5 (latest
        tiered) is the remote tier's to answer and gives None here, as does a timestamp
        newer than every record. Below -5 is a time like any other (before every record).
        """
        with self._lock:
            self._check_open()
            return offset_for_timestamp(self, timestamp)

    # --- flush ------------------------------------------------------------------------------

    def flush(self) -> None:
        """Forces everything appended so far to the device and advances the recovery point."""
        with self._lock:
            self._check_open()
            self._flush_locked(self._clock())

    def maybe_flush(self, now_ms: int | None = None) -> bool:
        """Flushes if ``flush.ms`` has passed since the last flush with data unflushed.

        Meant for a periodic task (Kafka's log flusher); also deletes segment files whose
        ``file.delete.delay.ms`` has passed. Returns whether it flushed.
        """
        with self._lock:
            self._check_open()
            now = self._clock() if now_ms is None else now_ms
            self._delete_due_files(now)
            if self._unflushed_messages and now - self._last_flush_ms >= self._config.flush_ms:
                self._flush_locked(now)
                return True
            return False

    def _flush_locked(self, now: int, up_to: int | None = None, *, closing: bool = False) -> None:
        target = self._next_offset if up_to is None else up_to
        active = self._segments[-1]
        for segment in self._segments[self._segment_index(self._recovery_point) :]:
            if segment.base_offset >= target:
                break
            segment.flush(indexes=closing or segment is not active)
        if up_to is None:
            self._unflushed_messages = 0
            self._last_flush_ms = now
        if target > self._recovery_point:
            self._recovery_point = target
            if up_to is not None:
                self._write_checkpoint(files.RECOVERY_POINT_CHECKPOINT, target)

    # --- retention and truncation ---------------------------------------------------------

    @property
    def highest_offset_in_remote_storage(self) -> int:
        """The last offset tiered storage holds (-1: none); local retention waits for it."""
        return self._highest_offset_in_remote_storage

    @highest_offset_in_remote_storage.setter
    def highest_offset_in_remote_storage(self, offset: int) -> None:
        with self._lock:
            self._highest_offset_in_remote_storage = max(
                offset, self._highest_offset_in_remote_storage
            )

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Applies retention; returns how many segments were deleted.

        Deletes whole segments from the oldest on, never the active one and never one at or
        above the high watermark: those wholly below the log start offset, then while the log
        is over ``retention.bytes``, then those whose newest record is older than
        ``retention.ms``. A tiered topic uses ``local.retention.*`` instead, deletes only
        segments already in remote storage, and moves only the local log start offset.
        """
        with self._lock:
            self._check_open()
            now = self._clock() if now_ms is None else now_ms
            deleted = apply_retention(self, now)
            self._delete_due_files(now)
            return deleted

    def _schedule_delete(self, segment: LogSegment, now: int) -> None:
        self._forget(segment)
        segment.change_file_suffix(files.DELETED_SUFFIX)
        delay = self._config.file_delete_delay_ms
        if delay <= 0:
            segment.delete()
        else:
            self._pending_deletes.append((now + delay, segment))

    def _delete_due_files(self, now: int) -> None:
        due = [s for when, s in self._pending_deletes if when <= now]
        if due:
            self._pending_deletes = [(w, s) for w, s in self._pending_deletes if w > now]
            for segment in due:
                segment.delete()

    def _increment_log_start_offset(self, offset: int) -> None:
        self._log_start_offset = offset
        self._log_start_lost = False
        self._local_log_start_offset = max(self._local_log_start_offset, offset)
        self._epoch_cache.truncate_from_start(offset)
        self._latest_epoch = self._epoch_cache.latest_epoch
        self._producer_state.on_log_start_offset_incremented(offset)
        if self._high_watermark < offset:
            self._set_high_watermark(offset)
        self._write_checkpoint(files.LOG_START_OFFSET_CHECKPOINT, offset)

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: moves the log start offset up to ``offset``; returns the new start.

        Segments wholly below the new start are deleted at once. Raises OffsetOutOfRangeError
        for an offset above the high watermark.
        """
        with self._lock:
            self._check_open()
            if offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot move the log start offset of {self._topic_partition} to {offset}: "
                    f"the high watermark is {self._high_watermark}"
                )
            if offset > self._log_start_offset:
                self._increment_log_start_offset(offset)
                delete_while(self, lambda s, nxt: nxt <= offset, self._clock())
            return self._log_start_offset

    def truncate_to(self, offset: int) -> bool:
        """Removes every batch from the one holding ``offset`` on (a follower diverged).

        Returns False when there is nothing at or past ``offset``. Producer state, leader
        epochs and the transaction indexes follow the log back.
        """
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        with self._lock:
            self._check_open()
            return truncation.truncate_to(self, offset, self._clock())

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Deletes every segment and starts an empty log at ``offset`` (a follower that fell
        behind the leader's log start, or rebuilt from remote storage)."""
        if offset < 0:
            raise ValueError(f"cannot start a log at negative offset {offset}")
        with self._lock:
            self._check_open()
            truncation.truncate_fully(self, offset, self._clock())

    def start_from_remote(
        self,
        offset: int,
        log_start_offset: int,
        leader_epochs: Sequence[EpochEntry],
        producer_snapshot: bytes,
    ) -> None:
        """Restarts an empty log at ``offset`` on what remote storage holds below it.

        A follower whose leader keeps offsets below ``offset`` only in the remote tier takes
        the leader's log start, the leader epochs below ``offset`` and the producer state as of
        ``offset`` (the remote segment's snapshot, possibly empty) instead of the data itself.
        The snapshot is checked before anything changes: KafkaStorageError if it is corrupt.
        """
        if not 0 <= log_start_offset <= offset:
            raise ValueError(f"log start {log_start_offset} is not within [0, {offset}]")
        decode_snapshot(producer_snapshot, source=f"remote snapshot at {offset}")
        with self._lock:
            self._check_open()
            truncation.start_from_remote(
                self, offset, log_start_offset, leader_epochs, producer_snapshot, self._clock()
            )

    def restore_remote_lineage(
        self, remote_log_start: int, leader_epochs: Sequence[EpochEntry]
    ) -> None:
        """Puts back what a lost checkpoint took about offsets only remote storage holds.

        The log start rises to ``remote_log_start`` if its checkpoint was lost (never past
        the local log start, never down), and the epochs that start below the earliest one
        the local batches gave are put in front of it. Called by the remote log manager once
        remote metadata is loaded.
        """
        with self._lock:
            self._check_open()
            truncation.restore_remote_lineage(self, remote_log_start, leader_epochs)

    # --- log cleaner ------------------------------------------------------------------------

    @property
    def cleaner_checkpoint(self) -> int | None:
        """Where the log cleaner's next round starts (``cleaner-offset-checkpoint``), if set."""
        with self._lock:
            if not self._cleaner_checkpoint_read:
                self._cleaner_checkpoint = self._read_checkpoint(files.CLEANER_OFFSET_CHECKPOINT)
                self._cleaner_checkpoint_read = True
            return self._cleaner_checkpoint

    def set_cleaner_checkpoint(self, offset: int) -> None:
        """Records that the log is clean below ``offset`` (at most the log end)."""
        with self._lock:
            self._check_open()
            self._store_cleaner_checkpoint(min(offset, self._next_offset))

    def _store_cleaner_checkpoint(self, offset: int) -> None:
        self._cleaner_checkpoint = offset
        self._cleaner_checkpoint_read = True
        self._write_checkpoint(files.CLEANER_OFFSET_CHECKPOINT, offset)

    def _clamp_cleaner_checkpoint(self, offset: int) -> None:
        """After a truncation to ``offset``: what comes next there is dirty again."""
        checkpoint = self.cleaner_checkpoint
        if checkpoint is not None and checkpoint > offset:
            self._store_cleaner_checkpoint(offset)

    # --- tiering hooks ----------------------------------------------------------------------

    def segments_eligible_for_upload(self) -> list[UploadableSegment]:
        """Rolled segments wholly below the last stable offset and not yet in remote storage.

        Oldest first. The active segment never qualifies; nor does a segment holding an
        offset at or above the LSO (its transactions may still abort).
        """
        with self._lock:
            self._check_open()
            return segments_eligible_for_upload(self)

    # --- configuration and lifecycle ------------------------------------------------------

    def update_config(self, config: LogConfig | TopicConfig | Mapping[str, Any]) -> None:
        """Applies changed topic settings; they take effect from the next append or check."""
        new = LogConfig.of(config)
        with self._lock:
            self._config = new
            self._producer_state.producer_id_expiration_ms = new.producer_id_expiration_ms
            for segment in self._segments:
                segment.index_interval_bytes = new.index_interval_bytes
            self._active.resize_indexes(new.segment_index_bytes)

    def remove_expired_producers(self, now_ms: int | None = None) -> None:
        """Forgets idle producers (``producer.id.expiration.ms``); a periodic task calls it."""
        with self._lock:
            self._producer_state.remove_expired_producers(
                self._clock() if now_ms is None else now_ms
            )

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"the log of {self._topic_partition} is closed")

    def checkpoint_high_watermark(self) -> None:
        """Saves the high watermark, so a crash restarts it near where it was, not at 0."""
        with self._lock:
            if not self._closed:
                self._write_checkpoint(files.HIGH_WATERMARK_CHECKPOINT, self._high_watermark)

    def close(self) -> None:
        """Clean shutdown: flushes, snapshots producer state, checkpoints, writes the marker."""
        with self._lock:
            if self._closed:
                return
            now = self._clock()
            self._flush_locked(now, closing=True)
            producers = self._producer_state
            producers.update_map_end_offset(self._next_offset)
            producers.take_snapshot()
            self._write_checkpoint(files.RECOVERY_POINT_CHECKPOINT, self._next_offset)
            self._write_checkpoint(files.LOG_START_OFFSET_CHECKPOINT, self._log_start_offset)
            self._write_checkpoint(files.HIGH_WATERMARK_CHECKPOINT, self._high_watermark)
            for _, segment in self._pending_deletes:
                segment.delete()
            self._pending_deletes.clear()
            for segment in self._segments:
                segment.close()
            write_atomically(self._dir / files.CLEAN_SHUTDOWN_MARKER, b"")
            self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"PartitionLog({str(self._dir)!r}, log_start={self._log_start_offset}, "
            f"log_end={self._next_offset}, segments={len(self._segments)})"
        )

    # --- checkpoints ----------------------------------------------------------------------

    def _write_checkpoint(self, name: str, offset: int) -> None:
        """Kafka's offset checkpoint text (version, count, ``<topic> <partition> <offset>``)."""
        tp = self._topic_partition
        text = f"{OFFSET_CHECKPOINT_VERSION}\n1\n{tp.topic} {tp.partition} {offset}\n"
        write_atomically(self._dir / name, text.encode("utf-8"))

    def _read_checkpoint(self, name: str) -> int | None:
        tp = self._topic_partition
        return read_offset_checkpoint(self._dir / name, tp.topic, tp.partition)


__all__: Sequence[str] = (
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIERED_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "LOADED_INDEX_LIMIT",
    "MAX_TIMESTAMP",
    "PartitionLog",
    "SegmentInfo",
    "UploadableSegment",
    "is_search_by_time",
    "iter_log_batches",
)
