"""The ``tierlog`` source as a stream: micro-batches of the records tiered since the last one.

An offset is a JSON object mapping ``"topic/partition"`` to the next offset to read. Every call
to ``latestOffset`` replays the metadata files again, so segments tiered since, and partitions
and topics that get their first segment, show up in the next micro-batch (new partitions from
their earliest remote offset). A micro-batch is planned and read by the batch reader's code: one
task per segment range, cut along offset indexes, decoded to Arrow.

``maxSegmentsPerTrigger`` and ``maxRecordsPerTrigger`` cap a micro-batch through Spark's
admission control. Partitions take turns a segment at a time, the longest backlog first, so a
busy partition does not starve the others. ``Trigger.AvailableNow`` reads what was tiered when
the query started, in as many capped micro-batches as that takes.

Retention may delete remote segments before a query reads them. As with Kafka's Spark source,
the query then fails naming the partition and the offsets lost, or, with
``failOnDataLoss=false``, logs a warning and continues from the earliest remote offset.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType
from tierlog.errors import TierlogError

from .datasource import SegmentPartition, plan_tasks, read_ranges
from .options import EARLIEST, LATEST, ReadOptions, StreamOptions
from .planning import Bounds, SegmentRange, plan_reads, within
from .pushdown import Selection

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["TierlogDataLossError", "TierlogStreamReader", "offset_key"]

log = logging.getLogger(__name__)

#: Spark's offsets: "topic/partition" -> the next offset to read.
Offsets = dict[str, int]


class TierlogDataLossError(TierlogError):
    """Offsets a stream had still to read are gone from remote storage."""


def offset_key(topic: str, partition: int) -> str:
    """The key of a partition in the stream's offsets."""
    return f"{topic}/{partition}"


def _partition_of(key: str) -> tuple[str, int]:
    topic, _, partition = key.rpartition("/")
    return topic, int(partition)


def _ordered(offsets: Mapping[str, int]) -> Offsets:
    """``offsets`` in one fixed order: Spark compares offsets by their JSON text."""
    return {key: offsets[key] for key in sorted(offsets, key=_partition_of)}


class TierlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets and plans on the driver from offline metadata; tasks read like the batch reader's.

    Spark keeps one instance on the driver for the life of a query, so the AvailableNow target
    can be remembered between calls.
    """

    def __init__(self, options: ReadOptions, stream: StreamOptions, schema: StructType) -> None:
        self.options = options
        self.stream = stream
        self.schema = schema
        self._target: Offsets | None = None
        self._reported: set[tuple[str, int]] = set()

    @classmethod
    def from_options(cls, options: Mapping[str, str], schema: StructType) -> TierlogStreamReader:
        """Parse Spark's options; raises TierlogOptionError naming a wrong one."""
        read = ReadOptions.from_options(options, streaming=True)
        return cls(read, StreamOptions.from_options(options, read.topics), schema)

    # --- offsets ------------------------------------------------------------------------------

    def initialOffset(self) -> Offsets:
        starting = self.stream.starting_offsets
        offsets: Offsets = {}
        for key, ranges in self._tiered().items():
            earliest, latest = ranges[0].first_offset, ranges[-1].last_offset + 1
            if starting == "latest":
                offsets[key] = latest
            elif isinstance(starting, Mapping):
                topic, partition = _partition_of(key)
                wanted = starting.get(topic, {}).get(partition, EARLIEST)
                offsets[key] = {EARLIEST: earliest, LATEST: latest}.get(wanted, wanted)
            else:
                offsets[key] = earliest
        if isinstance(starting, Mapping):  # kept for partitions with nothing tiered yet
            chosen = self.options.partitions
            for topic, wanted in starting.items():
                for partition, offset in wanted.items():
                    if offset >= 0 and (chosen is None or partition in chosen):
                        offsets.setdefault(offset_key(topic, partition), offset)
        return _ordered(offsets)

    def getDefaultReadLimit(self) -> ReadLimit:
        # Spark passes one limit; when both options are set, latestOffset applies the other too.
        if self.stream.max_segments_per_trigger is not None:
            return ReadMaxFiles(self.stream.max_segments_per_trigger)
        if self.stream.max_records_per_trigger is not None:
            return ReadMaxRows(self.stream.max_records_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {key: ranges[-1].last_offset + 1 for key, ranges in self._tiered().items()}

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        """Where the next micro-batch ends: every partition's tiered end, within ``limit``."""
        end = dict(start)
        pending: dict[str, list[SegmentRange]] = {}
        for key, ranges in self._tiered().items():
            first = self._first_offset(key, start.get(key), ranges)
            stop = ranges[-1].last_offset + 1
            if self._target is not None:
                stop = min(stop, self._target.get(key, first))
            end[key] = first
            pending[key] = list(within(ranges, Bounds(first, stop - 1)))
        end.update(_admit(pending, *self._caps(limit)))
        return _ordered(end)

    def _caps(self, limit: ReadLimit) -> tuple[int | None, int | None]:
        """The most segments and offsets a micro-batch may take; None is no cap."""
        if isinstance(limit, ReadAllAvailable):
            return None, None  # Spark's rule: this limit overrides the options
        segments = self.stream.max_segments_per_trigger
        records = self.stream.max_records_per_trigger
        if isinstance(limit, ReadMaxFiles):
            segments = limit.max_files if segments is None else min(segments, limit.max_files)
        if isinstance(limit, ReadMaxRows):
            records = limit.max_rows if records is None else min(records, limit.max_rows)
        return segments, records

    # --- micro-batches ------------------------------------------------------------------------

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        tiered = self._tiered()
        planned: list[SegmentRange] = []
        for key in sorted(end, key=_partition_of):
            stop = end[key]
            ranges = tiered.get(key)
            if not ranges:
                begin = start.get(key)
                if begin is not None and begin < stop:
                    self._data_lost(key, begin, None)
                continue
            first = self._first_offset(key, start.get(key), ranges)
            planned.extend(within(ranges, Bounds(first, stop - 1)))
        return plan_tasks(self.options, planned)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, SegmentPartition):
            return iter(())
        everything = Selection(None, None, Bounds())
        return read_ranges(self.options, everything, self.schema, partition.ranges)

    def commit(self, end: Offsets) -> None:
        """Nothing to release: the reader holds nothing between micro-batches, and what remote
        storage keeps is the brokers' retention's business, not a reader's."""

    def stop(self) -> None:
        from .storage import close_all

        close_all()  # a storage host the planner started to read offset indexes

    # --- helpers ------------------------------------------------------------------------------

    def _tiered(self) -> dict[str, list[SegmentRange]]:
        """Every selected partition's tiered ranges, in offset order, from the metadata now."""
        from .metadata_source import load_remote_log_metadata

        caches = load_remote_log_metadata(
            self.options.log_dirs,
            topics=self.options.topics,
            num_partitions=self.options.num_partitions,
        )
        ranges = plan_reads(
            caches,
            topics=self.options.topics,
            partitions=self.options.partitions,
            read_committed=self.options.read_committed,
        )
        tiered: dict[str, list[SegmentRange]] = {}
        for planned in ranges:
            tip = planned.topic_id_partition
            tiered.setdefault(offset_key(tip.topic, tip.partition), []).append(planned)
        return tiered

    def _first_offset(self, key: str, offset: int | None, ranges: list[SegmentRange]) -> int:
        """Where reading ``key`` resumes: ``offset``, or its earliest remote offset if it is new
        or if retention deleted ``offset`` (raising instead when failOnDataLoss)."""
        earliest = ranges[0].first_offset
        if offset is None:
            return earliest
        if offset < earliest:
            self._data_lost(key, offset, earliest)
            return earliest
        return offset

    def _data_lost(self, key: str, offset: int, earliest: int | None) -> None:
        if earliest is None:
            what = f"offsets from {offset} on were deleted from remote storage"
            then = "skip them"
        else:
            what = (
                f"offsets {offset} to {earliest - 1} were deleted from remote storage, "
                f"which now begins at offset {earliest}"
            )
            then = f"continue from offset {earliest}"
        message = (
            f"partition {key}: {what} before this query read them (retention or "
            "DeleteRecords); records are lost"
        )
        if self.stream.fail_on_data_loss:
            raise TierlogDataLossError(f"{message}. Set option failOnDataLoss=false to {then}.")
        if (key, offset) not in self._reported:
            self._reported.add((key, offset))
            log.warning("%s; failOnDataLoss is false, so the query goes on: %s", message, then)


def _admit(
    pending: Mapping[str, list[SegmentRange]], max_segments: int | None, max_records: int | None
) -> Offsets:
    """The end offsets of the ranges a micro-batch takes from ``pending`` within the caps.

    Partitions take turns, one range each per round, the longest backlog first, so the ranges
    taken from each partition are a prefix of its pending ones and successive capped batches
    share out the partitions. The record cap may end the batch inside a range.
    """
    ends: Offsets = {}
    segments = records = 0
    order = sorted(pending, key=lambda key: (-len(pending[key]), _partition_of(key)))
    for index in range(max((len(ranges) for ranges in pending.values()), default=0)):
        for key in order:
            if index >= len(pending[key]):
                continue
            if max_segments is not None and segments >= max_segments:
                return ends
            planned = pending[key][index]
            count = planned.last_offset - planned.first_offset + 1
            if max_records is not None and records + count >= max_records:
                ends[key] = planned.first_offset + max_records - records
                return ends
            ends[key] = planned.last_offset + 1
            segments += 1
            records += count
    return ends
