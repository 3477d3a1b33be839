"""The reference reader of segment locations (``locations.py``), written to the same rules as
Spark's JVM reader: tests and the conformance kit use it to prove that a location yields exactly
the bytes ``tierlog_fetch_log_segment`` returns for the same range."""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from typing import Final

from .errors import RemoteResourceNotFoundError, RemoteStorageError, RetriableRemoteStorageError
from .locations import ObjectLocation, SegmentLocation, StoredChunk

__all__ = ["read_location", "read_object"]

#: Attempts of an HTTP read before a transient failure (connection error, 5xx, 429) is final.
HTTP_ATTEMPTS: Final = 4
HTTP_TIMEOUT_S: Final = 60.0


def read_location(location: SegmentLocation, *, where: str = "the segment") -> bytes:
    """Plain segment bytes ``[location.start, location.end)``, read and decoded as the JVM
    reader does; ``where`` names the segment in errors.

    :raises RemoteResourceNotFoundError: an object is gone (missing file, HTTP 404).
    :raises RemoteStorageError: an object is shorter than the location says, HTTP refused it, or a
        chunk fails its checksum, authentication or decompression.
    """
    if location.whole is not None:
        return read_object(location.whole, location.start, location.end, where=where)
    plain = []
    for number, chunk in enumerate(location.chunks):
        what = f"{where}: chunk {number} (plain bytes {chunk.plain_start}-{chunk.plain_end - 1})"
        stored = read_object(chunk.location, chunk.stored_start, chunk.stored_end, where=what)
        plain.append(_decode_chunk(chunk, stored, location.key, what))
    data = b"".join(plain)
    base = location.chunks[0].plain_start if location.chunks else location.start
    return data[location.start - base : location.end - base]


def _decode_chunk(chunk: StoredChunk, stored: bytes, key: bytes | None, what: str) -> bytes:
    if chunk.crc32c is not None:
        import crc32c

        actual = int(crc32c.crc32c(stored))
        if actual != chunk.crc32c:
            raise RemoteStorageError(
                f"{what} is corrupt: CRC-32C {actual:#010x} of its stored bytes, expected "
                f"{chunk.crc32c:#010x}"
            )
    body = stored
    if key is not None:
        try:
            from cryptography.exceptions import InvalidTag
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError as err:
            raise RemoteStorageError(
                f"{what} is encrypted: reading it needs the 'cryptography' package"
            ) from err
        if chunk.nonce is None:
            raise RemoteStorageError(f"{what} is encrypted but its location gives no nonce")
        try:
            body = AESGCM(key).decrypt(chunk.nonce, body, chunk.aad)
        except InvalidTag as err:
            raise RemoteStorageError(
                f"{what} failed authentication: wrong key, nonce or associated data, or the "
                "stored bytes were altered"
            ) from err
    size = chunk.plain_end - chunk.plain_start
    if chunk.compression == "zstd":
        import zstandard

        try:
            body = zstandard.ZstdDecompressor().decompress(body, max_output_size=size)
        except zstandard.ZstdError as err:
            raise RemoteStorageError(f"{what} cannot be zstd-decompressed: {err}") from err
    if len(body) != size:
        raise RemoteStorageError(f"{what} decodes to {len(body)} bytes, expected {size}")
    return body


def read_object(location: ObjectLocation, start: int, end: int, *, where: str) -> bytes:
    """Bytes ``[start, end)`` of one object; fewer bytes than that is an error."""
    if end <= start:
        return b""
    if location.path is not None:
        return _read_file(location.path, start, end, where)
    return _read_http(location, start, end, where)


def _read_file(path: str, start: int, end: int, where: str) -> bytes:
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except FileNotFoundError as err:
        raise RemoteResourceNotFoundError(
            f"{where}: {path} does not exist (deleted since it was located?)"
        ) from err
    except OSError as err:
        raise RemoteStorageError(f"{where}: cannot open {path}: {err}") from err
    try:
        parts = []
        position = start
        while position < end:
            piece = os.pread(descriptor, end - position, position)
            if not piece:
                break
            parts.append(piece)
            position += len(piece)
    finally:
        os.close(descriptor)
    if position < end:
        raise RemoteStorageError(
            f"{where}: {path} has {position} bytes, fewer than the {end} it had when it was "
            "located (truncated since)"
        )
    return b"".join(parts)


def _read_http(location: ObjectLocation, start: int, end: int, where: str) -> bytes:
    url = str(location.url)
    shown = location.describe()
    headers = {**location.headers, "Range": f"bytes={start}-{end - 1}"}
    failure = ""
    for attempt in range(1, HTTP_ATTEMPTS + 1):
        request = urllib.request.Request(url, headers=headers, method="GET")
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
                body: bytes = response.read()
                status = response.status
        except urllib.error.HTTPError as err:
            if err.code == 404:
                raise RemoteResourceNotFoundError(
                    f"{where}: {shown} answered 404 Not Found"
                ) from err
            if err.code in (401, 403):
                raise RemoteStorageError(
                    f"{where}: {shown} answered {err.code} {err.reason} (a signed URL that "
                    "expired, or credentials that do not allow reading it)"
                ) from err
            if err.code == 416:
                raise RemoteStorageError(
                    f"{where}: {shown} has fewer than the {end} bytes it had when it was located "
                    "(416 Range Not Satisfiable)"
                ) from err
            if err.code != 429 and err.code < 500:
                raise RemoteStorageError(
                    f"{where}: {shown} answered {err.code} {err.reason}"
                ) from err
            failure = f"{err.code} {err.reason}"
        except (urllib.error.URLError, OSError) as err:
            failure = f"{type(err).__name__}: {getattr(err, 'reason', err)}"
        else:
            if status == 200:  # a server that ignores Range sends the whole object
                body = body[start:end]
            if len(body) != end - start:
                raise RemoteStorageError(
                    f"{where}: {shown} gave {len(body)} bytes for the range {start}-{end - 1} "
                    f"({end - start} bytes): the object is shorter than when it was located"
                )
            return body
        if attempt < HTTP_ATTEMPTS:
            time.sleep(0.05 * 2 ** (attempt - 1))
    raise RetriableRemoteStorageError(
        f"{where}: GET {shown} failed {HTTP_ATTEMPTS} times; last: {failure}"
    )
