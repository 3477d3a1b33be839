"""Remote reads: the bounded reader pool, the read itself, and aborted-transaction lookup.

A fetch below the local log start is read from remote storage on ``remote.log.reader.threads``
threads. Their queue holds at most ``remote.log.reader.max.pending.tasks`` reads; beyond that a
fetch is answered with a retriable error at once rather than growing a backlog nobody will wait
for. The request waits for the reads in the broker's delayed-remote-fetch purgatory.
"""

from __future__ import annotations

import logging
import queue
import struct
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import BinaryIO, TypeVar

import attrs

from ..errors import OffsetOutOfRangeError, RemoteStorageQueueFullError
from ..log import AbortedTxn
from ..model import RemoteLogSegmentMetadata, RemoteLogSegmentState, TopicIdPartition
from ..spi import RemoteLogMetadataManager, RemoteStorageManager
from .index_cache import RemoteIndexCache

log = logging.getLogger(__name__)

T = TypeVar("T")

#: base offset (8), batch length (4), partition leader epoch (4), magic (1), crc (4),
#: attributes (2), last offset delta (4), base timestamp (8), max timestamp (8)
_HEADER = struct.Struct(">qiibIhiqq")
LOG_OVERHEAD = 12


@attrs.frozen
class BatchHeader:
    base_offset: int
    size: int
    last_offset: int
    max_timestamp: int


def _read_exactly(stream: BinaryIO, size: int) -> bytes:
    chunks, remaining = [], size
    while remaining > 0:
        chunk = stream.read(remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def iter_stream_batches(stream: BinaryIO) -> Iterator[tuple[BatchHeader, bytes]]:
    """Whole record batches from a segment stream, with the header fields a read needs."""
    while True:
        head = _read_exactly(stream, _HEADER.size)
        if len(head) < _HEADER.size:
            return
        base, length, _epoch, _magic, _crc, _attrs, delta, _first_ts, max_ts = _HEADER.unpack(head)
        size = LOG_OVERHEAD + length
        rest = _read_exactly(stream, size - _HEADER.size)
        if len(rest) < size - _HEADER.size:
            return
        yield BatchHeader(base, size, base + delta, max_ts), head + rest


@attrs.frozen
class RemoteFetchResult:
    """Whole batches read from the remote tier, starting with the one holding the offset.

    ``next_offset`` is the offset after the last batch returned (the fetch offset when none).
    """

    records: bytes
    segment: RemoteLogSegmentMetadata | None
    next_offset: int = -1
    aborted_transactions: tuple[AbortedTxn, ...] | None = None


def find_segment(
    metadata: RemoteLogMetadataManager,
    partition: TopicIdPartition,
    epoch: int | None,
    offset: int,
) -> RemoteLogSegmentMetadata:
    if epoch is None:
        raise OffsetOutOfRangeError(f"offset {offset} of {partition} has no leader epoch")
    segment = metadata.remote_log_segment_metadata(partition, epoch, offset)
    if segment is None:
        raise OffsetOutOfRangeError(f"offset {offset} of {partition} is not in remote storage")
    return segment


def read_remote(
    storage: RemoteStorageManager,
    metadata: RemoteLogMetadataManager,
    indexes: RemoteIndexCache,
    partition: TopicIdPartition,
    epoch_for_offset: Callable[[int], int | None],
    fetch_offset: int,
    max_bytes: int,
    *,
    min_one_message: bool,
) -> RemoteFetchResult:
    """Kafka's RemoteLogManager.read: index lookup, then whole batches up to ``max_bytes``.

    A segment with no batch at or above the offset (gaps) hands over to the next segment.
    """
    offset = fetch_offset
    segment = find_segment(metadata, partition, epoch_for_offset(offset), offset)
    while True:
        position = indexes.get(segment).lookup_offset(offset)
        out: list[bytes] = []
        total = 0
        next_offset = fetch_offset
        with storage.fetch_log_segment(segment, position) as stream:
            for header, data in iter_stream_batches(stream):
                if header.last_offset < fetch_offset:
                    continue
                if total + header.size > max_bytes and (out or not min_one_message):
                    break
                out.append(data)
                total += header.size
                next_offset = header.last_offset + 1
        if out or segment.end_offset < offset:
            return RemoteFetchResult(b"".join(out), segment, next_offset)
        offset = segment.end_offset + 1
        nxt = metadata.remote_log_segment_metadata(partition, _last_epoch(segment), offset)
        if nxt is None:
            nxt_epoch = epoch_for_offset(offset)
            nxt = (
                None
                if nxt_epoch is None
                else metadata.remote_log_segment_metadata(partition, nxt_epoch, offset)
            )
        if nxt is None:
            return RemoteFetchResult(b"", segment, fetch_offset)
        segment = nxt


def collect_aborted_transactions(
    metadata: RemoteLogMetadataManager,
    indexes: RemoteIndexCache,
    partition: TopicIdPartition,
    start: int,
    upper: int,
    local: Callable[[int, int], tuple[AbortedTxn, ...]],
    local_log_start: int,
) -> tuple[AbortedTxn, ...]:
    """Aborted transactions overlapping ``[start, upper)``, from remote and then local indexes.

    An abort is indexed in the segment holding its marker, which may follow the data, so the
    search goes on until an entry's last stable offset passes ``upper`` (Kafka's completeness
    rule) or the segments run out.
    """
    found: list[AbortedTxn] = []
    segments = sorted(
        (
            s
            for s in metadata.list_remote_log_segments(partition)
            if s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED and s.end_offset >= start
        ),
        key=lambda s: s.start_offset,
    )
    for segment in segments:
        if segment.start_offset >= local_log_start:
            break
        for txn in indexes.aborted_transactions(segment):
            if txn.last_offset >= start and txn.first_offset < upper:
                found.append(txn)
            if txn.last_stable_offset > upper:
                return tuple(found)
    return tuple(found) + local(max(start, local_log_start), upper)


def _last_epoch(segment: RemoteLogSegmentMetadata) -> int:
    return segment.segment_leader_epochs[-1][0]


class ReaderPool:
    """Fixed threads over a bounded queue; ``submit`` refuses work when the queue is full."""

    def __init__(self, threads: int, max_pending: int, name: str = "remote-log-reader") -> None:
        self._queue: queue.Queue[tuple[Future[object], Callable[[], object]] | None] = queue.Queue(
            maxsize=max(1, max_pending)
        )
        self._active = 0
        self._lock = threading.Lock()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}{n}", daemon=True)
            for n in range(max(1, threads))
        ]
        for thread in self._threads:
            thread.start()

    @property
    def queue_size(self) -> int:
        return self._queue.qsize()

    @property
    def active_threads(self) -> int:
        with self._lock:
            return self._active

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        if self._closed:
            raise RemoteStorageQueueFullError("the remote log reader pool is shut down")
        try:
            self._queue.put_nowait((future, fn))  # type: ignore[arg-type]
        except queue.Full:
            raise RemoteStorageQueueFullError(
                f"the remote log reader queue is full ({self._queue.maxsize} pending reads; "
                "remote.log.reader.max.pending.tasks): retry the fetch"
            ) from None
        return future

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn = item
            if not future.set_running_or_notify_cancel():
                continue
            with self._lock:
                self._active += 1
            try:
                result = fn()
            except BaseException as err:
                future.set_exception(err)
            else:
                future.set_result(result)
            finally:
                with self._lock:
                    self._active -= 1

    def shutdown(self) -> None:
        """Cancels queued reads and joins the threads once their current read ends."""
        self._closed = True
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()
