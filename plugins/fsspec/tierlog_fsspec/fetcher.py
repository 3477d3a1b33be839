"""Getting the bytes of a byte range of a segment: from the cache, or with ranged reads.

Only the chunks covering the range are downloaded, contiguous missing chunks in one ranged
request, each checked against its CRC-32C before it is decoded or cached. A segment stored
without transforms and read without a cache is read byte-exactly (there is nowhere to keep the
rest of a chunk); its checksums are then checked for every chunk the range covers whole.
After a read, up to ``prefetch.chunks`` following chunks are fetched into the cache in the
background, never past the end of the segment.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Sequence
from typing import Any

import attrs
from tierlog.errors import RemoteStorageError, TierlogError

from .backend import Backend
from .cache import ChunkCache
from .chunks import DATA_OBJECT, ChunkCodec, checksum
from .layout import SegmentObjects
from .manifest import SegmentManifest
from .metrics import PartitionMetrics

log = logging.getLogger(__name__)

Piece = bytes | memoryview


@attrs.frozen(eq=False)
class OpenSegment:
    """A segment whose manifest has been read: everything needed to read its chunks."""

    manifest: SegmentManifest
    objects: SegmentObjects
    codec: ChunkCodec
    metrics: PartitionMetrics
    where: str

    def cache_key(self, chunk: int) -> str:
        return f"{self.manifest.upload_id}-{chunk}"


class ChunkFetcher:
    """Reads byte ranges of open segments through the cache and the backend."""

    def __init__(
        self,
        backend: Backend,
        cache: ChunkCache | None,
        *,
        prefetch_chunks: int = 0,
        executor: concurrent.futures.Executor | None = None,
    ) -> None:
        self.backend = backend
        self.cache = cache
        self.prefetch_chunks = prefetch_chunks if cache is not None else 0
        self._executor = executor
        self._lock = threading.Lock()
        self._in_flight: dict[str, concurrent.futures.Future[Any]] = {}

    def read(self, segment: OpenSegment, start: int, stop: int) -> list[Piece]:
        """Pieces that together are segment bytes ``[start, stop)``."""
        if start >= stop:
            return []
        if self.cache is None and segment.manifest.identity:
            return [self._read_exact(segment, start, stop)]
        index = segment.manifest.chunks
        first, last = start // index.chunk_size, (stop - 1) // index.chunk_size
        if first == last:  # the common case, kept short: one chunk
            base = first * index.chunk_size
            hit = self._cached(segment, first, start - base, stop - base)
            if hit is None:
                hit = memoryview(self._fetch(segment, [first])[first])[start - base : stop - base]
            if self.prefetch_chunks:
                self._prefetch(segment, last + 1)
            return [hit]
        pieces: list[Piece | None] = []
        wanted: list[tuple[int, int, int]] = []
        for chunk in range(first, last + 1):
            chunk_start, chunk_stop = index.plain_range(chunk)
            low, high = max(start, chunk_start) - chunk_start, min(stop, chunk_stop) - chunk_start
            hit = self._cached(segment, chunk, low, high)
            pieces.append(hit)
            if hit is None:
                wanted.append((len(pieces) - 1, low, high))
        if wanted:
            fetched = self._fetch(segment, [first + position for position, _, _ in wanted])
            for position, low, high in wanted:
                pieces[position] = memoryview(fetched[first + position])[low:high]
        if self.prefetch_chunks:
            self._prefetch(segment, last + 1)
        return pieces  # type: ignore[return-value]

    # --- cache ------------------------------------------------------------------------------------

    def _cached(self, segment: OpenSegment, chunk: int, low: int, high: int) -> Piece | None:
        if self.cache is None:
            return None
        key = segment.cache_key(chunk)
        hit = self.cache.read(key, low, high)
        if hit is None:
            with self._lock:
                pending = self._in_flight.get(key)
            if pending is not None:
                concurrent.futures.wait([pending])
                hit = self.cache.read(key, low, high)
        if hit is None:
            segment.metrics.cache_misses.inc()
        else:
            segment.metrics.cache_hits.inc()
        return hit

    # --- downloads --------------------------------------------------------------------------------

    def _read_exact(self, segment: OpenSegment, start: int, stop: int) -> bytes:
        data = self._ranged(segment, start, stop)
        index = segment.manifest.chunks
        view = memoryview(data)
        first_whole = -(-start // index.chunk_size)
        for chunk in range(first_whole, index.count):
            chunk_start, chunk_stop = index.plain_range(chunk)
            if chunk_stop > stop:
                break
            self._verify(segment, chunk, view[chunk_start - start : chunk_stop - start])
        return data

    def _fetch(self, segment: OpenSegment, chunks: Sequence[int]) -> dict[int, Piece]:
        """Download, verify and decode ``chunks``; contiguous runs share one ranged request."""
        runs: list[list[int]] = []
        for chunk in chunks:
            if runs and runs[-1][-1] == chunk - 1:
                runs[-1].append(chunk)
            else:
                runs.append([chunk])
        index = segment.manifest.chunks
        found: dict[int, Piece] = {}
        for run in runs:
            base = index.offsets[run[0]]
            stored = memoryview(self._ranged(segment, base, index.offsets[run[-1] + 1]))
            for chunk in run:
                low, high = index.stored_range(chunk)
                piece = stored[low - base : high - base]
                self._verify(segment, chunk, piece)
                plain = segment.codec.decode(
                    DATA_OBJECT,
                    chunk,
                    piece,
                    compressed=segment.manifest.compression is not None
                    and chunk not in index.uncompressed,
                    size=index.plain_range(chunk)[1] - index.plain_range(chunk)[0],
                    where=f"{segment.where}: chunk {chunk}",
                )
                if self.cache is not None:
                    self.cache.put(segment.cache_key(chunk), plain)
                found[chunk] = plain
        return found

    def _ranged(self, segment: OpenSegment, start: int, stop: int) -> bytes:
        """Stored bytes ``[start, stop)`` of the data object; a short object is an error."""
        path = segment.objects.data
        try:
            data = self.backend.cat(path, segment.metrics, segment.where, start=start, end=stop)
        except TierlogError as err:
            actual = self._actual_size(segment)
            if actual is not None and actual < segment.manifest.chunks.stored_size:
                raise self._truncated(segment, actual) from err
            raise
        if len(data) != stop - start:
            actual = self._actual_size(segment)
            raise self._truncated(segment, actual if actual is not None else start + len(data))
        return data

    def _actual_size(self, segment: OpenSegment) -> int | None:
        try:
            return self.backend.size(segment.objects.data, segment.metrics, segment.where)
        except TierlogError:
            return None

    @staticmethod
    def _truncated(segment: OpenSegment, actual: int) -> RemoteStorageError:
        return RemoteStorageError(
            f"{segment.where}: the data object {segment.objects.data} is truncated: "
            f"{actual} bytes stored, the manifest says {segment.manifest.chunks.stored_size}"
        )

    @staticmethod
    def _verify(segment: OpenSegment, chunk: int, stored: Piece) -> None:
        expected = segment.manifest.chunks.checksums[chunk]
        actual = checksum(stored)
        if actual != expected:
            low, high = segment.manifest.chunks.plain_range(chunk)
            raise RemoteStorageError(
                f"{segment.where}: chunk {chunk} (segment bytes {low}-{high - 1}) is corrupt: "
                f"CRC-32C {actual:#010x}, the manifest says {expected:#010x}"
            )

    # --- prefetch ---------------------------------------------------------------------------------

    def _prefetch(self, segment: OpenSegment, first: int) -> None:
        if not self.prefetch_chunks or self._executor is None or self.cache is None:
            return
        last = min(first + self.prefetch_chunks, segment.manifest.chunks.count) - 1
        with self._lock:
            chunks = [
                chunk
                for chunk in range(first, last + 1)
                if segment.cache_key(chunk) not in self._in_flight
                and segment.cache_key(chunk) not in self.cache
            ]
            if not chunks:
                return
            try:
                future = self._executor.submit(self._prefetch_now, segment, chunks)
            except RuntimeError:  # the executor is shut down: the plugin is closing
                return
            for chunk in chunks:
                self._in_flight[segment.cache_key(chunk)] = future

    def _prefetch_now(self, segment: OpenSegment, chunks: list[int]) -> None:
        try:
            self._fetch(segment, chunks)
            segment.metrics.prefetched_chunks.inc(len(chunks))
        except Exception as err:  # the reader that needs the chunk fetches it and reports
            log.debug("%s: prefetch of chunks %s failed: %s", segment.where, chunks, err)
        finally:
            with self._lock:
                for chunk in chunks:
                    self._in_flight.pop(segment.cache_key(chunk), None)
