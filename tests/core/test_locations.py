"""Segment locations: the model's rules, its JSON form, the reference reader over real files and
a real HTTP server on 127.0.0.1, and ``locate_log_segment`` through the SPI facade."""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import attrs
import crc32c
import pytest
import tierlog
import zstandard
from tierlog.errors import PluginError, RemoteResourceNotFoundError, RemoteStorageError
from tierlog.location_reader import read_location
from tierlog.locations import ObjectLocation, SegmentLocation, StoredChunk
from tierlog.testing import DirectoryStorageManager

from .recording import RecordingMetadata, RecordingStorage
from .test_spi import segment, segment_data, started_host

PLAIN = bytes(range(256)) * 40 + b"tail"  # 10244 bytes
CHUNK = 1000


# --- the model --------------------------------------------------------------------------------


def file_chunk(path: str, number: int, **options: Any) -> StoredChunk:
    return StoredChunk(
        location=ObjectLocation(path=path),
        stored_start=number * CHUNK,
        stored_end=(number + 1) * CHUNK,
        plain_start=number * CHUNK,
        plain_end=(number + 1) * CHUNK,
        **options,
    )


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ObjectLocation(), "exactly one of path and url"),
        (lambda: ObjectLocation(path="/a", url="https://x/a"), "exactly one of path and url"),
        (lambda: ObjectLocation(path="relative/a.log"), "path must be absolute"),
        (lambda: ObjectLocation(url="ftp://host/a.log"), "url must be http or https"),
        (lambda: ObjectLocation(path="/a", headers={"x": "y"}), "headers go with a url"),
        (
            lambda: ObjectLocation(url="https://x/a", headers={"Range": "bytes=0-1"}),
            "must not hold Range",
        ),
        (lambda: SegmentLocation(start=5, end=4), "end 4 is before its start 5"),
        (lambda: SegmentLocation(start=-1, end=4), "start must be a non-negative integer"),
        (lambda: SegmentLocation(start=0, end=4), r"bytes \[0, 4\) needs whole or chunks"),
        (
            lambda: SegmentLocation(
                start=0, end=10, whole=ObjectLocation(path="/a"), chunks=[file_chunk("/a", 0)]
            ),
            "either whole .* or chunks",
        ),
        (
            lambda: SegmentLocation.of_chunks([file_chunk("/a", 0), file_chunk("/a", 2)], 0, 2500),
            "chunk 1 starts at plain byte 2000, not where chunk 0 ends",
        ),
        (
            lambda: SegmentLocation.of_chunks(
                [file_chunk("/a", 0), file_chunk("/a", 1)], 1000, 1500
            ),
            r"first chunk holds plain bytes \[0, 1000\), which must contain the start 1000",
        ),
        (
            lambda: SegmentLocation.of_chunks([file_chunk("/a", 0), file_chunk("/a", 1)], 10, 1000),
            r"last chunk holds plain bytes \[1000, 2000\), which must contain the last byte",
        ),
        (
            lambda: SegmentLocation.of_chunks([file_chunk("/a", 0)], 0, 10, key=os.urandom(32)),
            "chunk 0 has no nonce but the location has a key",
        ),
        (
            lambda: SegmentLocation.of_chunks([file_chunk("/a", 0, nonce=bytes(12))], 0, 10),
            "chunk 0 has a nonce but the location has no key",
        ),
        (
            lambda: SegmentLocation.of_chunks(
                [file_chunk("/a", 0, nonce=bytes(12))], 0, 10, key=bytes(16)
            ),
            r"data key is 32 bytes \(AES-256\), got 16",
        ),
        (lambda: file_chunk("/a", 0, nonce=bytes(8)), "nonce is 12 bytes, got 8"),
        (lambda: file_chunk("/a", 0, aad=b"x"), "associated data .* needs a nonce"),
        (lambda: file_chunk("/a", 0, compression="gzip"), "one of none, zstd, got 'gzip'"),
        (lambda: file_chunk("/a", 0, crc32c=1 << 32), "unsigned 32-bit integer"),
        (
            lambda: StoredChunk(ObjectLocation(path="/a"), 10, 5, 0, 1),
            "stored_end 5 is before its stored_start 10",
        ),
    ],
)
def test_a_location_that_cannot_be_read_is_refused_with_the_reason(
    build: Any, message: str
) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        build()


