"""Telling a reader outside the plugin where a segment's bytes are, and how to decode them.

An upload without transforms is the segment file as it is, so its location is the data object
itself. Otherwise the location lists the stored chunks covering the range with what decoding
them takes: the CRC-32C the manifest keeps, whether the chunk is zstd-compressed, the GCM nonce
and associated data :mod:`tierlog_fsspec.chunks` binds it with, and the unwrapped data key. The
objects are named where they are stored (never the chunk cache): a local path, or a signed URL.
"""

from __future__ import annotations

from tierlog.errors import RemoteStorageError
from tierlog.locations import Compression, SegmentLocation, StoredChunk

from .backend import Backend
from .chunks import DATA_OBJECT, nonce_and_aad
from .config import COMPRESSION_ZSTD
from .fetcher import OpenSegment


def locate_segment(
    backend: Backend,
    segment: OpenSegment,
    start: int,
    stop: int,
    expires_in_s: int,
    data_key: bytes | None,
) -> SegmentLocation | None:
    """Segment bytes ``[start, stop)`` of an open segment, or None when the data object cannot
    be reached from outside this process."""
    data = backend.object_location(segment.objects.data, expires_in_s, segment.where)
    if data is None:
        return None
    manifest = segment.manifest
    if manifest.identity:
        return SegmentLocation.of_object(data, start, stop)
    if manifest.compression not in (None, COMPRESSION_ZSTD):
        raise RemoteStorageError(
            f"{segment.where} is stored with compression {manifest.compression!r}, which this "
            "plugin cannot describe"
        )
    if start >= stop:
        return SegmentLocation.of_chunks((), start, stop)
    index = manifest.chunks
    upload_id = bytes.fromhex(manifest.upload_id)
    chunks = []
    for chunk in range(index.chunk_of(start), index.chunk_of(stop - 1) + 1):
        stored_start, stored_end = index.stored_range(chunk)
        plain_start, plain_end = index.plain_range(chunk)
        nonce, aad = (
            nonce_and_aad(upload_id, DATA_OBJECT, chunk) if data_key is not None else (None, None)
        )
        compressed = manifest.compression is not None and chunk not in index.uncompressed
        compression: Compression = "zstd" if compressed else "none"
        chunks.append(
            StoredChunk(
                location=data,
                stored_start=stored_start,
                stored_end=stored_end,
                plain_start=plain_start,
                plain_end=plain_end,
                compression=compression,
                nonce=nonce,
                aad=aad,
                crc32c=index.checksums[chunk],
            )
        )
    return SegmentLocation.of_chunks(chunks, start, stop, data_key)
