"""The Python reader's tasks as the JVM reader reads them: ranges of bytes, resolved on the driver.

A task of the Python reader names segment ranges and leaves the rest to the executor: fetching
through the storage plugin, reading transaction indexes for read_committed. The JVM reader's
executors have no plugin, so every range is resolved here, on the driver, into what the JVM
decodes alone: where its bytes are (``tierlog_locate_log_segment``: a file, a signed URL, or
stored chunks with their key) and, under read_committed, the aborted transactions overlapping
it. Offsets, timestamps and isolation are the same bounds ``datasource.read_range`` and
``local_segments.read_local_range`` give ``decode_segment``, so both readers decode the same
records.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from tierlog.errors import RemoteResourceNotFoundError, TierlogError
from tierlog.log import files
from tierlog.model import IndexType, RemoteLogSegmentId, RemoteLogSegmentMetadata

from ..datasource import SegmentPartition
from ..local_segments import LocalRange, LocalSegmentPartition
from ..planning import Bounds, SegmentRange
from ..transactions import aborted_transactions

if TYPE_CHECKING:
    from pyspark.sql.datasource import InputPartition
    from tierlog.spi import RemoteStorageManager

__all__ = ["SEGMENT_URL_LIFETIME_S", "SegmentNotLocatedError", "TaskResolver"]

#: How long a signed URL in a task stays valid: tasks of a long job may wait hours for a slot.
SEGMENT_URL_LIFETIME_S = 6 * 3600


class SegmentNotLocatedError(TierlogError):
    """The storage plugin cannot say where a planned segment's bytes are."""


class TaskResolver:
    """Turns one query's planned tasks into the JVM reader's task objects.

    ``storage`` is called once, when a remote range needs it. Transaction indexes are fetched
    once per query: the ranges of a partition share most of the segments they search for
    aborted transactions.
    """

    def __init__(
        self,
        storage: Callable[[], RemoteStorageManager],
        *,
        bounds: Bounds,
        read_committed: bool,
    ) -> None:
        self._make_storage = storage
        self.bounds = bounds
        self.read_committed = read_committed

    @functools.cached_property
    def storage(self) -> RemoteStorageManager:
        return self._make_storage()

    @functools.cached_property
    def _indexes(self) -> _IndexCache:
        return _IndexCache(self.storage)

    def tasks(self, partitions: Sequence[InputPartition]) -> list[dict[str, Any]]:
        """One task object per planned partition, in order."""
        result = []
        for partition in partitions:
            if isinstance(partition, SegmentPartition):
                ranges = [self.remote_range(planned) for planned in partition.ranges]
            elif isinstance(partition, LocalSegmentPartition):
                ranges = [self.local_range(partition.range)]
            else:
                raise TypeError(f"not a tierlog task: {partition!r}")
            result.append({"ranges": ranges})
        return result

    def remote_range(self, planned: SegmentRange) -> dict[str, Any]:
        """A remote segment range: its bytes located, its aborted transactions resolved."""
        segment = planned.segment
        aborted: list[list[int]] = []
        if self.read_committed:
            found = aborted_transactions(
                cast("RemoteStorageManager", self._indexes),
                planned.txn_segments,
                planned.first_offset,
                planned.last_offset,
                planned.local_aborted,
            )
            aborted = [[txn.producer_id, txn.first_offset] for txn in found]
        # The positions are fetch_log_segment's (end inclusive, None to the end), which the
        # hook takes as they are; the location's own end is exclusive, as a source's is.
        location = self.storage.locate_log_segment(
            segment, planned.start_position, planned.end_position, SEGMENT_URL_LIFETIME_S
        )
        if location is None:
            raise SegmentNotLocatedError(
                f"storage plugin {self.storage.provider!r} cannot tell where the bytes of "
                f"segment {segment.remote_log_segment_id} are, so the JVM reader cannot read "
                "it; set spark.tierlog.reader to python to read through the plugin"
            )
        tip = segment.topic_id_partition
        return self._range(
            tip.topic,
            tip.partition,
            str(segment.remote_log_segment_id.id),
            planned.first_offset,
            planned.last_offset,
            aborted,
            location.to_json(),
        )

    def local_range(self, planned: LocalRange) -> dict[str, Any]:
        """A range of a broker's local segment file, read from the file (or its ``.deleted``
        rename, as ``local_segments`` does)."""
        source = {
            "kind": "file",
            "path": planned.log_path,
            "start": planned.start_position,
            "end": planned.end_position,
            "alsoTry": [planned.log_path + files.DELETED_SUFFIX],
        }
        aborted = [[txn.producer_id, txn.first_offset] for txn in planned.aborted]
        return self._range(
            planned.topic,
            planned.partition,
            planned.segment_id,
            planned.first_offset,
            planned.last_offset,
            aborted if self.read_committed else [],
            source,
        )

    def _range(
        self,
        topic: str,
        partition: int,
        segment_id: str,
        first_offset: int,
        last_offset: int,
        aborted: list[list[int]],
        source: dict[str, Any],
    ) -> dict[str, Any]:
        return {
            "topic": topic,
            "partition": partition,
            "segmentId": segment_id,
            "firstOffset": first_offset,
            "lastOffset": last_offset,
            "minTimestamp": self.bounds.min_timestamp,
            "maxTimestamp": self.bounds.max_timestamp,
            "readCommitted": self.read_committed,
            "aborted": sorted(aborted, key=lambda txn: (txn[1], txn[0])),
            "source": source,
        }


class _IndexCache:
    """``fetch_index`` of a storage manager, each index fetched once (only what
    ``transactions.aborted_transactions`` calls)."""

    def __init__(self, storage: RemoteStorageManager) -> None:
        self._storage = storage
        self._fetched: dict[tuple[RemoteLogSegmentId, IndexType], bytes | None] = {}

    def fetch_index(self, segment: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        key = (segment.remote_log_segment_id, index_type)
        if key not in self._fetched:
            try:
                stream = self._storage.fetch_index(segment, index_type)
            except RemoteResourceNotFoundError:
                self._fetched[key] = None
            else:
                try:
                    self._fetched[key] = bytes(stream.read())
                finally:
                    stream.close()
        data = self._fetched[key]
        if data is None:
            raise RemoteResourceNotFoundError(
                f"no {index_type.name} index for {segment.remote_log_segment_id}"
            )
        return io.BytesIO(data)