def test_the_json_form_is_the_jvm_readers_source_object() -> None:
    key = bytes(range(32))
    assert SegmentLocation.of_object(ObjectLocation(path="/r/a.log"), 10, 20).to_json() == {
        "kind": "file",
        "path": "/r/a.log",
        "start": 10,
        "end": 20,
        "alsoTry": [],
    }
    signed = ObjectLocation(url="https://b.example/a.log?X-Amz-Signature=abc", headers={"h": "v"})
    assert SegmentLocation.of_object(signed, 0, 5).to_json() == {
        "kind": "http",
        "url": "https://b.example/a.log?X-Amz-Signature=abc",
        "start": 0,
        "end": 5,
        "headers": {"h": "v"},
    }
    chunk = StoredChunk(
        location=signed,
        stored_start=16,
        stored_end=80,
        plain_start=1000,
        plain_end=2000,
        compression="zstd",
        nonce=bytes(12),
        aad=b"aad",
        crc32c=7,
    )
    location = SegmentLocation.of_chunks([chunk], 1500, 2000, key=key)
    assert location.to_json() == {
        "kind": "chunked",
        "start": 1500,
        "end": 2000,
        "key": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        "chunks": [
            {
                "location": {
                    "kind": "http",
                    "url": "https://b.example/a.log?X-Amz-Signature=abc",
                    "headers": {"h": "v"},
                },
                "storedStart": 16,
                "storedEnd": 80,
                "plainStart": 1000,
                "plainEnd": 2000,
                "compression": "zstd",
                "nonce": "AAAAAAAAAAAAAAAA",
                "aad": "YWFk",
                "crc32c": 7,
            }
        ],
    }
    assert SegmentLocation.from_json(location.to_json()) == location
    shown = repr(location)
    assert "X-Amz-Signature" not in shown and "AAECAwQF" not in shown and repr(key) not in shown


# --- the reference reader over files ----------------------------------------------------------


