"""Where a segment's bytes are stored, so a reader outside the plugin can fetch them itself.

A storage plugin that implements ``tierlog_locate_log_segment`` answers with a
:class:`SegmentLocation`: a plain byte range of the segment and either one object holding those
bytes as they are (``whole``) or the stored chunks that decode to them (``chunks``, with what
decoding needs: compression, nonce, associated data, checksum and the data key). Spark's JVM
reader fetches and decodes them on the executors without calling the plugin; its JSON form is
:meth:`SegmentLocation.to_json`.

``location_reader.read_location`` is the reference reader of these locations.

A location with a ``key`` carries the segment's unwrapped data key: whoever holds the location
can decrypt those chunks, just as whoever holds the plugin's settings (its key ring) can.
"""

from __future__ import annotations

import base64
import binascii
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Literal

import attrs

#: How long a signed URL stays valid when the caller does not say (seconds).
DEFAULT_EXPIRES_IN_S: Final = 3600
#: Compression of a stored chunk, as the JSON form names it.
COMPRESSIONS: Final = ("none", "zstd")
#: AES-GCM nonces are 96 bits; its tag is the last 16 bytes of a stored chunk.
NONCE_BYTES: Final = 12
GCM_TAG_BYTES: Final = 16
#: Data keys are AES-256.
KEY_BYTES: Final = 32

Compression = Literal["none", "zstd"]


def without_query(url: str | None) -> str:
    """A URL for reprs and errors: a signed URL's query is a credential, so it is left out."""
    if url is None:
        return "None"
    parts = urllib.parse.urlsplit(url)
    return repr(urllib.parse.urlunsplit(parts._replace(query="...") if parts.query else parts))


def _headers(value: Mapping[str, str] | None) -> Mapping[str, str]:
    headers = dict(value or {})
    for name, text in headers.items():
        if not isinstance(name, str) or not isinstance(text, str):
            raise TypeError(
                f"headers map names to values, both str; got {name!r}: {type(text).__name__}"
            )
        if name.lower() == "range":
            raise ValueError("headers must not hold Range: the reader sets it from the byte range")
    return MappingProxyType(headers)


@attrs.frozen
class ObjectLocation:
    """One stored object: a local file by absolute path, or a URL read with HTTP GET.

    ``headers`` are sent with every request for a URL (a presigned URL needs none).
    """

    path: str | None = None
    url: str | None = attrs.field(default=None, repr=without_query)
    headers: Mapping[str, str] = attrs.field(
        factory=dict, converter=_headers, hash=False, repr=False
    )

    def __attrs_post_init__(self) -> None:
        if (self.path is None) == (self.url is None):
            raise ValueError("an object location has exactly one of path and url")
        if self.path is not None:
            if not isinstance(self.path, str) or not os.path.isabs(self.path):
                raise ValueError(f"an object location's path must be absolute, got {self.path!r}")
            if self.headers:
                raise ValueError("headers go with a url, not with a local path")
        else:
            scheme = urllib.parse.urlsplit(str(self.url)).scheme
            if scheme not in ("http", "https"):
                shown = without_query(self.url)
                raise ValueError(f"an object location's url must be http or https, got {shown}")

    @property
    def kind(self) -> Literal["file", "http"]:
        return "file" if self.path is not None else "http"

    def to_json(self) -> dict[str, Any]:
        """``{"kind": "file", "path": ...}`` or ``{"kind": "http", "url": ..., "headers": {}}``."""
        if self.path is not None:
            return {"kind": "file", "path": self.path}
        return {"kind": "http", "url": self.url, "headers": dict(self.headers)}

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> ObjectLocation:
        kind = document.get("kind")
        if kind == "file":
            return cls(path=document["path"])
        if kind == "http":
            return cls(url=document["url"], headers=document.get("headers") or {})
        raise ValueError(f"an object location's kind is 'file' or 'http', got {kind!r}")

    def describe(self) -> str:
        return self.path if self.path is not None else without_query(self.url).strip("'")


