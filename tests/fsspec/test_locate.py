"""locate_log_segment: where a segment's bytes are, on file:// (paths) and s3:// (presigned
URLs read with Range requests against moto's server); memory:// cannot be located.

Every location is read back with the reference reader, ``read_location``, and must give the
bytes ``fetch_log_segment`` gives for the same range.
"""

from __future__ import annotations

import datetime
import json
import os
import urllib.parse
from pathlib import Path

import attrs
import pytest
from tierlog.errors import RemoteResourceNotFoundError, RemoteStorageError
from tierlog.host import PluginHost
from tierlog.location_reader import read_location
from tierlog.locations import SegmentLocation

from .conftest import CHUNK, HostFactory, Target
from .segments import Segment, compressible, make_segment

KEY = "k1:" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWY="

SETUPS = {
    "plain": {},
    "compressed": {"compression": "zstd"},
    "encrypted-one-chunk": {"encryption.keys": KEY, "chunk.size": str(64 * CHUNK)},
    "encrypted": {"encryption.keys": KEY},
    "compressed+encrypted+cache": {
        "compression": "zstd",
        "encryption.keys": KEY,
        "cache.kind": "memory",
        "cache.size.bytes": str(64 * CHUNK),
        "prefetch.chunks": "2",
    },
}

#: Compressible chunks around a random one, which is stored uncompressed even with zstd on.
PAYLOAD_SIZE = 5 * CHUNK + 321

RANGES = {
    "whole": (0, None),
    "first-chunk": (0, CHUNK - 1),
    "middle": (CHUNK + 100, 2 * CHUNK + 100),
    "across-borders": (CHUNK - 1, 3 * CHUNK + 50),
    "one-byte": (2 * CHUNK + 7, 2 * CHUNK + 7),
    "to-the-end": (3 * CHUNK + 5, None),
    "last-byte": (PAYLOAD_SIZE - 1, None),
    "end-past-the-end": (4 * CHUNK, 10**9),
}


def payload() -> bytes:
    data = compressible(2 * CHUNK) + os.urandom(CHUNK) + compressible(2 * CHUNK + 321)
    assert len(data) == PAYLOAD_SIZE
    return data


def expiry(url: str) -> int:
    """When a presigned URL expires: SigV2's ``Expires`` (epoch seconds), or SigV4's
    ``X-Amz-Date`` plus ``X-Amz-Expires``, in seconds."""
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    if "Expires" in query:
        return int(query["Expires"][0])
    signed = datetime.datetime.strptime(query["X-Amz-Date"][0], "%Y%m%dT%H%M%SZ")
    return int(signed.replace(tzinfo=datetime.UTC).timestamp()) + int(query["X-Amz-Expires"][0])


def fetch(host: PluginHost, segment: Segment, start: int, end: int | None) -> bytes:
    with host.storage.fetch_log_segment(segment.metadata, start, end) as stream:
        return stream.read()


def locate(
    host: PluginHost, segment: Segment, start: int, end: int | None, **options: int
) -> SegmentLocation:
    location = host.storage.locate_log_segment(segment.metadata, start, end, **options)
    assert location is not None
    return location


#: The targets whose objects another process can reach: by path, and by presigned URL.
on_locatable_targets = pytest.mark.parametrize(
    "target", ["file", pytest.param("s3", marks=pytest.mark.s3)], indirect=True
)


@on_locatable_targets
@pytest.mark.parametrize("setup", list(SETUPS))
def test_a_location_yields_the_bytes_a_fetch_returns(
    make_host: HostFactory, target: Target, tmp_path: Path, setup: str
) -> None:
    host = make_host(SETUPS[setup])
    segment = make_segment(tmp_path, payload=payload())
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    assert host.storage.can_locate()
    for name, (start, end) in RANGES.items():
        stop = PAYLOAD_SIZE if end is None else min(end + 1, PAYLOAD_SIZE)
        location = locate(host, segment, start, end)
        assert (location.start, location.end) == (start, stop), name
        fetched = fetch(host, segment, start, end)
        assert fetched == segment.payload[start:stop], name
        assert read_location(location) == fetched, name
        again = SegmentLocation.from_json(json.loads(json.dumps(location.to_json())))
        assert again == location and again.key == location.key, name


@on_locatable_targets
@pytest.mark.parametrize("setup", list(SETUPS))
def test_the_location_names_the_stored_data_object(
    make_host: HostFactory, target: Target, tmp_path: Path, setup: str
) -> None:
    host = make_host(SETUPS[setup])
    segment = make_segment(tmp_path, payload=payload())
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    fetch(host, segment, 0, None)  # with a cache, every chunk is in it now
    location = locate(host, segment, CHUNK - 1, 3 * CHUNK)
    objects = (
        [location.whole] if location.whole is not None else [c.location for c in location.chunks]
    )
    data_object = segment.object_base(target.root) + ".log"
    for where in objects:
        assert where is not None
        if target.kind == "file":
            assert where.path == data_object and os.path.isabs(where.path)
        else:
            assert where.url is not None and f"/{data_object}?" in where.url
    if setup == "plain":
        assert location.whole is not None and location.key is None
        return
    assert location.whole is None
    assert [(c.plain_start, c.plain_end) for c in location.chunks] == [
        (0, CHUNK),
        (CHUNK, 2 * CHUNK),
        (2 * CHUNK, 3 * CHUNK),
        (3 * CHUNK, 4 * CHUNK),
    ] or setup == "encrypted-one-chunk"
    assert all(c.crc32c is not None for c in location.chunks)
    encrypted = "encrypted" in setup
    assert (location.key is not None) == encrypted
    assert all((c.nonce is not None and c.aad is not None) == encrypted for c in location.chunks)
    compressions = [c.compression for c in location.chunks]
    if setup.startswith("compressed"):
        assert compressions == ["zstd", "zstd", "none", "zstd"]  # the random chunk stays as is
    else:
        assert set(compressions) == {"none"}


