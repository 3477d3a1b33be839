"""Uploading a segment to a local filesystem: one pass over the data, checksummed as written.

On ``file://`` the data object is a plain file, so an upload without transforms is a copy
between two local files. ``put_file`` plus a separate read for the chunk checksums goes over the
segment twice and keeps one core waiting on the other. Here each chunk is read once into a
small buffer, checksummed while the buffer is hot and written at its own offset, by one lane
per core (at most :data:`MAX_LANES`): the checksums cost no extra read, and with a core to
spare the copy is faster than a single-threaded copy of the same file.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from typing import Final

from tierlog.errors import RemoteStorageError

from .chunks import checksum

#: Bytes read, checksummed and written at a time: small enough to stay in the CPU cache.
BUFFER_BYTES: Final = 1024 * 1024
#: Chunks copied at once; more lanes than this only contend for memory bandwidth.
MAX_LANES: Final = 4
#: Whether this platform has the positional I/O the copy needs.
AVAILABLE: Final = hasattr(os, "preadv") and hasattr(os, "pwrite")


def copy_checksummed(
    source: str,
    target: str,
    size: int,
    chunk_size: int,
    executor: concurrent.futures.Executor,
    where: str,
) -> list[int]:
    """Copies ``size`` bytes of ``source`` to ``target`` (created or truncated); returns the
    CRC-32C of every ``chunk_size`` chunk.

    Reading the source fails with RemoteStorageError (a local problem, never retried); writing
    the target raises the OSError, for the backend to translate and maybe retry.
    """
    try:
        src = os.open(source, os.O_RDONLY)
    except OSError as err:
        raise RemoteStorageError(f"{where}: cannot read the local file {source}: {err}") from err
    try:
        dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            starts = range(0, size, chunk_size)
            what = f"{where}: the local segment file {source}"
            lanes = max(1, min(len(starts), MAX_LANES, os.cpu_count() or 1))
            failed = threading.Event()

            def lane(number: int) -> dict[int, int]:
                try:
                    return _copy_chunks(
                        src, dst, starts[number::lanes], size, chunk_size, failed, what
                    )
                except BaseException:
                    failed.set()
                    raise

            others = [executor.submit(lane, n) for n in range(1, lanes)]
            try:
                checksums = lane(0)
            finally:
                # The descriptors stay open until no lane can still use them.
                concurrent.futures.wait(others)
            for other in others:
                checksums.update(other.result())
        finally:
            os.close(dst)
    finally:
        os.close(src)
    return [checksums[start] for start in starts]


def _copy_chunks(
    src: int,
    dst: int,
    starts: range,
    size: int,
    chunk_size: int,
    failed: threading.Event,
    what: str,
) -> dict[int, int]:
    buffer = memoryview(bytearray(min(BUFFER_BYTES, chunk_size, max(1, size))))
    checksums = {}
    for start in starts:
        if failed.is_set():
            break
        end = min(start + chunk_size, size)
        crc, position = 0, start
        while position < end:
            piece = buffer[: min(len(buffer), end - position)]
            try:
                read = os.preadv(src, [piece], position)
            except OSError as err:
                raise RemoteStorageError(f"{what} could not be read: {err}") from err
            if read == 0:
                raise RemoteStorageError(f"{what} shrank while uploading")
            crc = checksum(piece[:read], crc)
            _write_at(dst, piece[:read], position)
            position += read
        checksums[start] = crc
    return checksums


def _write_at(descriptor: int, data: memoryview, position: int) -> None:
    while data:
        written = os.pwrite(descriptor, data, position)
        data, position = data[written:], position + written
