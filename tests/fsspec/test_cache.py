"""The chunk cache (memory and disk, LRU by bytes, with metrics) and bounded prefetch."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from tierlog.host import PluginHost

from .conftest import CHUNK, HostFactory
from .segments import Segment, make_segment


def count(host: PluginHost, name: str, segment: Segment | None = None) -> int:
    tags: dict[str, str | int] = {"plugin": "fsspec", "role": "RemoteStorageManager"}
    if segment is not None:
        tip = segment.metadata.topic_id_partition
        tags.update(topic=tip.topic, partition=tip.partition)
    value = host.metrics.value("RemoteStorageManager", name, **tags)
    return value["count"] if isinstance(value, dict) else int(value)


def read(host: PluginHost, segment: Segment, start: int, end: int | None = None) -> bytes:
    with host.storage.fetch_log_segment(segment.metadata, start, end) as stream:
        return stream.read()


@pytest.mark.parametrize("kind", ["memory", "disk"])
def test_cached_chunks_are_served_without_a_download(
    make_host: HostFactory, tmp_path: Path, kind: str
) -> None:
    host = make_host({"cache.kind": kind, "cache.size.bytes": str(16 * CHUNK)})
    segment = make_segment(tmp_path, size=4 * CHUNK)
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    assert read(host, segment, 100, CHUNK + 100) == segment.payload[100 : CHUNK + 101]
    assert (count(host, "ChunkCacheHits", segment), count(host, "ChunkCacheMisses", segment)) == (
        0,
        2,
    )
    gets = count(host, "ObjectsFetched", segment)
    assert read(host, segment, 0, 2 * CHUNK - 1) == segment.payload[: 2 * CHUNK]
    assert count(host, "ObjectsFetched", segment) == gets
    assert count(host, "ChunkCacheHits", segment) == 2
    assert count(host, "ChunkCacheSizeBytes") == 2 * CHUNK
    assert count(host, "ChunkCacheEntries") == 2


@pytest.mark.parametrize("kind", ["memory", "disk"])
def test_the_cache_is_bounded_and_evicts_the_least_recently_used(
    make_host: HostFactory, tmp_path: Path, kind: str
) -> None:
    host = make_host({"cache.kind": kind, "cache.size.bytes": str(3 * CHUNK)})
    segment = make_segment(tmp_path, size=6 * CHUNK)
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    for chunk in (0, 1, 2):
        read(host, segment, chunk * CHUNK, chunk * CHUNK)
    read(host, segment, 0, 0)  # chunk 0 is now the most recently used
    read(host, segment, 3 * CHUNK, 3 * CHUNK)  # evicts chunk 1
    assert count(host, "ChunkCacheEvictions") == 1
    assert count(host, "ChunkCacheSizeBytes") == 3 * CHUNK
    misses = count(host, "ChunkCacheMisses", segment)
    read(host, segment, 0, 0)
    assert count(host, "ChunkCacheMisses", segment) == misses
    read(host, segment, CHUNK, CHUNK)
    assert count(host, "ChunkCacheMisses", segment) == misses + 1


def test_the_disk_cache_lives_in_its_directory_and_is_removed_on_close(
    make_host: HostFactory, tmp_path: Path
) -> None:
    cache_dir = tmp_path / "cache"
    host = make_host({"cache.kind": "disk", "cache.dir": str(cache_dir)})
    segment = make_segment(tmp_path / "segment", size=2 * CHUNK)
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    read(host, segment, 0)
    files = [path for path in cache_dir.rglob("*") if path.is_file()]
    assert sorted(path.stat().st_size for path in files) == [CHUNK, CHUNK]
    host.close()
    assert list(cache_dir.iterdir()) == []


def wait_for(condition: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.005)


def test_prefetch_reads_ahead_into_the_cache_and_stops_at_the_end_of_the_segment(
    make_host: HostFactory, tmp_path: Path
) -> None:
    host = make_host({"cache.kind": "memory", "prefetch.chunks": "3"})
    segment = make_segment(tmp_path, size=5 * CHUNK - 10)
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    assert read(host, segment, 0, 10) == segment.payload[:11]
    wait_for(lambda: count(host, "PrefetchedChunks", segment) == 3)
    gets = count(host, "ObjectsFetched", segment)
    hits = count(host, "ChunkCacheHits", segment)
    assert read(host, segment, CHUNK, 4 * CHUNK - 1) == segment.payload[CHUNK : 4 * CHUNK]
    assert count(host, "ChunkCacheHits", segment) == hits + 3  # all three were prefetched
    # reading up to chunk 3 prefetches chunk 4, the last one, and nothing past it
    wait_for(lambda: count(host, "PrefetchedChunks", segment) == 4)
    assert count(host, "ObjectsFetched", segment) == gets + 1
    assert read(host, segment, 4 * CHUNK) == segment.payload[4 * CHUNK :]
    time.sleep(0.05)
    assert count(host, "PrefetchedChunks", segment) == 4
    assert count(host, "ObjectsFetched", segment) == gets + 1


def test_a_reupload_never_serves_stale_cached_chunks(
    make_host: HostFactory, tmp_path: Path
) -> None:
    host = make_host({"cache.kind": "memory"})
    segment = make_segment(tmp_path / "a", size=2 * CHUNK)
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    assert read(host, segment, 0) == segment.payload
    replacement = os.urandom(2 * CHUNK)
    segment.data.log_segment.write_bytes(replacement)
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    assert read(host, segment, 0) == replacement