@on_locatable_targets
def test_a_tampered_chunk_or_a_wrong_key_fails_the_read(
    make_host: HostFactory, target: Target, tmp_path: Path
) -> None:
    host = make_host(SETUPS["compressed+encrypted+cache"])
    segment = make_segment(tmp_path, payload=payload())
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    location = locate(host, segment, 0, None)
    with pytest.raises(RemoteStorageError, match=r"chunk 0 .* failed authentication"):
        read_location(attrs.evolve(location, key=os.urandom(32)))
    swapped = attrs.evolve(location.chunks[1], nonce=location.chunks[0].nonce)
    with pytest.raises(RemoteStorageError, match=r"chunk 1 .* failed authentication"):
        read_location(
            attrs.evolve(location, chunks=(location.chunks[0], swapped, *location.chunks[2:]))
        )
    data_object = segment.object_base(target.root) + ".log"
    stored = bytearray(target.fs.cat_file(data_object))
    stored[10] ^= 0xFF
    target.fs.pipe_file(data_object, bytes(stored))
    with pytest.raises(RemoteStorageError, match=r"chunk 0 .* is corrupt: CRC-32C"):
        read_location(location, where="the tampered segment")


@on_locatable_targets
@pytest.mark.parametrize("setup", ["plain", "encrypted"])
def test_a_segment_deleted_after_it_was_located_is_not_found(
    make_host: HostFactory, target: Target, tmp_path: Path, setup: str
) -> None:
    host = make_host(SETUPS[setup])
    segment = make_segment(tmp_path, payload=payload())
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    location = locate(host, segment, 0, None)
    host.storage.delete_log_segment_data(segment.metadata)
    with pytest.raises(RemoteResourceNotFoundError):
        read_location(location)


def test_a_missing_segment_or_range_fails_as_a_fetch_does(
    make_host: HostFactory, target: Target, tmp_path: Path
) -> None:
    host = make_host()
    never_copied = make_segment(tmp_path / "absent")
    with pytest.raises(RemoteResourceNotFoundError, match=r"has no manifest") as by_fetch:
        fetch(host, never_copied, 0, None)
    with pytest.raises(RemoteResourceNotFoundError, match=r"has no manifest") as by_locate:
        host.storage.locate_log_segment(never_copied.metadata, 0)
    assert str(by_locate.value) == str(by_fetch.value)
    segment = make_segment(tmp_path / "there", size=100)
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    with pytest.raises(RemoteStorageError, match=r"start position 100 is past the end.*100 bytes"):
        host.storage.locate_log_segment(segment.metadata, 100)
    with pytest.raises(ValueError, match=r"end_position 5 is before start_position 6"):
        host.storage.locate_log_segment(segment.metadata, 6, 5)
    with pytest.raises(ValueError, match=r"expires_in_s must be a positive number of seconds"):
        host.storage.locate_log_segment(segment.metadata, 0, None, expires_in_s=0)


@on_locatable_targets
def test_an_empty_segment_is_an_empty_location(
    make_host: HostFactory, target: Target, tmp_path: Path
) -> None:
    for setup in ("plain", "encrypted"):
        host = make_host(SETUPS[setup])
        segment = make_segment(tmp_path / setup, payload=b"")
        host.storage.copy_log_segment_data(segment.metadata, segment.data)
        location = locate(host, segment, 0, None)
        assert (location.start, location.end) == (0, 0)
        assert read_location(location) == b"" == fetch(host, segment, 0, None)


@pytest.mark.parametrize("target", ["memory"], indirect=True)
def test_memory_filesystem_segments_cannot_be_located(
    make_host: HostFactory, target: Target, tmp_path: Path
) -> None:
    host = make_host(SETUPS["encrypted"])
    segment = make_segment(tmp_path, payload=payload())
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    assert host.storage.can_locate()  # the plugin has the hook, but this store has no way in
    assert host.storage.locate_log_segment(segment.metadata, 0, None) is None
    assert fetch(host, segment, 0, None) == segment.payload


@pytest.mark.s3
@pytest.mark.parametrize("target", ["s3"], indirect=True)
def test_presigned_urls_live_as_long_as_asked(
    make_host: HostFactory, target: Target, tmp_path: Path
) -> None:
    host = make_host()
    segment = make_segment(tmp_path, payload=payload())
    host.storage.copy_log_segment_data(segment.metadata, segment.data)
    location = locate(host, segment, 0, None, expires_in_s=123)
    assert location.whole is not None and location.whole.url is not None
    longer = locate(host, segment, 0, None, expires_in_s=7200)
    assert longer.whole is not None and longer.whole.url is not None
    assert expiry(longer.whole.url) - expiry(location.whole.url) in range(
        7200 - 123 - 5, 7200 - 123 + 6
    )
    assert location.whole.url.split("?", 1)[1] not in repr(location)  # the signature stays out
    document = location.to_json()
    assert document == {
        "kind": "http",
        "url": location.whole.url,
        "start": 0,
        "end": PAYLOAD_SIZE,
        "headers": {},
    }
