"""The RemoteStorageManager operations on one fsspec filesystem.

Copy (see :mod:`tierlog_fsspec.upload`) writes the data object, one object per non-empty
auxiliary index, and the manifest last. A segment without a manifest is an incomplete upload:
it is never served, and delete removes whatever it left. Fetches read the manifest once (kept in
an LRU with the unwrapped data key) and then only the chunks they need.
"""

from __future__ import annotations

import collections
import concurrent.futures
import io
import logging
import threading
import time
from typing import Any, BinaryIO

from tierlog.errors import InvalidConfigError, RemoteResourceNotFoundError, RemoteStorageError
from tierlog.locations import SegmentLocation
from tierlog.model import (
    CustomMetadata,
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
)

from .backend import Backend
from .cache import ChunkCache, DiskChunkCache, MemoryChunkCache
from .chunks import INDEX_OBJECT_IDS, ChunkCodec, checksum
from .config import CACHE_DISK, CACHE_MEMORY, FsspecStorageConfig
from .fetcher import ChunkFetcher, OpenSegment
from .keyring import KeyRing
from .layout import SegmentObjects, UploadRecord, segment_objects
from .locate import locate_segment
from .manifest import Encryption, SegmentManifest
from .metrics import StorageMetrics
from .reader import SegmentReader
from .retry import RetryPolicy
from .scrub import Scrubber, ScrubbingFilter
from .upload import SegmentUploader

log = logging.getLogger(__name__)

MANIFEST_CACHE_ENTRIES = 1024


class InvalidRangeError(RemoteStorageError, ValueError):
    """A fetch starts past the end of the segment."""


def _stop(segment: OpenSegment, start: int, end: int | None) -> int:
    """Where a read of ``[start, end]`` stops (exclusive); a start past the end is an error."""
    size = segment.manifest.size
    if (start >= size and size > 0) or start > size:
        raise InvalidRangeError(
            f"{segment.where}: start position {start} is past the end of the segment ({size} bytes)"
        )
    return size if end is None else min(end + 1, size)


def describe(metadata: RemoteLogSegmentMetadata) -> str:
    """How errors and logs name a segment."""
    segment_id = metadata.remote_log_segment_id
    partition = segment_id.topic_id_partition
    return (
        f"segment {partition.topic}-{partition.partition} offsets "
        f"{metadata.start_offset}-{metadata.end_offset} (id {segment_id.id})"
    )


