"""The remote index cache: remote offset, time and transaction indexes kept on local disk.

A fetch below the local log start needs the remote segment's offset index to find where to
start reading; fetching it from the object store on every read would double the cost of every
remote fetch. Files live in ``<log dir>/remote-log-index-cache`` named like Kafka's
(``<start offset>_<segment uuid>.index|.timeindex|.txnindex``); the total size is bounded by
``remote.log.index.file.cache.total.size.bytes`` and the least recently used entries go first.
"""

from __future__ import annotations

import bisect
import shutil
import struct
import threading
from collections import OrderedDict
from pathlib import Path

import attrs

from ..errors import RemoteResourceNotFoundError
from ..log import AbortedTxn
from ..model import IndexType, RemoteLogSegmentId, RemoteLogSegmentMetadata
from ..spi import RemoteStorageManager

CACHE_DIR_NAME = "remote-log-index-cache"
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_TXN_ENTRY_SIZE = 34


@attrs.frozen
class CachedIndexes:
    """One remote segment's indexes, parsed: sorted (offset, position) and (timestamp, offset)."""

    offsets: tuple[int, ...]
    positions: tuple[int, ...]
    timestamps: tuple[int, ...]
    time_offsets: tuple[int, ...]
    size_in_bytes: int
    aborted: tuple[AbortedTxn, ...] | None = None

    def lookup_offset(self, offset: int) -> int:
        """Byte position of the last indexed batch at or below ``offset`` (0 if none)."""
        at = bisect.bisect_right(self.offsets, offset) - 1
        return self.positions[at] if at >= 0 else 0

    def lookup_timestamp(self, timestamp: int) -> int | None:
        """The indexed offset of the last entry with a timestamp below ``timestamp``, if any."""
        at = bisect.bisect_left(self.timestamps, timestamp) - 1
        return self.time_offsets[at] if at >= 0 else None


def _parse_offsets(data: bytes, base: int) -> tuple[list[int], list[int]]:
    offsets: list[int] = []
    positions: list[int] = []
    for n in range(len(data) // _OFFSET_ENTRY.size):
        relative, position = _OFFSET_ENTRY.unpack_from(data, n * _OFFSET_ENTRY.size)
        if n > 0 and relative == 0 and position == 0:
            break  # preallocated, unused tail
        offsets.append(base + relative)
        positions.append(position)
    return offsets, positions


def _parse_times(data: bytes, base: int) -> tuple[list[int], list[int]]:
    timestamps: list[int] = []
    offsets: list[int] = []
    for n in range(len(data) // _TIME_ENTRY.size):
        timestamp, relative = _TIME_ENTRY.unpack_from(data, n * _TIME_ENTRY.size)
        if n > 0 and timestamp == 0 and relative == 0:
            break
        if timestamps and timestamp <= timestamps[-1]:
            continue
        timestamps.append(timestamp)
        offsets.append(base + relative)
    return timestamps, offsets


class RemoteIndexCache:
    """Least-recently-used cache of remote indexes on local disk, bounded in bytes."""

    def __init__(self, directory: Path, storage: RemoteStorageManager, max_bytes: int) -> None:
        self.directory = directory / CACHE_DIR_NAME
        self._storage = storage
        self.max_bytes = max_bytes
        self._entries: OrderedDict[RemoteLogSegmentId, CachedIndexes] = OrderedDict()
        self._lock = threading.Lock()
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.hits = 0
        self.misses = 0

    @property
    def size_in_bytes(self) -> int:
        with self._lock:
            return sum(entry.size_in_bytes for entry in self._entries.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _file(self, segment: RemoteLogSegmentMetadata, suffix: str) -> Path:
        return self.directory / f"{segment.start_offset}_{segment.remote_log_segment_id.id}{suffix}"

    def _download(self, segment: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        path = self._file(segment, index_type.suffix)
        try:
            with self._storage.fetch_index(segment, index_type) as stream:
                data = stream.read()
        except RemoteResourceNotFoundError:
            if index_type is not IndexType.TRANSACTION:
                raise
            data = b""
        # Two readers may download the same index at once: each writes its own temporary file.
        tmp = path.with_name(f"{path.name}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        return bytes(data)

    def get(self, segment: RemoteLogSegmentMetadata) -> CachedIndexes:
        """The segment's indexes, downloaded into the cache on first use."""
        key = segment.remote_log_segment_id
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return found
        self.misses += 1
        base = segment.start_offset
        offset_data = self._download(segment, IndexType.OFFSET)
        time_data = self._download(segment, IndexType.TIMESTAMP)
        offsets, positions = _parse_offsets(offset_data, base)
        stamps, stamp_offsets = _parse_times(time_data, base)
        size = len(offset_data) + len(time_data)
        entry = CachedIndexes(
            tuple(offsets), tuple(positions), tuple(stamps), tuple(stamp_offsets), size
        )
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            self._evict_locked(keep=key)
        return entry

    def aborted_transactions(self, segment: RemoteLogSegmentMetadata) -> tuple[AbortedTxn, ...]:
        """The segment's transaction index (empty when it has none), cached with the others."""
        entry = self.get(segment)
        if entry.aborted is not None:
            return entry.aborted
        aborted: tuple[AbortedTxn, ...] = ()
        if not segment.txn_idx_empty:
            data = self._download(segment, IndexType.TRANSACTION)
            size = _TXN_ENTRY_SIZE
            aborted = tuple(
                AbortedTxn.decode(data, at, source=f"remote {segment.remote_log_segment_id}")
                for at in range(0, len(data) - len(data) % size, size)
            )
        key = segment.remote_log_segment_id
        with self._lock:
            if key in self._entries:
                self._entries[key] = attrs.evolve(
                    entry,
                    aborted=aborted,
                    size_in_bytes=entry.size_in_bytes + len(aborted) * _TXN_ENTRY_SIZE,
                )
        return aborted

    def _evict_locked(self, keep: RemoteLogSegmentId | None = None) -> None:
        total = sum(entry.size_in_bytes for entry in self._entries.values())
        for key in list(self._entries):
            if total <= self.max_bytes:
                break
            if key == keep:
                continue
            total -= self._entries[key].size_in_bytes
            self._drop_locked(key)

    def _drop_locked(self, key: RemoteLogSegmentId) -> None:
        self._entries.pop(key, None)
        for path in self.directory.glob(f"*_{key.id}.*"):
            path.unlink(missing_ok=True)

    def remove(self, segment_id: RemoteLogSegmentId) -> None:
        """Forgets a deleted segment's indexes."""
        with self._lock:
            self._drop_locked(segment_id)

    def resize(self, max_bytes: int) -> None:
        with self._lock:
            self.max_bytes = max_bytes
            self._evict_locked()

    def close(self) -> None:
        with self._lock:
            self._entries.clear()
        shutil.rmtree(self.directory, ignore_errors=True)
