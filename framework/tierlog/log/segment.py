"""One segment of a partition's log: a ``.log`` file of record batches and its indexes.

The segment stores batches it is handed as they are (the partition log has already validated
them and assigned their offsets), keeps the sparse offset and time indexes, and answers reads by
offset and by timestamp with whole batches. It reads only batch headers: record payloads stay
opaque, except for the one batch an offset-for-timestamp lookup has to look inside.

Writes go straight to the file with ``os.pwrite`` at the segment's end and reads use
``os.pread``, so reads of bytes already written need no lock and never move a shared file
position. The segment is not thread-safe otherwise: the partition log calls every mutating
method under its lock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple, TypeAlias

from ..errors import CorruptRecordError, KafkaStorageError
from ..records import HEADER_SIZE, LOG_OVERHEAD, NO_TIMESTAMP, BatchHeader, RecordBatch
from . import files
from .offset_index import OffsetIndex
from .results import LogOffsetMetadata, TimestampAndOffset
from .time_index import TimeIndex
from .txn_index import TransactionIndex

log = logging.getLogger(__name__)

_INT32_MAX = (1 << 31) - 1
#: The most buffers one ``pwritev`` takes: 1024 on Linux, and at least 16 anywhere (sysconf
#: answers -1 when it has no fixed limit).
_IOV_MAX = max(os.sysconf("SC_IOV_MAX"), 16) if hasattr(os, "sysconf") else 16
Buffer: TypeAlias = bytes | bytearray | memoryview
#: base offset, batch length, partition leader epoch, magic, crc, attributes, last offset delta,
#: base timestamp, max timestamp (the first 43 bytes of a batch header).
_SCAN_HEADER = struct.Struct(">qiibIhiqq")
_LENGTH = struct.Struct(">i")
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
#: Bytes read at a time while recovering; larger batches are read whole.
_RECOVERY_CHUNK = 8 * 1024 * 1024


class BatchLocation(NamedTuple):
    """Where a batch is: its position, size, last offset, and partition leader epoch."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    partition_leader_epoch: int


class SegmentRead(NamedTuple):
    """What ``LogSegment.read`` found: whole batches from the batch holding the start offset."""

    offset_metadata: LogOffsetMetadata
    records: bytes | memoryview
    first_entry_incomplete: bool
    #: The offset after the last batch returned (-1 when nothing was returned).
    next_offset: int = -1


#: Called for each valid batch while a segment is recovered (producer state, epochs, txns).
RecoveryReplay = Callable[[BatchHeader], None]


