"""Writing one segment upload: the data object first, then the indexes, the manifest last.

Without transforms, the segment file is uploaded as it is: to an object store with ``put_file``
(multipart) while its chunk checksums are computed from a second read, to a local filesystem in
one checksummed pass (:mod:`tierlog_fsspec.localcopy`). With transforms, chunks are
encoded on several threads a bounded window ahead of a streaming writer. The indexes go up in
parallel once the data is stored (beside it on a local filesystem), and the manifest only when
everything else is.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import io
import logging
import os
from collections.abc import Iterator
from typing import Any

from tierlog.errors import RemoteStorageError
from tierlog.model import IndexType, LogSegmentData, RemoteLogSegmentMetadata

from . import localcopy
from .backend import Backend
from .chunks import (
    DATA_OBJECT,
    HEURISTIC_MIN_SAVING,
    INDEX_OBJECT_IDS,
    ChunkCodec,
    checksum,
    producer_compressed,
)
from .config import COMPRESSION_ZSTD, FsspecStorageConfig
from .keyring import KeyRing
from .layout import MANIFEST_TEMP_KIND, SegmentObjects
from .manifest import ChunkIndex, SegmentManifest, StoredObject
from .metrics import PartitionMetrics

log = logging.getLogger(__name__)

#: Chunks encoded ahead of the writer (bounds memory: window x chunk size per upload).
ENCODE_WINDOW = 4


class SegmentUploader:
    """Uploads segments; owns the thread pools the uploads run on."""

    def __init__(
        self, config: FsspecStorageConfig, backend: Backend, keyring: KeyRing | None
    ) -> None:
        self.config = config
        self.backend = backend
        self.keyring = keyring
        self._uploads = concurrent.futures.ThreadPoolExecutor(
            max_workers=8, thread_name_prefix="tierlog-fsspec-upload"
        )
        self._encoders = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(2, os.cpu_count() or 2), thread_name_prefix="tierlog-fsspec-encode"
        )

    def close(self) -> None:
        self._uploads.shutdown(wait=True)
        self._encoders.shutdown(wait=True)

    def upload(
        self,
        metadata: RemoteLogSegmentMetadata,
        data: LogSegmentData,
        objects: SegmentObjects,
        metrics: PartitionMetrics,
        where: str,
    ) -> SegmentManifest:
        """Store the segment's objects, the manifest last; returns the manifest written."""
        size = _local_size(str(data.log_segment), where)
        self.backend.ensure_directory(objects.directory, metrics, where)
        upload_id = os.urandom(16)
        data_key, encryption = self.keyring.new_data_key() if self.keyring else (None, None)
        level = self._compression_level(str(data.log_segment), size, upload_id, where)
        codec = ChunkCodec(upload_id, compression_level=level, data_key=data_key)
        jobs = _Jobs(self._uploads)
        # The data object goes up with its checksums (and the removal of an older manifest, for
        # a re-copy of this id), then the indexes in parallel, the manifest last. On an object
        # store the indexes wait for the data: small requests beside it only slow it down; a
        # local filesystem has no request bandwidth to share, so there they go beside it. No
        # job ever waits for another job of the same pool (the local copy's lanes run on the
        # encoders), so many concurrent copies cannot deadlock it.
        segment_path = str(data.log_segment)
        if codec.identity and self.backend.local and localcopy.AVAILABLE:
            uploaded = jobs.submit(self._copy_local, segment_path, size, objects, metrics, where)
        elif codec.identity:
            jobs.submit(self.backend.put_file, segment_path, objects.data, size, metrics, where)
            uploaded = jobs.submit(
                _identity_chunks, segment_path, size, self.config.chunk_size, where
            )
        else:
            uploaded = jobs.submit(
                self._upload_transformed, segment_path, size, codec, objects, metrics, where
            )
        jobs.submit(self.backend.remove, [objects.manifest], metrics, where)
        with jobs:
            if not self.backend.local:
                jobs.wait()
            index_jobs = {
                index_type: jobs.submit(
                    self._upload_index, index_type, data, codec, objects, metrics, where
                )
                for index_type in IndexType
                if index_type is not IndexType.TRANSACTION or data.transaction_index is not None
            }
            jobs.wait()
        chunks = uploaded.result()
        indexes = {
            index_type: stored
            for index_type, job in index_jobs.items()
            if (stored := job.result()) is not None
        }
        manifest = SegmentManifest(
            segment=_segment_fields(metadata),
            upload_id=upload_id.hex(),
            chunks=chunks,
            compression=COMPRESSION_ZSTD if level is not None else None,
            encryption=encryption,
            indexes=indexes,
        )
        self._write_manifest(objects, manifest, metrics, where)
        return manifest

    def _compression_level(self, path: str, size: int, upload_id: bytes, where: str) -> int | None:
        """The zstd level for this segment, or None to store it uncompressed."""
        if not self.config.compressed or size == 0:
            return None
        level = self.config.compression_level
        if not self.config.compression_heuristic:
            return level
        with _open_local(path, where) as source:
            head = source.read(min(size, self.config.chunk_size))
        if not producer_compressed(head):
            return level
        trial = ChunkCodec(upload_id, compression_level=level, data_key=None).compress(head)
        if trial is None or len(trial) > len(head) * (1 - HEURISTIC_MIN_SAVING):
            log.debug("%s: producer-compressed batches; stored without compression", where)
            return None
        return level

    def _copy_local(
        self, path: str, size: int, objects: SegmentObjects, metrics: PartitionMetrics, where: str
    ) -> ChunkIndex:
        """The segment as it is into a local data object, checksummed in the same pass."""
        chunk_size = self.config.chunk_size
        checksums = self.backend.put_local_file_checksummed(
            path, objects.data, size, chunk_size, self._encoders, metrics, where
        )
        return ChunkIndex(
            chunk_size=chunk_size,
            size=size,
            stored_sizes=_plain_sizes(size, chunk_size),
            checksums=tuple(checksums),
        )

    def _upload_transformed(
        self,
        path: str,
        size: int,
        codec: ChunkCodec,
        objects: SegmentObjects,
        metrics: PartitionMetrics,
        where: str,
    ) -> ChunkIndex:
        """Stream the encoded chunks into the data object; returns their index."""
        chunk_size = self.config.chunk_size
        stored_sizes: list[int] = []
        checksums: list[int] = []
        uncompressed: set[int] = set()

        def encode(number: int, plain: bytes) -> tuple[bytes | memoryview, bool, int]:
            stored, compressed = codec.encode(DATA_OBJECT, number, plain)
            return stored, compressed, checksum(stored)

        def pieces() -> Iterator[bytes | memoryview]:
            # Chunks are encoded on several threads (zstd and AES release the GIL), a bounded
            # window ahead of the writer, and written in order.
            stored_sizes.clear()
            checksums.clear()
            uncompressed.clear()
            window: collections.deque[concurrent.futures.Future[Any]] = collections.deque()
            try:
                with _open_local(path, where) as source:
                    for number in range(-(-size // chunk_size)):
                        plain = _read_chunk(source, min(chunk_size, size - number * chunk_size))
                        if plain is None:
                            raise RemoteStorageError(
                                f"{where}: the local segment file {path} shrank while uploading"
                            )
                        window.append(self._encoders.submit(encode, number, plain))
                        if len(window) > ENCODE_WINDOW:
                            yield record(window.popleft())
                while window:
                    yield record(window.popleft())
            finally:
                for pending in window:
                    pending.cancel()

        def record(job: concurrent.futures.Future[Any]) -> bytes | memoryview:
            stored, compressed, crc = job.result()
            if not compressed and codec.compression_level is not None:
                uncompressed.add(len(stored_sizes))
            stored_sizes.append(len(stored))
            checksums.append(crc)
            return stored  # type: ignore[no-any-return]

        self.backend.write_stream(objects.data, pieces, metrics, where)
        return ChunkIndex(
            chunk_size=chunk_size,
            size=size,
            stored_sizes=tuple(stored_sizes),
            checksums=tuple(checksums),
            uncompressed=frozenset(uncompressed),
        )

    def _upload_index(
        self,
        index_type: IndexType,
        data: LogSegmentData,
        codec: ChunkCodec,
        objects: SegmentObjects,
        metrics: PartitionMetrics,
        where: str,
    ) -> StoredObject | None:
        if index_type is IndexType.LEADER_EPOCH:
            plain = data.leader_epoch_index
        else:
            local = data.index_path(index_type)
            if local is None:
                return None
            with _open_local(str(local), where) as source:
                plain = source.read()
        if not plain:
            return StoredObject(size=0, stored_size=0, crc32c=checksum(b""))
        stored, compressed = codec.encode(INDEX_OBJECT_IDS[index_type], 0, plain)
        stored = bytes(stored)
        self.backend.pipe(objects.index(index_type), stored, metrics, where)
        return StoredObject(
            size=len(plain), stored_size=len(stored), crc32c=checksum(stored), compressed=compressed
        )

    def _write_manifest(
        self,
        objects: SegmentObjects,
        manifest: SegmentManifest,
        metrics: PartitionMetrics,
        where: str,
    ) -> None:
        document = manifest.to_json()
        if self.backend.atomic_writes:
            self.backend.pipe(objects.manifest, document, metrics, where)
            return
        temporary = objects.path(MANIFEST_TEMP_KIND)
        self.backend.pipe(temporary, document, metrics, where)
        self.backend.rename(temporary, objects.manifest, metrics, where)


class _Jobs:
    """Work submitted for one copy; leaving the block waits for all of it, so nothing of a
    failed copy keeps writing after the copy has returned. ``wait`` raises the first error."""

    def __init__(self, executor: concurrent.futures.Executor) -> None:
        self._executor = executor
        self._futures: list[concurrent.futures.Future[Any]] = []

    def submit(self, function: Any, *args: Any) -> concurrent.futures.Future[Any]:
        future = self._executor.submit(function, *args)
        self._futures.append(future)
        return future

    def wait(self) -> None:
        for future in self._futures:
            future.result()

    def __enter__(self) -> _Jobs:
        return self

    def __exit__(self, *exc_info: object) -> None:
        concurrent.futures.wait(self._futures)


# --- local files --------------------------------------------------------------------------------


def _segment_fields(metadata: RemoteLogSegmentMetadata) -> dict[str, Any]:
    segment_id = metadata.remote_log_segment_id
    partition = segment_id.topic_id_partition
    return {
        "topic": partition.topic,
        "topic_id": str(partition.topic_id),
        "partition": partition.partition,
        "id": str(segment_id.id),
        "start_offset": metadata.start_offset,
        "end_offset": metadata.end_offset,
    }


def _local_size(path: str, where: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError as err:
        raise RemoteStorageError(f"{where}: cannot read the local file {path}: {err}") from err


@contextlib.contextmanager
def _open_local(path: str, where: str) -> Iterator[io.BufferedReader]:
    """A local segment file; its errors are the copy's, never the remote store's."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below, errors translated
    except OSError as err:
        raise RemoteStorageError(f"{where}: cannot read the local file {path}: {err}") from err
    with handle:
        yield handle


def _read_chunk(source: io.BufferedReader, size: int) -> bytes | None:
    """Exactly ``size`` bytes of a local file, or None if it ends first."""
    try:
        data = source.read(size)
    except OSError as err:
        raise RemoteStorageError(f"reading the local segment {source.name} failed: {err}") from err
    return data if len(data) == size else None


def _identity_chunks(path: str, size: int, chunk_size: int, where: str) -> ChunkIndex:
    """The chunk index of a segment stored as it is: plain sizes and CRC-32C of each chunk."""
    return ChunkIndex(
        chunk_size=chunk_size,
        size=size,
        stored_sizes=_plain_sizes(size, chunk_size),
        checksums=tuple(_file_checksums(path, size, chunk_size, where)),
    )


def _plain_sizes(size: int, chunk_size: int) -> tuple[int, ...]:
    return tuple(min(chunk_size, size - start) for start in range(0, size, chunk_size))


def _file_checksums(path: str, size: int, chunk_size: int, where: str) -> list[int]:
    """CRC-32C of every chunk of a local file, read chunk by chunk into one reused buffer.

    Not through a memory map: mapped pages count towards the broker's resident memory, and
    tiering a large segment must not grow it by the segment's size.
    """
    if size == 0:
        return []
    buffer = memoryview(bytearray(min(chunk_size, size)))
    checksums = []
    with _open_local(path, where) as source:
        for start in range(0, size, chunk_size):
            piece = buffer[: min(chunk_size, size - start)]
            try:
                read = source.readinto(piece)
            except OSError as err:
                raise RemoteStorageError(f"{where}: reading {path} failed: {err}") from err
            if read != len(piece):
                raise RemoteStorageError(
                    f"{where}: the local segment file {path} shrank while uploading"
                )
            checksums.append(checksum(piece))
    return checksums
