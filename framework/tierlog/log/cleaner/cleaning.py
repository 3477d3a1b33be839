"""One cleaning round of one log: Kafka's ``Cleaner``.

A round has two passes. The first reads the dirty part of the log (from the cleaner checkpoint
to the first uncleanable offset: the active segment, the last stable offset, or
``min.compaction.lag.ms``) and maps every key to the offset of its latest record, skipping
aborted transactions. The second rewrites every rolled segment up to where the map reaches, in
groups that fit in one segment, keeping a record only if it is the latest of its key (and, for a
tombstone, only until its delete horizon), dropping aborted data and markers whose transaction
has no data left, and keeping each producer's last batch (emptied if need be) so that producer
state survives. Offsets never change; a rewritten batch keeps its base and last offsets.

The segments are read without the log's lock (rolled segments do not change); only the swap
takes it, and gives up if retention or a truncation changed those segments meanwhile.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

import attrs

from ...errors import TierlogError
from ...records import RecordBatch
from .. import files
from ..segment import LogSegment
from .offset_map import OffsetMap
from .rewrite import empty_batch, retained_batch
from .stats import CleanerStats
from .swap import StepHook, commit_cleaned, replace_segments
from .throttler import Throttler
from .transactions import CleanedTransactions

if TYPE_CHECKING:
    from ..partition_log import PartitionLog

log = logging.getLogger(__name__)

_INT32_MAX = (1 << 31) - 1
_MAX_TIMESTAMP = struct.Struct(">q")
_MAX_TIMESTAMP_AT = 35


class CleaningAbortedError(TierlogError):
    """The round stopped early: the cleaner is stopping or the log went away."""


@attrs.frozen
class LogToClean:
    """A compacted log and the offsets of its next round (Kafka's ``LogToClean``)."""

    log: PartitionLog
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    #: ``max.compaction.lag.ms`` has passed for its oldest dirty record.
    needs_compaction_now: bool = False

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


class _Producer(NamedTuple):
    """What the log's producer state says of a producer's last write."""

    last_data_offset: int | None
    producer_epoch: int


class _Span(NamedTuple):
    segment: LogSegment
    next_offset: int


class Cleaner:
    """Cleans logs one round at a time with one offset map (one per cleaner thread)."""

    def __init__(
        self,
        offset_map: OffsetMap,
        *,
        throttler: Throttler | None = None,
        io_buffer_size: int = 524288,
        check_done: Callable[[PartitionLog], None] | None = None,
        hook: StepHook | None = None,
    ) -> None:
        self.offset_map = offset_map
        self._throttler = throttler
        self._io_buffer_size = max(io_buffer_size, 1)
        self._check_done = check_done
        self._hook = hook

    def clean(self, target: LogToClean) -> tuple[int, CleanerStats]:
        """Runs one round; returns the offset the next one starts at, and what it did.

        Raises CleaningAbortedError when stopped, and any error of reading or writing the log
        (the caller marks the log uncleanable; the log itself is left as it was).
        """
        plog = target.log
        stats = CleanerStats()
        with plog._lock:
            plog._check_open()
            now = plog._clock()
            segments = plog._segments[:-1]
            bounds = plog._bases[1:]
            spans = [_Span(s, nxt) for s, nxt in zip(segments, bounds, strict=True)]
            producers = {
                pid: _Producer(
                    entry.last_data_offset if entry.last_data_offset >= 0 else None,
                    entry.producer_epoch,
                )
                for pid, entry in plog._producer_state.active_producers().items()
            }
            for span in spans:
                span.segment.retain()
        try:
            self.offset_map.clear()
            end = self._build_offset_map(plog, spans, target, stats)
            stats.buffer_utilization = self.offset_map.utilization
            stats.map_done_s = time.monotonic()
            config = plog._config
            to_clean = [s for s in spans if s.segment.base_offset < end]
            txns = CleanedTransactions()
            for group in group_segments_by_size(
                to_clean, config.segment_bytes, config.segment_index_bytes
            ):
                if not self._clean_segments(plog, group, end, txns, producers, now, stats):
                    log.info("%s changed while being cleaned; the round stops", plog.directory)
                    break
        finally:
            with plog._lock:
                for span in spans:
                    span.segment.release()
        stats.end_s = time.monotonic()
        return end, stats

    # --- first pass: the offset map -------------------------------------------------------

    def _build_offset_map(
        self, plog: PartitionLog, spans: Sequence[_Span], target: LogToClean, stats: CleanerStats
    ) -> int:
        """Maps the keys of the dirty range; returns where the map's coverage ends.

        That is the first uncleanable offset, unless the map filled up first: then the offset
        after the last batch mapped whole (the keys of a batch mapped in part point past it,
        so the records they supersede still go, and the batch itself is kept as it is).
        """
        start, upper = target.first_dirty_offset, target.first_uncleanable_offset
        offset_map = self.offset_map
        mapping, capacity = offset_map.mapping, offset_map.capacity
        txns = CleanedTransactions()
        end = start
        for span in spans:
            segment = span.segment
            if segment.base_offset >= upper:
                break
            if span.next_offset <= start:
                continue
            txns.add_aborted(
                plog.collect_aborted_transactions(segment.base_offset, span.next_offset)
            )
            for batch in segment.iter_batches(0):
                if batch.last_offset < start:
                    continue
                if batch.base_offset >= upper:
                    return upper
                self._check(plog)
                batch.validate()
                stats.map_bytes_read += batch.size_in_bytes
                if batch.is_control:
                    txns.on_control_batch_read(batch)
                elif not txns.on_batch_read(batch):
                    stats.map_messages_read += batch.records_count
                    for record in batch.records():
                        key = record.key
                        if key is None or record.offset < start:
                            continue
                        if len(mapping) >= capacity and key not in mapping:
                            return end  # full: this batch is only partly mapped
                        mapping[key] = record.offset
                end = batch.last_offset + 1
                offset_map.latest_offset = batch.last_offset
            self._throttle(segment.size)
        return max(end, min(upper, spans[-1].next_offset) if spans else end)

    # --- second pass: rewriting -----------------------------------------------------------

    def _clean_segments(
        self,
        plog: PartitionLog,
        group: Sequence[_Span],
        end: int,
        txns: CleanedTransactions,
        producers: dict[int, _Producer],
        now: int,
        stats: CleanerStats,
    ) -> bool:
        """Cleans ``group`` into one new segment and swaps it in; False if the log changed."""
        config = plog._config
        first = group[0].segment
        cleaned = LogSegment.create(
            plog.directory,
            first.base_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            suffix=files.CLEANED_SUFFIX,
        )
        txns.cleaned_index = cleaned.txn_index
        try:
            for span in group:
                txns.add_aborted(
                    plog.collect_aborted_transactions(span.segment.base_offset, span.next_offset)
                )
                self._clean_into(plog, span.segment, cleaned, end, txns, producers, now, stats)
            cleaned.on_become_inactive()
            cleaned.flush()
            cleaned.set_last_modified(max(span.segment.last_modified_ms for span in group))
            commit_cleaned(cleaned, self._hook or _no_hook)
        except BaseException:
            cleaned.delete()
            raise
        finally:
            txns.cleaned_index = None
        return replace_segments(plog, cleaned, [s.segment for s in group], self._hook or _no_hook)

    def _clean_into(
        self,
        plog: PartitionLog,
        source: LogSegment,
        dest: LogSegment,
        end: int,
        txns: CleanedTransactions,
        producers: dict[int, _Producer],
        now: int,
        stats: CleanerStats,
    ) -> None:
        delete_retention_ms = plog._config.delete_retention_ms
        out = bytearray()
        written: list[tuple[int, int, int]] = []
        for batch in source.iter_batches(0):
            self._check(plog)
            size = batch.size_in_bytes
            stats.bytes_read += size
            if batch.base_offset >= end:
                kept: bytes | memoryview | None = batch.raw
            else:
                batch.validate()  # a corrupt batch is never rewritten: the log is set aside
                kept = self._filter_batch(
                    batch, txns, producers, now, delete_retention_ms, end, stats
                )
            if kept is not None:
                written.append(
                    (
                        batch.last_offset,
                        _MAX_TIMESTAMP.unpack_from(kept, _MAX_TIMESTAMP_AT)[0],
                        len(kept),
                    )
                )
                out += kept
                if len(out) >= self._io_buffer_size:
                    self._write(dest, out, written, stats)
                    out = bytearray()
                    written = []
        if written:
            self._write(dest, out, written, stats)
        self._throttle(source.size)

    def _filter_batch(
        self,
        batch: RecordBatch,
        txns: CleanedTransactions,
        producers: dict[int, _Producer],
        now: int,
        delete_retention_ms: int,
        end: int,
        stats: CleanerStats,
    ) -> bytes | memoryview | None:
        """The bytes ``batch`` becomes: itself, a rewrite with fewer records, or nothing."""
        horizon = batch.delete_horizon_ms
        is_control = batch.is_control
        if is_control:
            can_discard = txns.on_control_batch_read(batch)
            discard_records = can_discard and horizon is not None and horizon <= now
        else:
            can_discard = txns.on_batch_read(batch)
            discard_records = can_discard
        retain_empty = batch.has_producer_id and self._is_last_of_producer(batch, producers)
        if discard_records and not retain_empty:
            stats.messages_read += batch.records_count
            return None
        kept = []
        all_kept = True
        tombstones = False
        latest_of = self.offset_map.mapping.get
        for record in batch.records():
            stats.messages_read += 1
            if discard_records:
                keep = False
            elif is_control or record.offset >= end:
                keep = True
            elif record.key is None:
                stats.invalid_messages += 1
                keep = False
            else:
                keep = record.offset >= latest_of(record.key, -1) and (
                    record.value is not None or horizon is None or now < horizon
                )
            if keep:
                kept.append(record)
                if record.value is None:
                    tombstones = True
            else:
                all_kept = False
        if kept:
            stats.messages_written += len(kept)
            marker_of_empty_txn = can_discard and is_control
            set_horizon = (tombstones or marker_of_empty_txn) and horizon is None
            if all_kept and not set_horizon:
                return batch.raw
            if set_horizon:
                horizon = now + delete_retention_ms
            if horizon is not None:
                stats.latest_delete_horizon = max(stats.latest_delete_horizon, horizon)
            return retained_batch(batch, kept, horizon)
        if retain_empty:
            return empty_batch(batch)
        return None

    @staticmethod
    def _is_last_of_producer(batch: RecordBatch, producers: dict[int, _Producer]) -> bool:
        """Whether the producer state still needs this batch: the active producer's last data
        batch (it holds the last sequence), or, when its last write was a marker, that marker
        (it holds the epoch that fences older producers)."""
        last = producers.get(batch.producer_id)
        if last is None:
            return False
        if last.last_data_offset is not None:
            return batch.last_offset == last.last_data_offset
        return batch.is_control and batch.producer_epoch == last.producer_epoch

    # --- plumbing -------------------------------------------------------------------------

    def _write(
        self,
        dest: LogSegment,
        data: bytearray,
        written: list[tuple[int, int, int]],
        stats: CleanerStats,
    ) -> None:
        dest.append(data, written)
        if self._hook is not None:
            self._hook("writing")
        stats.bytes_written += len(data)
        self._throttle(len(data))

    def _throttle(self, size: int) -> None:
        if self._throttler is not None:
            self._throttler.maybe_throttle(size)

    def _check(self, plog: PartitionLog) -> None:
        if plog._closed:
            raise CleaningAbortedError(f"{plog.directory} was closed while being cleaned")
        if self._check_done is not None:
            self._check_done(plog)


def group_segments_by_size(
    spans: Sequence[_Span], max_size: int, max_index_size: int
) -> Iterator[list[_Span]]:
    """Consecutive segments in groups that fit one segment: at most ``max_size`` bytes of log,
    ``max_index_size`` bytes of each index, and offsets within 2^31 of the first base."""
    group: list[_Span] = []
    log_size = index_size = time_size = 0
    for span in spans:
        segment = span.segment
        offsets = segment.offset_index.size_in_bytes
        times = segment.time_index.size_in_bytes
        fits = (
            group
            and log_size + segment.size <= max_size
            and index_size + offsets <= max_index_size
            and time_size + times <= max_index_size
            and span.next_offset - 1 - group[0].segment.base_offset <= _INT32_MAX
        )
        if group and not fits:
            yield group
            group = []
            log_size = index_size = time_size = 0
        group.append(span)
        log_size += segment.size
        index_size += offsets
        time_size += times
    if group:
        yield group


def _no_hook(step: str) -> None:
    pass
