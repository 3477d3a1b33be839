"""Copy, fetch, fetch_index and delete through the SPI, on file://, memory:// and s3://."""

from __future__ import annotations

import concurrent.futures
import json
import os
from pathlib import Path

import attrs
import pytest
from tierlog.errors import RemoteResourceNotFoundError, RemoteStorageError
from tierlog.host import PluginHost
from tierlog.model import CustomMetadata, IndexType, TopicIdPartition, Uuid

from .conftest import CHUNK, HostFactory, Target
from .segments import Segment, compressible, make_segment

MiB = 1024 * 1024

TRANSFORMS = {
    "plain": {},
    "zstd": {"compression": "zstd"},
    "aes": {"encryption.keys": "k1:" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWY="},
    "zstd+aes+cache": {
        "compression": "zstd",
        "encryption.keys": "k1:" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWY=",
        "cache.kind": "memory",
        "cache.size.bytes": str(64 * CHUNK),
    },
}


def fetch(host: PluginHost, segment: Segment, start: int, end: int | None = None) -> bytes:
    with host.storage.fetch_log_segment(segment.metadata, start, end) as stream:
        return stream.read()


def metric(host: PluginHost, name: str, segment: Segment) -> int:
    tip = segment.metadata.topic_id_partition
    value = host.metrics.value(
        "RemoteStorageManager",
        name,
        plugin="fsspec",
        role="RemoteStorageManager",
        topic=tip.topic,
        partition=tip.partition,
    )
    return value["count"] if isinstance(value, dict) else int(value)


def test_objects_follow_the_documented_layout_and_the_manifest_describes_them(
    host: PluginHost, target: Target, tmp_path: Path
) -> None:
    tip = TopicIdPartition.of(Uuid.random(), "payments.eu", 7)
    segment = make_segment(tmp_path, partition=tip, start_offset=4242)
    host.storage.copy_log_segment_data(segment.metadata, segment.data)

    base = f"payments.eu-{tip.topic_id}/7/00000000000000004242-{segment.uuid}"
    kinds = ["index", "leader-epoch-checkpoint", "log", "rsm-manifest", "snapshot", "timeindex"]
    assert target.objects() == sorted(f"{base}.{kind}" for kind in kinds)
    manifest = json.loads(target.fs.cat_file(segment.object_base(target.root) + ".rsm-manifest"))
    assert manifest["version"] == 1
    assert manifest["size"] == len(segment.payload)
    assert manifest["chunk_size"] == CHUNK
    assert len(manifest["chunks"]["stored_sizes"]) == 4
    assert manifest["segment"]["id"] == segment.uuid
    assert set(manifest["indexes"]) == {"OFFSET", "TIMESTAMP", "PRODUCER_SNAPSHOT", "LEADER_EPOCH"}
    assert target.fs.cat_file(segment.object_base(target.root) + ".log") == segment.payload


@pytest.mark.parametrize("transforms", list(TRANSFORMS), ids=list(TRANSFORMS))
@pytest.mark.parametrize(
    ("start", "end"),
    [
        (0, None),
        (0, CHUNK - 1),  # exactly the first chunk
        (CHUNK, 2 * CHUNK - 1),  # exactly a middle chunk
        (CHUNK - 1, CHUNK),  # two bytes across a border
        (100, 3 * CHUNK + 50),  # across several borders
        (2 * CHUNK + 5, None),  # to the end from inside a chunk
        (3 * CHUNK + 122, 3 * CHUNK + 122),  # the last byte
        (5000, 5000),  # a single byte
        (0, 0),  # the first byte
        (3 * CHUNK, 10**9),  # an end past the end is cut
    ],
)
def test_ranged_fetch_returns_exactly_the_bytes_asked_for(
    make_host: HostFactory, tmp_path: Path, transforms: str, start: int, end: int | None
) -> None:
    host = make_host(TRANSFORMS[transforms])
    segment = make_segment(tmp_path, payload=compressible(2 * CHUNK) + os.urandom(CHUNK + 123))
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    stop = len(segment.payload) if end is None else min(end + 1, len(segment.payload))
    assert fetch(host, segment, start, end) == segment.payload[start:stop]


def test_small_reads_walk_the_stream_in_order(host: PluginHost, tmp_path: Path) -> None:
    segment = make_segment(tmp_path, size=5 * CHUNK + 7)
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    with host.storage.fetch_log_segment(segment.metadata, 3) as stream:
        parts = []
        while part := stream.read(1000):
            parts.append(part)
        assert stream.read(1) == b""
    assert b"".join(parts) == segment.payload[3:]
    with host.storage.fetch_log_segment(segment.metadata, 10, 2 * CHUNK) as stream:
        buffer = bytearray(CHUNK * 3)
        got = stream.readinto(buffer)
        rest = stream.read()
    assert bytes(buffer[:got]) + rest == segment.payload[10 : 2 * CHUNK + 1]


def test_a_range_read_downloads_only_the_bytes_it_needs(host: PluginHost, tmp_path: Path) -> None:
    segment = make_segment(tmp_path, size=10 * CHUNK)
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    fetch(host, segment, 0, 0)  # reads the manifest once
    before = metric(host, "BytesFetched", segment)
    assert (
        fetch(host, segment, 5 * CHUNK + 10, 5 * CHUNK + 1033)
        == segment.payload[5 * CHUNK + 10 : 5 * CHUNK + 1034]
    )
    assert metric(host, "BytesFetched", segment) - before == 1024


@pytest.mark.parametrize("transforms", ["zstd", "aes"])
def test_a_transformed_range_read_downloads_only_the_chunks_covering_it(
    make_host: HostFactory, target: Target, tmp_path: Path, transforms: str
) -> None:
    host = make_host(TRANSFORMS[transforms])
    segment = make_segment(tmp_path, payload=compressible(10 * CHUNK))
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    manifest = json.loads(target.fs.cat_file(segment.object_base(target.root) + ".rsm-manifest"))
    stored = manifest["chunks"]["stored_sizes"]
    fetch(host, segment, 0, 0)
    before = metric(host, "BytesFetched", segment), metric(host, "ObjectsFetched", segment)
    assert (
        fetch(host, segment, 4 * CHUNK - 1, 5 * CHUNK)
        == segment.payload[4 * CHUNK - 1 : 5 * CHUNK + 1]
    )
    after = metric(host, "BytesFetched", segment), metric(host, "ObjectsFetched", segment)
    assert after[0] - before[0] == stored[3] + stored[4] + stored[5]
    assert after[1] - before[1] == 1  # contiguous chunks share one ranged request
    assert after[0] - before[0] < sum(stored) / 2


def test_fetching_out_of_range_is_an_error(host: PluginHost, tmp_path: Path) -> None:
    segment = make_segment(tmp_path, size=100)
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    with pytest.raises(RemoteStorageError, match=r"start position 100 is past the end.*100 bytes"):
        host.storage.fetch_log_segment(segment.metadata, 100)
    with pytest.raises(RemoteStorageError, match=r"past the end"):
        host.storage.fetch_log_segment(segment.metadata, 5000, 6000)
    with pytest.raises(ValueError, match=r"start_position"):
        host.storage.fetch_log_segment(segment.metadata, -1)
    assert fetch(host, segment, 99) == segment.payload[99:]


def test_an_empty_segment_round_trips(host: PluginHost, tmp_path: Path) -> None:
    segment = make_segment(tmp_path, payload=b"")
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    assert fetch(host, segment, 0) == b""


@pytest.mark.parametrize("transforms", ["plain", "zstd+aes+cache"])
def test_every_index_is_stored_and_fetched_by_type(
    make_host: HostFactory, tmp_path: Path, transforms: str
) -> None:
    host = make_host(TRANSFORMS[transforms])
    with_txn = make_segment(tmp_path / "a", transaction_index=b"aborted-txn" * 10)
    without_txn = make_segment(tmp_path / "b", snapshot=b"")
    for segment in (with_txn, without_txn):
        host.storage.copy_log_segment_data(segment.metadata, segment.data)
    for index_type in IndexType:
        with host.storage.fetch_index(with_txn.metadata, index_type) as stream:
            assert stream.read() == with_txn.indexes[index_type], index_type
    with pytest.raises(RemoteResourceNotFoundError, match=r"has no TRANSACTION index"):
        host.storage.fetch_index(without_txn.metadata, IndexType.TRANSACTION)
    assert host.storage.fetch_index(without_txn.metadata, IndexType.PRODUCER_SNAPSHOT).read() == b""
    offsets = host.storage.fetch_index(without_txn.metadata, IndexType.OFFSET).read()
    assert offsets == without_txn.indexes[IndexType.OFFSET]


def test_delete_removes_every_object_and_is_idempotent(
    host: PluginHost, target: Target, tmp_path: Path
) -> None:
    kept = make_segment(tmp_path / "kept")
    doomed = make_segment(
        tmp_path / "doomed",
        partition=kept.metadata.topic_id_partition,
        start_offset=100,
        transaction_index=b"t" * 12,
    )
    for segment in (kept, doomed):
        host.storage.copy_log_segment_data(segment.metadata, segment.data)
    host.storage.delete_log_segment_data(doomed.metadata)
    host.storage.delete_log_segment_data(doomed.metadata)
    assert not [name for name in target.objects() if doomed.uuid in name]
    assert len([name for name in target.objects() if kept.uuid in name]) == 6
    with pytest.raises(RemoteResourceNotFoundError, match=r"no manifest"):
        host.storage.fetch_log_segment(doomed.metadata, 0)
    with pytest.raises(RemoteResourceNotFoundError):
        host.storage.fetch_index(doomed.metadata, IndexType.OFFSET)
    never_uploaded = make_segment(tmp_path / "never")
    host.storage.delete_log_segment_data(never_uploaded.metadata)
    assert fetch(host, kept, 0) == kept.payload


def test_copying_the_same_segment_id_again_overwrites(
    make_host: HostFactory, target: Target, tmp_path: Path
) -> None:
    host = make_host(TRANSFORMS["zstd+aes+cache"])
    first = make_segment(tmp_path / "first", size=3 * CHUNK)
    host.storage.copy_log_segment_data(first.metadata, first.data)
    assert fetch(host, first, 0) == first.payload  # fills the manifest and chunk caches
    second = make_segment(tmp_path / "second", size=2 * CHUNK + 1, transaction_index=b"x" * 24)
    second = attrs.evolve(second, metadata=first.metadata)
    host.storage.copy_log_segment_data(second.metadata, second.data)
    assert fetch(host, second, 0) == second.payload
    assert host.storage.fetch_index(first.metadata, IndexType.TRANSACTION).read() == b"x" * 24
    assert len([name for name in target.objects() if first.uuid in name]) == 7


def test_custom_metadata_is_small_and_keeps_old_segments_readable_after_a_url_change(
    make_host: HostFactory, target: Target, tmp_path: Path
) -> None:
    host = make_host()
    segment = make_segment(tmp_path)
    custom = host.storage.copy_log_segment_data(segment.metadata, segment.data)
    assert isinstance(custom, CustomMetadata)
    assert len(custom.value) <= 128
    finished = attrs.evolve(segment.metadata, custom_metadata=custom)
    moved = make_host(url=target.url.replace("/tiered", "/elsewhere"))
    with moved.storage.fetch_log_segment(finished, 0) as stream:
        assert stream.read() == segment.payload
    moved.storage.delete_log_segment_data(finished)
    assert target.objects() == []


def test_custom_metadata_stays_within_kafkas_cap_for_a_long_prefix(
    make_host: HostFactory, target: Target, tmp_path: Path
) -> None:
    long_url = target.url + "/" + "/".join(["a-rather-long-directory-name"] * 6)
    host = make_host(url=long_url)
    segment = make_segment(tmp_path)
    custom = host.storage.copy_log_segment_data(segment.metadata, segment.data)
    assert custom is not None and len(custom.value) <= 128
    finished = attrs.evolve(segment.metadata, custom_metadata=custom)
    assert fetch(host, attrs.evolve(segment, metadata=finished), 0) == segment.payload


@pytest.mark.parametrize("transforms", ["plain", "zstd+aes+cache"])
def test_concurrent_uploads_of_different_segments(
    make_host: HostFactory, tmp_path: Path, transforms: str
) -> None:
    """More concurrent copies than the plugin has upload threads (Kafka's copier pool is 10)."""
    host = make_host(TRANSFORMS[transforms])
    tip = TopicIdPartition.of(Uuid.random(), "orders", 1)
    segments = [
        make_segment(tmp_path / str(n), size=2 * CHUNK + n, partition=tip, start_offset=100 * n)
        for n in range(20)
    ]
    with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
        copies = pool.map(
            lambda s: host.storage.copy_log_segment_data(s.metadata, s.data), segments, timeout=120
        )
        assert all(custom is not None for custom in copies)
        results = list(pool.map(lambda s: fetch(host, s, 0), segments, timeout=120))
    assert results == [segment.payload for segment in segments]
    for segment in segments:
        assert (
            host.storage.fetch_index(segment.metadata, IndexType.LEADER_EPOCH).read()
            == (segment.indexes[IndexType.LEADER_EPOCH])
        )


def test_metrics_count_traffic_per_topic_and_partition(host: PluginHost, tmp_path: Path) -> None:
    segment = make_segment(tmp_path, size=2 * CHUNK)
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    fetch(host, segment, 0)
    host.storage.delete_log_segment_data(segment.metadata)
    assert metric(host, "BytesUploaded", segment) > len(segment.payload)
    assert metric(host, "ObjectsUploaded", segment) == 6
    assert metric(host, "BytesFetched", segment) > len(segment.payload)
    assert metric(host, "ObjectsDeleted", segment) >= 6
    assert metric(host, "SegmentCopyTimeMs", segment) == 1
    tip = segment.metadata.topic_id_partition
    put_latency = host.metrics.value(
        "RemoteStorageManager",
        "RequestTimeMs",
        plugin="fsspec",
        role="RemoteStorageManager",
        topic=tip.topic,
        partition=tip.partition,
        operation="put",
    )
    assert isinstance(put_latency, dict) and put_latency["count"] >= 6 and put_latency["max"] > 0


@pytest.mark.parametrize("target", [pytest.param("s3", marks=pytest.mark.s3)], indirect=True)
@pytest.mark.parametrize("transforms", ["plain", "aes"])
def test_large_objects_go_up_in_parts_of_the_configured_size(
    make_host: HostFactory, target: Target, tmp_path: Path, transforms: str
) -> None:
    host = make_host(
        {**TRANSFORMS[transforms], "upload.part.size": str(5 * MiB), "chunk.size": str(MiB)}
    )
    segment = make_segment(tmp_path, size=12 * MiB + 5)
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    etag = target.fs.info(segment.object_base(target.root) + ".log")["ETag"]
    assert etag.strip('"').endswith("-3")  # S3 marks a multipart object with its part count
    assert (
        fetch(host, segment, 5 * MiB - 3, 10 * MiB + 3)
        == segment.payload[5 * MiB - 3 : 10 * MiB + 4]
    )