class FsspecStorage:
    """Segments on one fsspec filesystem, under the URL's path."""

    def __init__(self, config: FsspecStorageConfig, metrics: StorageMetrics | None = None) -> None:
        import fsspec.core

        self.config = config
        self.metrics = metrics or StorageMetrics()
        self.scrubber = Scrubber(config.secrets())
        self._log_filter = ScrubbingFilter(self.scrubber)
        if self.scrubber:
            self._log_filter.install()
        options = dict(config.storage_options)
        options.setdefault("skip_instance_cache", True)
        try:
            fs, self.prefix = fsspec.core.url_to_fs(config.url, **options)
        except Exception as err:
            self._log_filter.uninstall()
            raise InvalidConfigError(
                f"fsspec cannot open url = {config.url!r} with the given storage options: "
                f"{type(err).__name__}: {self.scrubber.text(str(err))}",
                key="url",
            ) from self.scrubber.cause(err)
        self.backend = Backend(
            fs,
            retry=RetryPolicy(
                config.retry_max_attempts, config.retry_backoff_ms, config.retry_backoff_max_ms
            ),
            scrubber=self.scrubber,
            part_size=config.upload_part_size,
        )
        self.keyring = (
            KeyRing(config.encryption_keys, config.active_key_id)
            if config.encryption_keys
            else None
        )
        self.cache = self._make_cache()
        self.uploader = SegmentUploader(config, self.backend, self.keyring)
        self._prefetches = (
            concurrent.futures.ThreadPoolExecutor(
                max_workers=2, thread_name_prefix="tierlog-fsspec-prefetch"
            )
            if config.prefetch_chunks
            else None
        )
        self.fetcher = ChunkFetcher(
            self.backend,
            self.cache,
            prefetch_chunks=config.prefetch_chunks,
            executor=self._prefetches,
        )
        self._manifest_lock = threading.Lock()
        #: Open segments by segment uuid bytes (hashing a whole RemoteLogSegmentId per read costs
        #: more than the lookup it serves).
        self._manifests: collections.OrderedDict[bytes, OpenSegment] = collections.OrderedDict()

    def _make_cache(self) -> ChunkCache | None:
        kind, size = self.config.cache_kind, self.config.cache_size_bytes
        if kind == CACHE_MEMORY:
            cache: ChunkCache = MemoryChunkCache(size, self.metrics.cache_evictions)
        elif kind == CACHE_DISK:
            cache = DiskChunkCache(size, self.config.cache_dir, self.metrics.cache_evictions)
        else:
            return None
        return cache

    def bind_metrics(self, scope: Any) -> None:
        """Record into the host's metrics view from now on."""
        self.metrics.bind(scope)
        if self.cache is not None:
            cache = self.cache
            cache.evictions = self.metrics.cache_evictions  # type: ignore[attr-defined]
            self.metrics.cache_gauges(lambda: cache.size_bytes, lambda: len(cache))

    def close(self) -> None:
        self.uploader.close()
        if self._prefetches is not None:
            self._prefetches.shutdown(wait=True, cancel_futures=True)
        if self.cache is not None:
            self.cache.close()
        with self._manifest_lock:
            self._manifests.clear()
        self._log_filter.uninstall()

    # --- copy -------------------------------------------------------------------------------------

    def copy(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> CustomMetadata:
        where = describe(metadata)
        metrics = self.metrics.partition(metadata.topic_id_partition)
        objects = segment_objects(self.prefix, metadata)
        self._forget(metadata.remote_log_segment_id)
        started = time.perf_counter()
        with metrics.segment_copy_time.time():
            manifest = self.uploader.upload(metadata, data, objects, metrics, where)
        log.debug(
            "%s: uploaded %d bytes as %d chunks (%d bytes stored) in %.1f ms",
            where,
            manifest.size,
            manifest.chunks.count,
            manifest.stored_size,
            (time.perf_counter() - started) * 1000,
        )
        return UploadRecord(stored_size=manifest.stored_size, prefix=self.prefix).encode()

    # --- fetch ------------------------------------------------------------------------------------

    def fetch(self, metadata: RemoteLogSegmentMetadata, start: int, end: int | None) -> BinaryIO:
        segment = self.open_segment(metadata)
        stop = _stop(segment, start, end)
        return SegmentReader(self.fetcher, segment, start, stop)  # type: ignore[return-value]

    def locate(
        self,
        metadata: RemoteLogSegmentMetadata,
        start: int,
        end: int | None,
        expires_in_s: int,
    ) -> SegmentLocation | None:
        """Where the bytes ``fetch`` would return are stored (see :mod:`tierlog_fsspec.locate`)."""
        segment = self.open_segment(metadata)
        stop = _stop(segment, start, end)
        return locate_segment(
            self.backend,
            segment,
            start,
            stop,
            expires_in_s,
            self._data_key(segment.manifest.encryption, segment.where),
        )

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> BinaryIO:
        segment = self.open_segment(metadata)
        entry = segment.manifest.indexes.get(index_type)
        if entry is None:
            raise RemoteResourceNotFoundError(f"{segment.where} has no {index_type.name} index")
        if entry.size == 0:
            return io.BytesIO(b"")
        path = segment.objects.index(index_type)
        where = f"{segment.where}: {index_type.name} index"
        stored = self.backend.cat(path, segment.metrics, where)
        if len(stored) != entry.stored_size:
            raise RemoteStorageError(
                f"{where} ({path}) is {len(stored)} bytes; the manifest says {entry.stored_size}"
            )
        actual = checksum(stored)
        if actual != entry.crc32c:
            raise RemoteStorageError(
                f"{where} ({path}) is corrupt: CRC-32C {actual:#010x}, the manifest says "
                f"{entry.crc32c:#010x}"
            )
        plain = segment.codec.decode(
            INDEX_OBJECT_IDS[index_type],
            0,
            stored,
            compressed=entry.compressed,
            size=entry.size,
            where=where,
        )
        return io.BytesIO(plain)

    def open_segment(self, metadata: RemoteLogSegmentMetadata) -> OpenSegment:
        """The segment's manifest and data key, read once and then kept (LRU)."""
        segment_id = metadata.remote_log_segment_id
        key = segment_id.id.value
        with self._manifest_lock:
            found = self._manifests.get(key)
            if found is not None:
                self._manifests.move_to_end(key)
                return found
        where = describe(metadata)
        metrics = self.metrics.partition(metadata.topic_id_partition)
        objects = self.objects_for(metadata)
        try:
            document = self.backend.cat(objects.manifest, metrics, where)
        except RemoteResourceNotFoundError as err:
            raise RemoteResourceNotFoundError(
                f"{where} has no manifest at {objects.manifest}: it was never uploaded, its "
                "upload did not finish, or it was deleted"
            ) from err
        manifest = SegmentManifest.from_json(document, where)
        if manifest.segment.get("id") != str(segment_id.id):
            raise RemoteStorageError(
                f"the manifest at {objects.manifest} belongs to segment id "
                f"{manifest.segment.get('id')!r}, not to {where}"
            )
        codec = ChunkCodec(
            bytes.fromhex(manifest.upload_id),
            compression_level=None,
            data_key=self._data_key(manifest.encryption, where),
        )
        segment = OpenSegment(manifest, objects, codec, metrics, where)
        with self._manifest_lock:
            self._manifests[key] = segment
            while len(self._manifests) > MANIFEST_CACHE_ENTRIES:
                self._manifests.popitem(last=False)
        return segment

    def _data_key(self, encryption: Encryption | None, where: str) -> bytes | None:
        if encryption is None:
            return None
        if self.keyring is None:
            raise RemoteStorageError(
                f"{where} is encrypted (key {encryption.key_id!r}) but encryption.keys is not "
                "configured"
            )
        return self.keyring.unwrap(encryption, where)

    def objects_for(self, metadata: RemoteLogSegmentMetadata) -> SegmentObjects:
        """Where the segment's objects are: under the prefix recorded at upload if there is one."""
        record = UploadRecord.decode(metadata.custom_metadata)
        prefix = record.prefix if record is not None and record.prefix is not None else self.prefix
        return segment_objects(prefix, metadata)

    def _forget(self, segment_id: RemoteLogSegmentId) -> None:
        with self._manifest_lock:
            self._manifests.pop(segment_id.id.value, None)

    # --- delete -----------------------------------------------------------------------------------

    def delete(self, metadata: RemoteLogSegmentMetadata) -> None:
        where = describe(metadata)
        metrics = self.metrics.partition(metadata.topic_id_partition)
        with self._manifest_lock:
            known = self._manifests.pop(metadata.remote_log_segment_id.id.value, None)
        objects = self.objects_for(metadata)
        paths = objects.all_paths()
        # The manifest goes first, so a reader never sees a manifest whose objects are gone.
        self.backend.remove(paths[:1], metrics, where)
        self.backend.remove(paths[1:], metrics, where)
        if known is not None:
            metrics.bytes_deleted.mark(known.manifest.stored_size)
        log.debug("%s: deleted", where)