def test_a_whole_file_location_reads_its_range(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    path.write_bytes(PLAIN)
    where = ObjectLocation(path=str(path))
    for start, end in [(0, len(PLAIN)), (5, 6), (999, 4321), (len(PLAIN), len(PLAIN))]:
        assert read_location(SegmentLocation.of_object(where, start, end)) == PLAIN[start:end]
    with pytest.raises(RemoteStorageError, match=r"has 10244 bytes, fewer than the 10300"):
        read_location(SegmentLocation.of_object(where, 10_000, 10_300), where="seg 7")
    path.unlink()
    with pytest.raises(RemoteResourceNotFoundError, match=r"seg 7: .*segment.log does not exist"):
        read_location(SegmentLocation.of_object(where, 0, 10), where="seg 7")


def encode_chunks(
    path: Path, plain: bytes, *, key: bytes | None, compress: set[int], crc: bool = True
) -> list[StoredChunk]:
    """Writes ``plain`` in CHUNK-sized chunks, each compressed and/or encrypted on its own, after
    a 7-byte header, and describes them (encryption needs ``cryptography``, which the fsspec
    plugin brings; the core install has none)."""
    stored = bytearray(b"header!")
    chunks = []
    for number, low in enumerate(range(0, len(plain), CHUNK)):
        body = plain[low : low + CHUNK]
        if number in compress:
            body = zstandard.ZstdCompressor().compress(body)
        nonce = aad = None
        if key is not None:
            aead = pytest.importorskip("cryptography.hazmat.primitives.ciphers.aead")
            nonce, aad = number.to_bytes(12, "big"), b"segment-x/" + bytes([number])
            body = aead.AESGCM(key).encrypt(nonce, body, aad)
        chunks.append(
            StoredChunk(
                location=ObjectLocation(path=str(path)),
                stored_start=len(stored),
                stored_end=len(stored) + len(body),
                plain_start=low,
                plain_end=min(low + CHUNK, len(plain)),
                compression="zstd" if number in compress else "none",
                nonce=nonce,
                aad=aad,
                crc32c=crc32c.crc32c(body) if crc else None,
            )
        )
        stored += body
    path.write_bytes(stored)
    return chunks


def located(chunks: list[StoredChunk], start: int, end: int, key: bytes | None) -> SegmentLocation:
    """Only the chunks overlapping ``[start, end)``, as a plugin lists them."""
    wanted = [c for c in chunks if c.plain_end > start and c.plain_start < end]
    return SegmentLocation.of_chunks(wanted, start, end, key)


@pytest.mark.parametrize("encrypted", [False, True], ids=["clear", "encrypted"])
def test_chunked_locations_decode_to_the_plain_bytes(tmp_path: Path, encrypted: bool) -> None:
    key = os.urandom(32) if encrypted else None
    chunks = encode_chunks(tmp_path / "data", PLAIN, key=key, compress={0, 1, 3, 10})
    for start, end in [(0, len(PLAIN)), (999, 1001), (1000, 2000), (2500, 9999), (10240, 10244)]:
        assert read_location(located(chunks, start, end, key)) == PLAIN[start:end]


def test_a_chunk_that_fails_a_check_names_the_chunk_and_the_check(tmp_path: Path) -> None:
    key = os.urandom(32)
    path = tmp_path / "data"
    chunks = encode_chunks(path, PLAIN, key=key, compress={2})
    whole = located(chunks, 0, len(PLAIN), key)
    with pytest.raises(RemoteStorageError, match=r"seg 9: chunk 0 .* failed authentication"):
        read_location(attrs.evolve(whole, key=os.urandom(32)), where="seg 9")
    moved = located(chunks, 2000, 3000, key)
    moved = attrs.evolve(moved, chunks=[attrs.evolve(moved.chunks[0], aad=chunks[1].aad)])
    with pytest.raises(RemoteStorageError, match=r"chunk 0 \(plain bytes 2000-2999\) failed auth"):
        read_location(moved)
    stored = bytearray(path.read_bytes())
    stored[chunks[3].stored_start + 5] ^= 1
    path.write_bytes(bytes(stored))
    with pytest.raises(RemoteStorageError, match=r"chunk 0 \(plain bytes 3000-3999\) is corrupt"):
        read_location(located(chunks, 3000, 3500, key))
    unchecked = encode_chunks(tmp_path / "other", PLAIN, key=None, compress={0}, crc=False)
    wrong_size = attrs.evolve(unchecked[0], plain_end=999)
    with pytest.raises(
        RemoteStorageError, match=r"plain bytes 0-998\) decodes to 1000 bytes, expected 999"
    ):
        read_location(SegmentLocation.of_chunks([wrong_size], 0, 999))


# --- the reference reader over HTTP -----------------------------------------------------------


class RangeServer(http.server.ThreadingHTTPServer):
    """Serves named byte strings with Range support; can fail the first requests on purpose."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), RangeHandler)
        self.objects: dict[str, bytes] = {}
        self.failures: list[int] = []
        self.ignore_range = False
        self.ranges: list[str | None] = []

    def url(self, name: str) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/{name}?signature=secret"


class RangeHandler(http.server.BaseHTTPRequestHandler):
    server: RangeServer
    protocol_version: ClassVar[str] = "HTTP/1.1"  # type: ignore[misc]

    def do_GET(self) -> None:
        self.server.ranges.append(self.headers.get("Range"))
        if self.server.failures:
            self._send(self.server.failures.pop(0), b"")
            return
        data = self.server.objects.get(self.path.split("?")[0].lstrip("/"))
        if data is None:
            self._send(404, b"")
            return
        wanted = self.headers.get("Range")
        if wanted is None or self.server.ignore_range:
            self._send(200, data)
            return
        first, last = (int(x) for x in wanted.removeprefix("bytes=").split("-"))
        if first >= len(data):
            self._send(416, b"")
            return
        self._send(206, data[first : last + 1])

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[RangeServer]:
    server = RangeServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_http_locations_are_read_with_range_requests(server: RangeServer, tmp_path: Path) -> None:
    server.objects["plain.log"] = PLAIN
    where = ObjectLocation(url=server.url("plain.log"))
    assert read_location(SegmentLocation.of_object(where, 100, 2100)) == PLAIN[100:2100]
    assert server.ranges == ["bytes=100-2099"]
    chunks = encode_chunks(tmp_path / "data", PLAIN, key=None, compress={1, 2})
    server.objects["data"] = (tmp_path / "data").read_bytes()
    remote = [attrs.evolve(c, location=ObjectLocation(url=server.url("data"))) for c in chunks]
    assert read_location(located(remote, 1500, 3001, None)) == PLAIN[1500:3001]
    server.ignore_range = True
    assert read_location(SegmentLocation.of_object(where, 7, 70)) == PLAIN[7:70]


def test_http_failures_are_retried_or_reported(server: RangeServer) -> None:
    server.objects["plain.log"] = PLAIN
    where = ObjectLocation(url=server.url("plain.log"))
    server.failures = [503, 500, 429]
    assert read_location(SegmentLocation.of_object(where, 0, 10)) == PLAIN[:10]
    assert len(server.ranges) == 4
    server.failures = [503] * 10
    with pytest.raises(RemoteStorageError, match=r"failed 4 times; last: 503") as caught:
        read_location(SegmentLocation.of_object(where, 0, 10))
    assert "signature=secret" not in str(caught.value)
    server.failures = [403]
    with pytest.raises(RemoteStorageError, match=r"answered 403 .*signed URL that expired"):
        read_location(SegmentLocation.of_object(where, 0, 10))
    gone = ObjectLocation(url=server.url("gone.log"))
    with pytest.raises(RemoteResourceNotFoundError, match=r"gone.log\?\.\.\. answered 404"):
        read_location(SegmentLocation.of_object(gone, 0, 10))
    with pytest.raises(RemoteStorageError, match=r"fewer than the 20000 bytes .*\(416 Range"):
        read_location(SegmentLocation.of_object(where, 19_000, 20_000))


# --- through the SPI facade -------------------------------------------------------------------


def test_a_plugin_without_the_hook_locates_nothing() -> None:
    host = started_host(
        {"store": RecordingStorage("store", []), "meta": RecordingMetadata("m", [])}
    )
    try:
        assert host.storage.can_locate() is False
        assert host.storage.locate_log_segment(segment(), 0) is None
        with pytest.raises(ValueError, match="start_position must be >= 0"):
            host.storage.locate_log_segment(segment(), -1)
    finally:
        host.close()


def test_the_directory_storage_locates_its_segment_file(tmp_path: Path) -> None:
    from tierlog.config import BrokerConfig
    from tierlog.host import PluginHost

    host = PluginHost.create(
        BrokerConfig.from_mapping(
            {
                "remote.log.storage.system.enable": "true",
                "remote.log.storage.manager.name": "directory",
                "remote.log.metadata.manager.name": "memory",
                "rsm.config.root": str(tmp_path / "remote"),
            }
        ),
        extra_plugins={"directory": DirectoryStorageManager},
    )
    host.start()
    try:
        meta = segment()
        host.storage.copy_log_segment_data(meta, segment_data(tmp_path, PLAIN))
        assert host.storage.can_locate() is True
        for start, end in [(0, None), (3, 3), (100, 5000), (10_000, 99_999)]:
            location = host.storage.locate_log_segment(meta, start, end)
            assert location is not None and location.whole is not None
            with host.storage.fetch_log_segment(meta, start, end) as stream:
                assert read_location(location) == stream.read()
        with pytest.raises(RemoteStorageError, match="past the end"):
            host.storage.locate_log_segment(meta, len(PLAIN))
        with pytest.raises(RemoteResourceNotFoundError):
            host.storage.locate_log_segment(segment(100, 199), 0)
    finally:
        host.close()


class LocatingStorage(RecordingStorage):
    """Answers locate with whatever the test put in ``answer``."""

    answer: Any = None

    @tierlog.hookimpl
    def tierlog_locate_log_segment(
        self, remote_log_segment_metadata: Any, start_position: int, end_position: int | None
    ) -> Any:
        return self.answer


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b"/tmp/a.log", "returned bytes from locate_log_segment; expected SegmentLocation or None"),
        (
            SegmentLocation.of_object(ObjectLocation(path="/a.log"), 3, 10),
            r"located bytes \[3, 10\) for the range \[2, 8\]",
        ),
        (
            SegmentLocation.of_object(ObjectLocation(path="/a.log"), 2, 10),
            r"ends \(exclusive\) at most one past end_position",
        ),
    ],
    ids=["not-a-location", "wrong-start", "past-the-end"],
)
def test_a_location_that_does_not_answer_the_call_is_the_plugins_bug(
    answer: Any, message: str
) -> None:
    storage = LocatingStorage("store", [])
    storage.answer = answer
    host = started_host({"store": storage, "meta": RecordingMetadata("m", [])})
    try:
        assert host.storage.can_locate() is True
        with pytest.raises(PluginError, match=message):
            host.storage.locate_log_segment(segment(), 2, 8)
        storage.answer = SegmentLocation.of_object(ObjectLocation(path="/a.log"), 2, 9)
        assert host.storage.locate_log_segment(segment(), 2, 8) == storage.answer
    finally:
        host.close()
