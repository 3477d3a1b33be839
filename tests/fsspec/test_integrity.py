"""Damaged objects are detected with a clear error; encryption keys, rotation and chunk binding."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from tierlog.errors import RemoteStorageError
from tierlog.host import PluginHost
from tierlog.model import IndexType

from .conftest import CHUNK, HostFactory, Target
from .segments import Segment, compressible, make_segment, record_batch_head

KEY_1 = base64.b64encode(b"1" * 32).decode()
KEY_2 = base64.b64encode(b"2" * 32).decode()
KEY_OTHER = base64.b64encode(b"x" * 32).decode()


def stored(target: Target, segment: Segment, kind: str) -> bytes:
    return bytes(target.fs.cat_file(f"{segment.object_base(target.root)}.{kind}"))


def replace(target: Target, segment: Segment, kind: str, data: bytes) -> None:
    target.fs.pipe_file(f"{segment.object_base(target.root)}.{kind}", data)
    target.fs.invalidate_cache()


def manifest(target: Target, segment: Segment) -> dict:  # type: ignore[type-arg]
    return json.loads(stored(target, segment, "rsm-manifest"))  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "settings",
    [{}, {"compression": "zstd"}, {"encryption.keys": f"k1:{KEY_1}"}, {"cache.kind": "memory"}],
    ids=["plain", "zstd", "aes", "cached"],
)
def test_a_corrupted_chunk_is_detected_and_named(
    make_host: HostFactory, target: Target, tmp_path: Path, settings: dict[str, str]
) -> None:
    host = make_host(settings)
    segment = make_segment(tmp_path, payload=compressible(4 * CHUNK))
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    data = bytearray(stored(target, segment, "log"))
    offsets = [0]
    for size in manifest(target, segment)["chunks"]["stored_sizes"]:
        offsets.append(offsets[-1] + size)
    data[offsets[2] + 3] ^= 0x40  # one flipped bit inside chunk 2
    replace(target, segment, "log", bytes(data))

    with host.storage.fetch_log_segment(segment.metadata, 0, CHUNK * 2 - 1) as stream:
        assert stream.read() == segment.payload[: 2 * CHUNK]  # chunks 0 and 1 are intact
    with pytest.raises(
        RemoteStorageError, match=r"chunk 2 \(segment bytes 8192-12287\) is corrupt: CRC-32C"
    ) as caught:
        host.storage.fetch_log_segment(segment.metadata, 0).read()
    assert f"(id {segment.uuid})" in str(caught.value)


@pytest.mark.parametrize("settings", [{}, {"compression": "zstd"}], ids=["plain", "zstd"])
def test_a_truncated_data_object_is_detected(
    make_host: HostFactory, target: Target, tmp_path: Path, settings: dict[str, str]
) -> None:
    host = make_host(settings)
    segment = make_segment(tmp_path, payload=compressible(4 * CHUNK))
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    data = stored(target, segment, "log")
    replace(target, segment, "log", data[: len(data) // 2])
    with pytest.raises(
        RemoteStorageError, match=r"is truncated: \d+ bytes stored, the manifest says \d+"
    ):
        host.storage.fetch_log_segment(segment.metadata, 0).read()
    with pytest.raises(RemoteStorageError, match=r"truncated"):
        host.storage.fetch_log_segment(segment.metadata, 3 * CHUNK + 1).read()


def test_a_corrupted_or_truncated_index_is_detected(
    host: PluginHost, target: Target, tmp_path: Path
) -> None:
    segment = make_segment(tmp_path)
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    original = stored(target, segment, "timeindex")
    replace(target, segment, "timeindex", bytes([original[0] ^ 0xFF]) + original[1:])
    with pytest.raises(RemoteStorageError, match=r"TIMESTAMP index .* is corrupt: CRC-32C"):
        host.storage.fetch_index(segment.metadata, IndexType.TIMESTAMP)
    replace(target, segment, "timeindex", original[:-5])
    with pytest.raises(RemoteStorageError, match=r"TIMESTAMP index .* the manifest says"):
        host.storage.fetch_index(segment.metadata, IndexType.TIMESTAMP)


def test_a_corrupt_manifest_is_reported_as_such(
    host: PluginHost, target: Target, tmp_path: Path
) -> None:
    segment = make_segment(tmp_path)
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    replace(target, segment, "rsm-manifest", stored(target, segment, "rsm-manifest")[:40])
    with pytest.raises(RemoteStorageError, match=r"the manifest of segment .* is corrupt"):
        host.storage.fetch_log_segment(segment.metadata, 0)


def test_encrypted_objects_hold_no_plaintext(
    make_host: HostFactory, target: Target, tmp_path: Path
) -> None:
    host = make_host({"encryption.keys": f"k1:{KEY_1}"})
    segment = make_segment(tmp_path, payload=compressible(3 * CHUNK), snapshot=b"producer-42" * 9)
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    assert b"customer-" not in stored(target, segment, "log")
    assert b"producer-42" not in stored(target, segment, "snapshot")
    document = manifest(target, segment)
    assert document["encryption"]["key_id"] == "k1"
    assert document["encryption"]["algorithm"] == "AES-256-GCM"
    assert KEY_1 not in json.dumps(document)


def test_the_wrong_key_fails_clearly(make_host: HostFactory, tmp_path: Path) -> None:
    writer = make_host({"encryption.keys": f"k1:{KEY_1}"})
    segment = make_segment(tmp_path)
    writer.storage.copy_log_segment_data(segment.metadata, segment.data)
    reader = make_host({"encryption.keys": f"k1:{KEY_OTHER}"})
    with pytest.raises(
        RemoteStorageError, match=r"cannot unwrap the data key .* with key 'k1'"
    ) as caught:
        reader.storage.fetch_log_segment(segment.metadata, 0)
    assert KEY_OTHER not in str(caught.value) and KEY_1 not in str(caught.value)
    unencrypted = make_host()
    with pytest.raises(
        RemoteStorageError, match=r"is encrypted .* encryption.keys is not configured"
    ):
        unencrypted.storage.fetch_index(segment.metadata, IndexType.OFFSET)


def test_key_rotation_keeps_old_segments_readable(make_host: HostFactory, tmp_path: Path) -> None:
    before = make_host({"encryption.keys": f"k1:{KEY_1}"})
    old = make_segment(tmp_path / "old")
    before.storage.copy_log_segment_data(old.metadata, old.data)

    rotated = make_host(
        {"encryption.keys": f"k1:{KEY_1},k2:{KEY_2}", "encryption.active.key": "k2"}
    )
    new = make_segment(tmp_path / "new", transaction_index=b"t" * 24)
    rotated.storage.copy_log_segment_data(new.metadata, new.data)
    for segment in (old, new):
        assert (
            rotated.storage.fetch_log_segment(segment.metadata, 10).read() == segment.payload[10:]
        )
        assert (
            rotated.storage.fetch_index(segment.metadata, IndexType.OFFSET).read()
            == (segment.indexes[IndexType.OFFSET])
        )

    retired = make_host({"encryption.keys": f"k2:{KEY_2}"})
    assert retired.storage.fetch_log_segment(new.metadata, 0).read() == new.payload
    with pytest.raises(
        RemoteStorageError, match=r"encrypted with key 'k1', which is not in encryption.keys"
    ):
        retired.storage.fetch_log_segment(old.metadata, 0)


def test_encrypted_chunks_cannot_be_swapped(
    make_host: HostFactory, target: Target, tmp_path: Path
) -> None:
    host = make_host({"encryption.keys": f"k1:{KEY_1}"})
    segment = make_segment(tmp_path, size=3 * CHUNK)
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    data = stored(target, segment, "log")
    size = len(data) // 3  # equal-sized chunks
    swapped = data[size : 2 * size] + data[:size] + data[2 * size :]
    replace(target, segment, "log", swapped)
    document = manifest(target, segment)
    sums = document["chunks"]["crc32c"]
    document["chunks"]["crc32c"] = [sums[1], sums[0], sums[2]]  # a consistent-looking forgery
    replace(target, segment, "rsm-manifest", json.dumps(document).encode())
    with pytest.raises(RemoteStorageError, match=r"chunk 0 failed authentication"):
        host.storage.fetch_log_segment(segment.metadata, 0).read()


def test_compression_shrinks_what_it_can_and_skips_what_it_cannot(
    make_host: HostFactory, target: Target, tmp_path: Path
) -> None:
    host = make_host({"compression": "zstd"})
    mixed = make_segment(
        tmp_path / "mixed", payload=compressible(2 * CHUNK) + os.urandom(2 * CHUNK)
    )
    host.storage.copy_log_segment_data(mixed.metadata, mixed.data)
    document = manifest(target, mixed)
    assert document["compression"] == "zstd"
    assert document["chunks"]["uncompressed"] == [2, 3]  # random chunks would only grow
    assert all(size < CHUNK / 4 for size in document["chunks"]["stored_sizes"][:2])
    assert host.storage.fetch_log_segment(mixed.metadata, 0).read() == mixed.payload

    # a segment whose producer already compressed its batches is stored as it is
    producer = make_segment(
        tmp_path / "producer", payload=record_batch_head(4) + os.urandom(3 * CHUNK)
    )
    host.storage.copy_log_segment_data(producer.metadata, producer.data)
    assert manifest(target, producer)["compression"] is None
    assert stored(target, producer, "log") == producer.payload
    assert (
        host.storage.fetch_log_segment(producer.metadata, 5, 9000).read()
        == producer.payload[5:9001]
    )

    # ... unless it still compresses well
    squeezable = make_segment(
        tmp_path / "squeeze", payload=record_batch_head(1) + compressible(3 * CHUNK)
    )
    host.storage.copy_log_segment_data(squeezable.metadata, squeezable.data)
    assert manifest(target, squeezable)["compression"] == "zstd"