class LogSegment:
    """A segment: ``<base>.log`` with ``.index``, ``.timeindex`` and (if needed) ``.txnindex``."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        create: bool,
        now_ms: int | None = None,
        suffix: str = "",
    ) -> None:
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self._directory = Path(directory)
        self._log_path = _path(self._directory, base_offset, files.LOG_SUFFIX, suffix)
        flags = os.O_RDWR | os.O_CREAT
        try:
            self._fd = os.open(self._log_path, flags | (os.O_TRUNC if create else 0), 0o644)
        except OSError as err:
            raise KafkaStorageError(f"cannot open {self._log_path}: {err}") from err
        self._closed = False
        self._readers = 0
        self._close_when_unread = False
        #: Bytes in the ``.log`` file (read-only outside the segment).
        self.size = os.fstat(self._fd).st_size
        #: Whether either index has no room for another entry (a full index rolls the segment).
        self.is_full = False
        self.offset_index = OffsetIndex(
            _path(self._directory, base_offset, files.INDEX_SUFFIX, suffix),
            base_offset,
            max_index_size,
        )
        self.time_index = TimeIndex(
            _path(self._directory, base_offset, files.TIME_INDEX_SUFFIX, suffix),
            base_offset,
            max_index_size,
        )
        txn_path = _path(self._directory, base_offset, files.TXN_INDEX_SUFFIX, suffix)
        if create:
            self.offset_index.create()
            self.time_index.create()
            txn_path.unlink(missing_ok=True)
        self.txn_index = TransactionIndex(txn_path, base_offset)
        self._bytes_since_last_index_entry = 0
        #: (max timestamp, its batch's last offset); None until first needed.
        self._max_timestamp_and_offset: tuple[int, int] | None = None
        #: The first batch's max timestamp, which ``segment.ms`` counts from.
        self._rolling_based_timestamp: int | None = None
        self._created_ms = _now_ms() if now_ms is None else now_ms
        if not create:
            self._created_ms = self.last_modified_ms

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        now_ms: int | None = None,
        suffix: str = "",
    ) -> LogSegment:
        """A new, empty segment (stale files with the same base offset are replaced).

        ``suffix`` is added to every file name: the cleaner writes a segment as ``.cleaned``.
        """
        return cls(
            directory,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            max_index_size=max_index_size,
            create=True,
            now_ms=now_ms,
            suffix=suffix,
        )

    @classmethod
    def open(
        cls, directory: Path, base_offset: int, *, index_interval_bytes: int, max_index_size: int
    ) -> LogSegment:
        """An existing segment; its indexes are checked by ``sanity_check``."""
        return cls(
            directory,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            max_index_size=max_index_size,
            create=False,
        )

    # --- facts ------------------------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        return self._log_path

    @property
    def last_modified_ms(self) -> int:
        return int(os.fstat(self._fd).st_mtime_ns // 1_000_000)

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_timestamp_and_offset_so_far()[0]

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._max_timestamp_and_offset_so_far()[1]

    def _max_timestamp_and_offset_so_far(self) -> tuple[int, int]:
        """Known after appends; after a reopen, the time index's last entry brought up to date
        with the batch headers written after it (at most ``index.interval.bytes`` of them)."""
        if self._max_timestamp_and_offset is None:
            self.load_indexes()
            entry = self.time_index.last_entry
            best = (entry.timestamp, entry.offset)
            start = self.offset_index.lookup(entry.offset).position
            for batch in self.batches_from(start):
                if batch.max_timestamp > best[0]:
                    best = (batch.max_timestamp, batch.last_offset)
            self._max_timestamp_and_offset = best
        return self._max_timestamp_and_offset

    @property
    def largest_timestamp(self) -> int:
        """The newest record timestamp, or the file's mtime when no record has one.

        Retention by time compares this with the clock, as Kafka does.
        """
        timestamp = self.max_timestamp_so_far
        return timestamp if timestamp >= 0 else self.last_modified_ms

    def first_batch_timestamp(self) -> int:
        """The first batch's max timestamp (-1: none), which ``max.compaction.lag.ms`` counts
        from."""
        first = self._read_header(0)
        return first.max_timestamp if first else NO_TIMESTAMP

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """How long this segment has been open by ``segment.ms``'s measure.

        Kafka's rule: the new batch's timestamp minus the first batch's, when the first batch
        has one; otherwise wall time since the segment was created.
        """
        if self._rolling_based_timestamp is None and self.size > 0:
            first = self._read_header(0)
            self._rolling_based_timestamp = first.max_timestamp if first else NO_TIMESTAMP
        rolling = self._rolling_based_timestamp
        if rolling is not None and rolling >= 0:
            return message_timestamp - rolling
        return now_ms - self._created_ms

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= _INT32_MAX

    def refresh_fullness(self) -> None:
        """Recomputes ``is_full`` after the indexes changed size or limit."""
        self.is_full = self.offset_index.is_full or self.time_index.is_full

    def resize_indexes(self, max_index_size: int) -> None:
        """Applies a new ``segment.index.bytes``."""
        self.offset_index.resize(max_index_size)
        self.time_index.resize(max_index_size)
        self.refresh_fullness()

    # --- append -----------------------------------------------------------------------------

    def append(
        self,
        records: Buffer | list[Buffer],
        batches: Sequence[tuple[int, int, int]],
    ) -> None:
        """Writes validated, offset-assigned batches at the end and indexes them.

        ``records`` is one buffer or a list of pieces written back to back (with one
        ``pwritev``: the partition log hands over stamped header copies and untouched record
        bytes of a read-only request this way, instead of copying the whole request).
        ``batches`` lists each batch's ``(last_offset, max_timestamp, size_in_bytes)`` in order;
        together they cover ``records`` exactly. An index entry is added whenever more than
        ``index.interval.bytes`` were written since the last one (never when the index is full:
        it just stays sparser until the segment rolls).
        """
        if not batches:
            return
        position = self.size
        if not 0 <= batches[-1][0] - self.base_offset <= _INT32_MAX:
            raise ValueError(
                f"offset {batches[-1][0]} does not fit in segment {self.base_offset}'s indexes"
            )
        if not position:
            self._rolling_based_timestamp = max(b[1] for b in batches)
        total = self._write(records, position)
        self.size = position + total
        so_far = self._max_timestamp_and_offset
        if so_far is None:
            so_far = self._max_timestamp_and_offset_so_far()
        max_timestamp, offset_of_max = so_far
        interval = self.index_interval_bytes
        since = self._bytes_since_last_index_entry
        for last_offset, batch_max_timestamp, size in batches:
            if batch_max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = batch_max_timestamp, last_offset
            if since > interval and not self.is_full:
                # Offsets and positions only grow here, and fullness was checked: no checks.
                offset_full = self.offset_index.append_trusted(last_offset, position)
                time_full = self.time_index.append_trusted(max_timestamp, offset_of_max)
                self.is_full = offset_full or time_full
                since = 0
            position += size
            since += size
        self._bytes_since_last_index_entry = since
        if max_timestamp != so_far[0]:  # the common case keeps the tuple: no new one per append
            self._max_timestamp_and_offset = (max_timestamp, offset_of_max)

    def append_batch(
        self, records: Buffer | list[Buffer], last_offset: int, max_timestamp: int
    ) -> None:
        """``append`` for exactly one batch: the partition log's common case, with no list to
        build or walk. ``records`` (one buffer or pieces) is the whole batch."""
        position = self.size
        if not 0 <= last_offset - self.base_offset <= _INT32_MAX:
            raise ValueError(
                f"offset {last_offset} does not fit in segment {self.base_offset}'s indexes"
            )
        if not position:
            self._rolling_based_timestamp = max_timestamp
        total = self._write(records, position)
        self.size = position + total
        so_far = self._max_timestamp_and_offset
        if so_far is None:
            so_far = self._max_timestamp_and_offset_so_far()
        if max_timestamp > so_far[0]:
            so_far = self._max_timestamp_and_offset = (max_timestamp, last_offset)
        since = self._bytes_since_last_index_entry
        if since > self.index_interval_bytes and not self.is_full:
            offset_full = self.offset_index.append_trusted(last_offset, position)
            time_full = self.time_index.append_trusted(so_far[0], so_far[1])
            self.is_full = offset_full or time_full
            since = 0
        self._bytes_since_last_index_entry = since + total

    def _write(self, records: Buffer | list[Buffer], position: int) -> int:
        """Writes ``records`` (one buffer or pieces) at ``position``; returns the bytes written."""
        if isinstance(records, list):
            return self._write_pieces(records, position)
        try:
            written = os.pwrite(self._fd, records, position)
        except OSError as err:
            raise KafkaStorageError(f"cannot write to {self._log_path}: {err}") from err
        total = len(records)
        if written < total:
            self._write_rest(records, position, written)
        return total

    def _write_pieces(self, pieces: list[Buffer], position: int) -> int:
        """Writes ``pieces`` back to back from ``position``; returns the bytes written.

        One ``pwritev`` per ``IOV_MAX`` pieces. A short write (rare: a full disk, a signal)
        finishes through ``_write_rest`` on the joined pieces, and a failure cuts whatever was
        written, as for a single buffer.
        """
        done = 0
        for start in range(0, len(pieces), _IOV_MAX):
            chunk = pieces[start : start + _IOV_MAX]
            size = sum(map(len, chunk))
            try:
                written = os.pwritev(self._fd, chunk, position + done)
            except OSError as err:
                if done:
                    with contextlib.suppress(OSError):
                        os.ftruncate(self._fd, position)
                raise KafkaStorageError(f"cannot write to {self._log_path}: {err}") from err
            if written < size:
                data = b"".join(pieces)
                self._write_rest(data, position, done + written)
                return len(data)
            done += size
        return done

    def _write_rest(self, data: Buffer, position: int, done: int) -> None:
        """Finishes a short write; on failure cuts what was written, leaving no partial batch."""
        view = memoryview(data)
        total = len(view)
        try:
            while done < total:
                done += os.pwrite(self._fd, view[done:], position + done)
        except OSError as err:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, position)
            raise KafkaStorageError(f"cannot write to {self._log_path}: {err}") from err

    # --- reads ------------------------------------------------------------------------------

    def _read_header(self, position: int) -> BatchLocation | None:
        """The batch at ``position`` from its header, or None past the end of the data."""
        data = os.pread(self._fd, _SCAN_HEADER.size, position)
        if len(data) < _SCAN_HEADER.size:
            return None
        base, length, epoch, _magic, _crc, _attrs, delta, _base_ts, max_ts = _SCAN_HEADER.unpack(
            data
        )
        return BatchLocation(position, LOG_OVERHEAD + length, base, base + delta, max_ts, epoch)

    def batches_from(self, position: int, end: int | None = None) -> list[BatchLocation]:
        """Headers of the batches from ``position`` (a batch start) up to ``end``."""
        end = self.size if end is None else end
        found = []
        while position < end:
            batch = self._read_header(position)
            if batch is None or position + batch.size > end:
                break
            found.append(batch)
            position += batch.size
        return found

    def translate_offset(self, offset: int, starting_position: int = 0) -> BatchLocation | None:
        """The first batch whose last offset is at or after ``offset`` (None: past the end).

        Starts from the offset index's entry at or below ``offset`` and scans batch headers.
        """
        if not self.offset_index.is_loaded:
            self.load_indexes()
        position = max(self.offset_index.lookup(offset).position, starting_position)
        end = self.size
        while position < end:
            batch = self._read_header(position)
            if batch is None or position + batch.size > end:
                return None
            if batch.last_offset >= offset:
                return batch
            position += batch.size
        return None

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        *,
        min_one_message: bool = False,
        start: BatchLocation | None = None,
    ) -> SegmentRead | None:
        """Whole batches from the one holding ``start_offset``, at most ``max_size`` bytes.

        Nothing at or past ``max_position`` is returned (the high watermark or LSO, for
        consumers). With ``min_one_message`` the first batch is returned whole even if it is
        larger than ``max_size``; without it an oversized first batch gives empty records and
        ``first_entry_incomplete``. None when ``start_offset`` is past the segment's last
        offset. ``start`` is the batch ``translate_offset`` found, when the caller has it.
        """
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size} for a read of {self._log_path}")
        first = start if start is not None else self.translate_offset(start_offset)
        if first is None:
            return None
        position = first.position
        metadata = LogOffsetMetadata(start_offset, self.base_offset, position)
        limit = self.size if max_position is None else min(max_position, self.size)
        adjusted = max(max_size, first.size) if min_one_message else max_size
        fetch_size = min(limit - position, adjusted)
        if fetch_size < first.size:
            return SegmentRead(metadata, b"", adjusted < first.size)
        data = os.pread(self._fd, fetch_size, position)
        end, last = self._whole_batches_end(data, position, first.size)
        if not end:
            return SegmentRead(metadata, b"", False)
        base, _length, _epoch, _magic, _crc, _attrs, delta, _ts, _max_ts = _SCAN_HEADER.unpack_from(
            data, last
        )
        records = data if end == len(data) else memoryview(data)[:end]
        return SegmentRead(metadata, records, False, base + delta + 1)

    def _whole_batches_end(self, data: bytes, position: int, first_size: int) -> tuple[int, int]:
        """How many leading bytes of ``data`` (read at ``position``) are whole batches, and
        where the last of them starts.

        Walks batch lengths from the last index entry inside the data, so a large read costs a
        bisection plus at most ``index.interval.bytes`` worth of header hops.
        """
        available = len(data)
        if available < first_size:
            return 0, 0
        unpack = _LENGTH.unpack_from
        # The last index entry may be the batch the read cut; then the one before it is whole.
        for back in (0, 1, None):
            if back is None:
                walk = 0
            else:
                walk = self.offset_index.lookup_position(position + available, back) - position
                if not 0 <= walk < available:
                    continue
            last = -1
            while walk + LOG_OVERHEAD <= available:
                size = LOG_OVERHEAD + unpack(data, walk + 8)[0]
                if walk + size > available:
                    break
                last = walk
                walk += size
            if last >= 0:
                return walk, last
        return 0, 0

    def iter_batches(self, position: int = 0, end: int | None = None) -> Iterator[RecordBatch]:
        """The batches from ``position`` (a batch start) to ``end``, read in large chunks.

        Yields views into the chunk being read, not validated (the caller trusts or checks
        them); stops at a batch that does not end by ``end``.
        """
        end = self.size if end is None else end
        while position < end:
            chunk = os.pread(self._fd, min(_RECOVERY_CHUNK, end - position), position)
            available = len(chunk)
            at = 0
            while at + HEADER_SIZE <= available:
                size = LOG_OVERHEAD + _LENGTH.unpack_from(chunk, at + 8)[0]
                if at + size > available:
                    break
                yield RecordBatch.parse(chunk, at)
                at += size
            if at == 0:
                if available < HEADER_SIZE:
                    return
                size = LOG_OVERHEAD + _LENGTH.unpack_from(chunk, 8)[0]
                if size < HEADER_SIZE or position + size > end:
                    return
                whole = os.pread(self._fd, size, position)
                if len(whole) < size:
                    return
                yield RecordBatch.parse(whole)
                at = size
            position += at

    def read_all(self) -> bytes:
        """The whole ``.log`` (for tests, tools and recovery checks)."""
        return os.pread(self._fd, self.size, 0)

    def read_next_offset(self) -> int:
        """The offset after the last batch: scans headers from the last index entry."""
        self.load_indexes()
        last = self.offset_index.lookup(self.offset_index.last_offset)
        next_offset = self.base_offset
        for batch in self.batches_from(last.position):
            next_offset = batch.last_offset + 1
        return next_offset

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int = 0
    ) -> TimestampAndOffset | None:
        """The first record at or after ``starting_offset`` with a timestamp ``>= timestamp``.

        Uses the time index to skip ahead, then batch headers' max timestamps, then decodes the
        one batch that holds the answer.
        """
        self.load_indexes()
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        for batch in self.batches_from(position):
            if batch.max_timestamp < timestamp or batch.last_offset < starting_offset:
                continue
            data = os.pread(self._fd, batch.size, batch.position)
            record_batch = RecordBatch.parse(data)
            for record in record_batch.records():
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    epoch = batch.partition_leader_epoch
                    return TimestampAndOffset(
                        record.timestamp, record.offset, epoch if epoch >= 0 else None
                    )
        return None

    # --- recovery ---------------------------------------------------------------------------

    def sanity_check(self) -> None:
        """Checks the index files without loading them (Kafka's checks at log load: sizes and
        last entries); KafkaStorageError names the first corrupt file. The entries' order is
        checked when they are loaded, and a bad index is then rebuilt from the ``.log``."""
        self.offset_index.quick_check(limit=self.size)
        self.time_index.quick_check()
        self.txn_index.sanity_check()
        self.refresh_fullness()

    def load_indexes(self) -> None:
        """Loads both indexes, rebuilding them from the ``.log`` if a file turns out corrupt."""
        if self.offset_index.is_loaded and self.time_index.is_loaded:
            return
        try:
            self.offset_index.sanity_check(limit=self.size)
            self.time_index.sanity_check()
        except KafkaStorageError as err:
            log.warning("%s; rebuilding the indexes of %s", err, self._log_path)
            self._rebuild_indexes()

    def unload_indexes(self) -> None:
        """Frees the memory of a rolled segment's indexes; the next lookup loads them again."""
        self.offset_index.unload()
        self.time_index.unload()

    def _rebuild_indexes(self) -> None:
        """Indexes from the batch headers, as appending built them (the ``.log`` is untouched)."""
        self.offset_index.reset()
        self.time_index.reset()
        self.is_full = False
        since = 0
        max_timestamp, offset_of_max = NO_TIMESTAMP, self.base_offset
        for batch in self.batches_from(0):
            if batch.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = batch.max_timestamp, batch.last_offset
            if since > self.index_interval_bytes and not self.is_full:
                self.offset_index.append(batch.last_offset, batch.position)
                self.time_index.maybe_append(max_timestamp, offset_of_max)
                self.refresh_fullness()
                since = 0
            since += batch.size
        self.time_index.maybe_append(max_timestamp, offset_of_max, skip_full_check=True)
        self.offset_index.flush(fsync=False)
        self.time_index.flush(fsync=False)

    def recover(self, replay: RecoveryReplay | None = None) -> int:
        """Rebuilds the indexes from the ``.log`` and cuts it after the last valid batch.

        A batch is valid if its header parses, its CRC matches, it lies wholly in the file,
        and its offsets follow the previous batch's within the segment's range. Each valid
        batch is passed to ``replay`` (producer state, leader epochs, transaction index); when
        there is a ``replay`` the transaction index is rebuilt too. Returns the bytes cut.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.is_full = False
        if replay is not None:
            self.txn_index.reset()
        valid = 0
        last_index_entry = 0
        max_timestamp, offset_of_max = NO_TIMESTAMP, self.base_offset
        previous_last = self.base_offset - 1
        file_size = os.fstat(self._fd).st_size
        chunk = b""
        chunk_start = 0
        while valid < file_size:
            at = valid - chunk_start
            if at + HEADER_SIZE > len(chunk):
                chunk = os.pread(self._fd, _RECOVERY_CHUNK, valid)
                chunk_start, at = valid, 0
            try:
                header = RecordBatch.parse(chunk, at)
                size = header.size_in_bytes
                if valid + size > file_size:
                    raise CorruptRecordError("batch runs past the end of the file", position=valid)
                if at + size > len(chunk):
                    chunk = os.pread(self._fd, max(size, _RECOVERY_CHUNK), valid)
                    chunk_start, at = valid, 0
                    header = RecordBatch.parse(chunk, at)
                header.validate()
                if header.base_offset <= previous_last or not self.can_convert_to_relative_offset(
                    header.last_offset
                ):
                    raise CorruptRecordError(
                        f"offsets {header.base_offset}..{header.last_offset} do not follow "
                        f"{previous_last} in segment {self.base_offset}",
                        position=valid,
                    )
            except CorruptRecordError as err:
                log.warning(
                    "found an invalid batch in %s at byte %d: %s", self._log_path, valid, err
                )
                break
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
            if valid - last_index_entry > self.index_interval_bytes and not self.is_full:
                self.offset_index.append(header.last_offset, valid)
                self.time_index.maybe_append(max_timestamp, offset_of_max)
                self.refresh_fullness()
                last_index_entry = valid
            valid += size
            previous_last = header.last_offset
            if replay is not None:
                replay(header)
        truncated = file_size - valid
        if truncated:
            log.warning("truncating %d invalid bytes at the end of %s", truncated, self._log_path)
            os.ftruncate(self._fd, valid)
        self.size = valid
        self._bytes_since_last_index_entry = valid - last_index_entry
        self._max_timestamp_and_offset = (max_timestamp, offset_of_max)
        self._rolling_based_timestamp = None
        self.time_index.maybe_append(max_timestamp, offset_of_max, skip_full_check=True)
        return truncated

    def truncate_to(self, offset: int, now_ms: int | None = None) -> int:
        """Removes every batch from the one holding ``offset`` on; returns the bytes removed."""
        self.load_indexes()
        batch = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.refresh_fullness()
        self._max_timestamp_and_offset = None
        if batch is None:
            return 0
        removed = self.size - batch.position
        try:
            os.ftruncate(self._fd, batch.position)
        except OSError as err:
            raise KafkaStorageError(f"cannot truncate {self._log_path}: {err}") from err
        self.size = batch.position
        last_entry = self.offset_index.lookup(offset)
        self._bytes_since_last_index_entry = self.size - last_entry.position
        if self.size == 0:
            self._rolling_based_timestamp = None
            self._created_ms = _now_ms() if now_ms is None else now_ms
        return removed

    # --- lifecycle --------------------------------------------------------------------------

    def on_become_inactive(self) -> None:
        """The segment was rolled: its time index gets its final entry and reaches the file."""
        self.load_indexes()
        max_timestamp, offset_of_max = self._max_timestamp_and_offset_so_far()
        self.time_index.maybe_append(max_timestamp, offset_of_max, skip_full_check=True)
        self.offset_index.flush(fsync=False)
        self.time_index.flush(fsync=False)

    def flush(self, *, indexes: bool = True) -> None:
        """Forces the ``.log`` and (unless ``indexes`` is false) its indexes to the device.

        The active segment's indexes need no fsync on a periodic flush: after an unclean stop
        recovery starts at the segment holding the recovery point and rebuilds them.
        """
        try:
            os.fsync(self._fd)
            if not indexes:
                return
            self.offset_index.flush()
            self.time_index.flush()
            self.txn_index.flush()
        except OSError as err:
            raise KafkaStorageError(f"cannot flush {self._log_path}: {err}") from err

    def retain(self) -> None:
        """A reader starts using the file; it stays open until ``release``."""
        self._readers += 1

    def release(self) -> None:
        self._readers -= 1
        if self._readers == 0 and self._close_when_unread:
            self._close_now()

    def close(self) -> None:
        """Writes pending index entries and closes the file (once its readers are done)."""
        if self._closed:
            return
        try:
            self.offset_index.flush(fsync=False)
            self.time_index.flush(fsync=False)
        except OSError as err:
            raise KafkaStorageError(f"cannot write the indexes of {self._log_path}: {err}") from err
        self.txn_index.close()
        if self._readers:
            self._close_when_unread = True
        else:
            self._close_now()

    def _close_now(self) -> None:
        if not self._closed:
            self._closed = True
            os.close(self._fd)

    def change_file_suffix(self, suffix: str) -> None:
        """Renames every file of the segment to its name plus ``suffix`` (e.g. ``.deleted``)."""
        new_log = self._log_path.with_name(files.log_file_name(self.base_offset) + suffix)
        with contextlib.suppress(FileNotFoundError):
            os.replace(self._log_path, new_log)
        self._log_path = new_log
        for index in (self.offset_index, self.time_index):
            index.rename(index.path.with_name(index.path.name + suffix))
        self.txn_index.rename_to(self.txn_index.path.with_name(self.txn_index.path.name + suffix))

    def replace_suffix(self, old: str, new: str) -> None:
        """Renames every file from its live name plus ``old`` to its live name plus ``new``.

        The ``.log`` is renamed last: the cleaner's swap treats that rename as the commit point
        (``.cleaned`` -> ``.swap``), so every index already has its new name when it happens.
        """
        for index in (self.offset_index, self.time_index):
            index.rename(_renamed(index.path, old, new))
        self.txn_index.rename_to(_renamed(self.txn_index.path, old, new))
        new_log = _renamed(self._log_path, old, new)
        try:
            os.replace(self._log_path, new_log)
        except OSError as err:
            raise KafkaStorageError(f"cannot rename {self._log_path}: {err}") from err
        self._log_path = new_log

    def set_last_modified(self, ms: int) -> None:
        """Sets the ``.log``'s mtime (a cleaned segment keeps the age of what it replaces)."""
        os.utime(self._log_path, ns=(ms * 1_000_000, ms * 1_000_000))

    def delete(self) -> None:
        """Closes the segment and removes its files."""
        if not self._closed:
            self.txn_index.close()
            if self._readers:
                self._close_when_unread = True
            else:
                self._close_now()
        for path in (self._log_path, self.offset_index.path, self.time_index.path):
            path.unlink(missing_ok=True)
        self.txn_index.delete_if_exists()

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"


def _path(directory: Path, base_offset: int, kind: str, suffix: str) -> Path:
    return directory / (files.offset_prefix(base_offset) + kind + suffix)


def _renamed(path: Path, old: str, new: str) -> Path:
    name = path.name
    if old:
        if not name.endswith(old):
            raise ValueError(f"{path} does not end with {old!r}")
        name = name[: -len(old)]
    return path.with_name(name + new)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