def _natural(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{attribute.name} must be a non-negative integer, got {value!r}")


def _optional_bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


@attrs.frozen
class StoredChunk:
    """Stored bytes ``[stored_start, stored_end)`` of an object that decode to plain segment
    bytes ``[plain_start, plain_end)``.

    Decoding is: check the CRC-32C of the stored bytes (when ``crc32c`` is set), decrypt them with
    AES-GCM under the location's key, ``nonce`` and ``aad`` (when the location has a key; the tag
    is the last 16 bytes), then zstd-decompress (when ``compression`` is ``"zstd"``).
    """

    location: ObjectLocation
    stored_start: int = attrs.field(validator=_natural)
    stored_end: int = attrs.field(validator=_natural)
    plain_start: int = attrs.field(validator=_natural)
    plain_end: int = attrs.field(validator=_natural)
    compression: Compression = "none"
    nonce: bytes | None = attrs.field(default=None, converter=_optional_bytes, repr=False)
    aad: bytes | None = attrs.field(default=None, converter=_optional_bytes, repr=False)
    crc32c: int | None = None

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.location, ObjectLocation):
            raise TypeError(
                f"a chunk's location is an ObjectLocation, got {type(self.location).__name__}"
            )
        if self.stored_end < self.stored_start:
            raise ValueError(
                f"a chunk's stored_end {self.stored_end} is before its stored_start "
                f"{self.stored_start}"
            )
        if self.plain_end < self.plain_start:
            raise ValueError(
                f"a chunk's plain_end {self.plain_end} is before its plain_start {self.plain_start}"
            )
        if self.compression not in COMPRESSIONS:
            raise ValueError(
                f"a chunk's compression is one of {', '.join(COMPRESSIONS)}, got "
                f"{self.compression!r}"
            )
        if self.nonce is not None and len(self.nonce) != NONCE_BYTES:
            raise ValueError(f"a chunk's nonce is {NONCE_BYTES} bytes, got {len(self.nonce)}")
        if self.aad is not None and self.nonce is None:
            raise ValueError("a chunk with associated data (aad) needs a nonce")
        if self.nonce is not None and self.stored_end - self.stored_start < GCM_TAG_BYTES:
            raise ValueError(
                f"an encrypted chunk holds at least its {GCM_TAG_BYTES}-byte tag, got "
                f"{self.stored_end - self.stored_start} stored bytes"
            )
        if self.crc32c is not None and not (
            isinstance(self.crc32c, int) and 0 <= self.crc32c < 1 << 32
        ):
            raise ValueError(f"a chunk's crc32c is an unsigned 32-bit integer, got {self.crc32c!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "location": self.location.to_json(),
            "storedStart": self.stored_start,
            "storedEnd": self.stored_end,
            "plainStart": self.plain_start,
            "plainEnd": self.plain_end,
            "compression": self.compression,
            "nonce": _b64(self.nonce),
            "aad": _b64(self.aad),
            "crc32c": self.crc32c,
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> StoredChunk:
        return cls(
            location=ObjectLocation.from_json(document["location"]),
            stored_start=document["storedStart"],
            stored_end=document["storedEnd"],
            plain_start=document["plainStart"],
            plain_end=document["plainEnd"],
            compression=document.get("compression", "none"),
            nonce=_unb64(document.get("nonce"), "nonce"),
            aad=_unb64(document.get("aad"), "aad"),
            crc32c=document.get("crc32c"),
        )


def _chunks(value: Sequence[StoredChunk]) -> tuple[StoredChunk, ...]:
    return tuple(value)


@attrs.frozen
class SegmentLocation:
    """Plain segment bytes ``[start, end)`` (``end`` exclusive) and where they are stored.

    Either ``whole``: one object whose bytes are the segment's, read at ``[start, end)``
    directly; or ``chunks``: the stored chunks overlapping the range, in order and contiguous,
    with ``key`` (the AES-256 data key) when they are encrypted. Build one with :meth:`of_object`
    or :meth:`of_chunks`.
    """

    start: int = attrs.field(validator=_natural)
    end: int = attrs.field(validator=_natural)
    whole: ObjectLocation | None = None
    chunks: tuple[StoredChunk, ...] = attrs.field(default=(), converter=_chunks)
    key: bytes | None = attrs.field(default=None, converter=_optional_bytes, repr=False)

    @classmethod
    def of_object(cls, location: ObjectLocation, start: int, end: int) -> SegmentLocation:
        """Bytes ``[start, end)`` of an object that holds the segment as it is."""
        return cls(start=start, end=end, whole=location)

    @classmethod
    def of_chunks(
        cls, chunks: Sequence[StoredChunk], start: int, end: int, key: bytes | None = None
    ) -> SegmentLocation:
        """Bytes ``[start, end)`` decoded from ``chunks`` (with ``key`` if they are encrypted)."""
        return cls(start=start, end=end, chunks=tuple(chunks), key=key)

    def __attrs_post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError(
                f"a segment location's end {self.end} is before its start {self.start}"
            )
        if self.whole is not None:
            if not isinstance(self.whole, ObjectLocation):
                raise TypeError(
                    f"a segment location's whole is an ObjectLocation, got "
                    f"{type(self.whole).__name__}"
                )
            if self.chunks or self.key is not None:
                raise ValueError(
                    "a segment location is either whole (one object read as it is) or chunks "
                    "(with an optional key), not both"
                )
            return
        self._check_chunks()

    def _check_chunks(self) -> None:
        if self.key is not None and len(self.key) != KEY_BYTES:
            raise ValueError(f"a data key is {KEY_BYTES} bytes (AES-256), got {len(self.key)}")
        if not self.chunks:
            if self.end > self.start:
                raise ValueError(
                    f"a segment location of bytes [{self.start}, {self.end}) needs whole or chunks"
                )
            return
        for number, chunk in enumerate(self.chunks):
            if not isinstance(chunk, StoredChunk):
                raise TypeError(f"chunk {number} is a {type(chunk).__name__}, not a StoredChunk")
            if (chunk.nonce is None) != (self.key is None):
                raise ValueError(
                    f"chunk {number} has {'a' if chunk.nonce is not None else 'no'} nonce but the "
                    f"location has {'a' if self.key is not None else 'no'} key: encrypted chunks "
                    "need both"
                )
            if number and chunk.plain_start != self.chunks[number - 1].plain_end:
                raise ValueError(
                    f"chunk {number} starts at plain byte {chunk.plain_start}, not where chunk "
                    f"{number - 1} ends ({self.chunks[number - 1].plain_end}): chunks are listed "
                    "in order, without gaps"
                )
        first, last = self.chunks[0], self.chunks[-1]
        if not (first.plain_start <= self.start < first.plain_end):
            raise ValueError(
                f"the first chunk holds plain bytes [{first.plain_start}, {first.plain_end}), "
                f"which must contain the start {self.start}: only the chunks overlapping the "
                "range are listed"
            )
        if not (last.plain_start < self.end <= last.plain_end):
            raise ValueError(
                f"the last chunk holds plain bytes [{last.plain_start}, {last.plain_end}), "
                f"which must contain the last byte before the end {self.end}: only the chunks "
                "overlapping the range are listed"
            )

    @property
    def size(self) -> int:
        return self.end - self.start

    def to_json(self) -> dict[str, Any]:
        """The source object of a read range in the JVM reader's plan (``file``, ``http`` or
        ``chunked``), with bytes in base64; ready for ``json.dumps``."""
        if self.whole is not None:
            document = self.whole.to_json()
            if self.whole.path is not None:
                return {**document, "start": self.start, "end": self.end, "alsoTry": []}
            return {
                "kind": "http",
                "url": document["url"],
                "start": self.start,
                "end": self.end,
                "headers": document["headers"],
            }
        return {
            "kind": "chunked",
            "start": self.start,
            "end": self.end,
            "key": _b64(self.key),
            "chunks": [chunk.to_json() for chunk in self.chunks],
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> SegmentLocation:
        """The location :meth:`to_json` wrote."""
        kind = document.get("kind")
        start, end = document["start"], document["end"]
        if kind in ("file", "http"):
            return cls.of_object(ObjectLocation.from_json(document), start, end)
        if kind == "chunked":
            return cls.of_chunks(
                [StoredChunk.from_json(chunk) for chunk in document["chunks"]],
                start,
                end,
                _unb64(document.get("key"), "key"),
            )
        raise ValueError(f"a segment location's kind is 'file', 'http' or 'chunked', got {kind!r}")


def _b64(value: bytes | None) -> str | None:
    return None if value is None else base64.b64encode(value).decode("ascii")


def _unb64(value: str | None, what: str) -> bytes | None:
    if value is None:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as err:
        raise ValueError(f"{what} is not valid base64: {err}") from err
