"""Every request to the filesystem goes through here: retries, latency, errors, translation.

Backend errors become tierlog errors at this boundary, with the cause chained (scrubbed when its
text holds a credential): a missing object raises ``RemoteResourceNotFoundError``, a transient
error that outlived its retries ``RetriableRemoteStorageError``, anything else
``RemoteStorageError``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import inspect
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from tierlog.errors import (
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RetriableRemoteStorageError,
    TierlogError,
)
from tierlog.locations import ObjectLocation

from .localcopy import copy_checksummed
from .metrics import PartitionMetrics
from .retry import RetryPolicy, is_transient
from .scrub import Scrubber

log = logging.getLogger(__name__)
T = TypeVar("T")


class Backend:
    """A fsspec filesystem seen through retries, metrics and error translation."""

    def __init__(
        self,
        fs: Any,
        *,
        retry: RetryPolicy,
        scrubber: Scrubber,
        part_size: int,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.fs = fs
        self.retry = retry
        self.scrubber = scrubber
        self.part_size = part_size
        self._sleep = sleep
        #: Object stores have no directories; local-like filesystems need them created.
        self.needs_directories = not getattr(fs, "async_impl", False)
        self._put_kwargs = {"chunksize": part_size} if _accepts(fs, "put_file", "chunksize") else {}
        #: Local files are read with os.pread and small ones written with one os.write: fsspec's
        #: file objects cost a fifth of a 1 MiB read, and more than writing an index.
        self.local = _is_local(fs)
        self.atomic_writes = not self.local

    # --- requests -----------------------------------------------------------------------------

    def cat(
        self,
        path: str,
        metrics: PartitionMetrics,
        what: str,
        *,
        start: int | None = None,
        end: int | None = None,
    ) -> bytes:
        """Bytes ``[start, end)`` of an object (all of it when both are None)."""
        if start is None and end is None:
            data = self._run("get", path, what, metrics, lambda: self.fs.cat_file(path))
        elif self.local and start is not None and end is not None:
            data = self._run("get", path, what, metrics, lambda: _pread(path, start, end))
        else:
            data = self._run(
                "get", path, what, metrics, lambda: self.fs.cat_file(path, start=start, end=end)
            )
        metrics.objects_fetched.mark()
        metrics.bytes_fetched.mark(len(data))
        return bytes(data) if not isinstance(data, bytes) else data

    def size(self, path: str, metrics: PartitionMetrics, what: str) -> int:
        return int(self._run("get", path, what, metrics, lambda: self.fs.size(path)))

    def object_location(self, path: str, expires_in_s: int, what: str) -> ObjectLocation | None:
        """Where another process reads the object itself: its absolute path on a local
        filesystem, a signed URL valid ``expires_in_s`` seconds where the filesystem can sign
        (s3fs), or None (an in-memory filesystem, a store without signed URLs)."""
        if self.local:
            return ObjectLocation(path=os.path.abspath(self.fs._strip_protocol(path)))
        try:
            url = self.fs.sign(path, expiration=expires_in_s)
        except NotImplementedError:
            return None
        except Exception as err:
            raise RemoteStorageError(
                f"{what}: cannot sign a URL for {path}: {type(err).__name__}: "
                f"{self.scrubber.text(str(err))}"
            ) from self.scrubber.cause(err)
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            return None
        return ObjectLocation(url=url)

    def put_file(
        self, local_path: str, path: str, size: int, metrics: PartitionMetrics, what: str
    ) -> None:
        """Upload a local file as it is (multipart with ``upload.part.size`` where supported)."""
        self._run(
            "put",
            path,
            what,
            metrics,
            lambda: self.fs.put_file(local_path, path, **self._put_kwargs),
        )
        metrics.objects_uploaded.mark()
        metrics.bytes_uploaded.mark(size)

    def put_local_file_checksummed(
        self,
        local_path: str,
        path: str,
        size: int,
        chunk_size: int,
        executor: concurrent.futures.Executor,
        metrics: PartitionMetrics,
        what: str,
    ) -> list[int]:
        """``put_file`` on a local filesystem, returning the CRC-32C of every chunk it wrote.

        One pass over the data (see :mod:`tierlog_fsspec.localcopy`); only when ``local``.
        """
        target = self.fs._strip_protocol(path)
        checksums = self._run(
            "put",
            path,
            what,
            metrics,
            lambda: copy_checksummed(local_path, target, size, chunk_size, executor, what),
        )
        metrics.objects_uploaded.mark()
        metrics.bytes_uploaded.mark(size)
        return checksums

    def pipe(self, path: str, data: bytes, metrics: PartitionMetrics, what: str) -> None:
        """Write a small object in one request."""
        if self.local:
            local = self.fs._strip_protocol(path)
            self._run("put", path, what, metrics, lambda: _write_local(local, data))
        else:
            self._run("put", path, what, metrics, lambda: self.fs.pipe_file(path, data))
        metrics.objects_uploaded.mark()
        metrics.bytes_uploaded.mark(len(data))

    def write_stream(
        self,
        path: str,
        pieces: Callable[[], Iterator[bytes | memoryview]],
        metrics: PartitionMetrics,
        what: str,
    ) -> int:
        """Write an object from ``pieces()`` as they come (multipart on object stores).

        A retry starts the object again from a fresh ``pieces()``; a failed attempt is aborted,
        never committed half-written.
        """

        def attempt() -> int:
            handle = self.fs.open(path, "wb", block_size=self.part_size)
            written = 0
            try:
                for piece in pieces():
                    handle.write(piece)
                    written += len(piece)
                handle.close()
            except BaseException:
                _abandon(handle)
                raise
            return written

        written = self._run("put", path, what, metrics, attempt)
        metrics.objects_uploaded.mark()
        metrics.bytes_uploaded.mark(written)
        return written

    def rename(self, source: str, target: str, metrics: PartitionMetrics, what: str) -> None:
        self._run("put", target, what, metrics, lambda: self.fs.mv(source, target))

    def ensure_directory(self, path: str, metrics: PartitionMetrics, what: str) -> None:
        if self.needs_directories:
            self._run("put", path, what, metrics, lambda: self.fs.makedirs(path, exist_ok=True))

    def remove(self, paths: Iterable[str], metrics: PartitionMetrics, what: str) -> int:
        """Delete objects, ignoring the ones already gone; returns how many requests removed
        something (on bulk-delete stores, how many paths were asked for)."""
        paths = list(paths)
        if not paths:
            return 0
        if getattr(self.fs, "async_impl", False) and len(paths) > 1:
            with contextlib.suppress(RemoteResourceNotFoundError):
                self._run("delete", paths[0], what, metrics, lambda: self.fs.rm(paths))
                metrics.objects_deleted.mark(len(paths))
                return len(paths)
        removed = 0
        for path in paths:
            try:
                self._run("delete", path, what, metrics, lambda p=path: self.fs.rm_file(p))  # type: ignore[misc]
            except RemoteResourceNotFoundError:
                continue
            removed += 1
        metrics.objects_deleted.mark(removed)
        return removed

    # --- the retry loop -----------------------------------------------------------------------

    def _run(
        self, operation: str, path: str, what: str, metrics: PartitionMetrics, call: Callable[[], T]
    ) -> T:
        timer = metrics.request_time[operation]
        attempt = 1
        while True:
            started = time.perf_counter()
            try:
                result = call()
            except TierlogError:
                timer.update((time.perf_counter() - started) * 1000.0)
                raise
            except FileNotFoundError as err:
                timer.update((time.perf_counter() - started) * 1000.0)
                raise RemoteResourceNotFoundError(f"{what}: {path} does not exist") from (
                    self.scrubber.cause(err)
                )
            except Exception as err:
                timer.update((time.perf_counter() - started) * 1000.0)
                detail = f"{type(err).__name__}: {self.scrubber.text(str(err))}"
                if is_transient(err) and attempt < self.retry.max_attempts:
                    delay = self.retry.delay_seconds(attempt)
                    metrics.retries[operation].inc()
                    log.warning(
                        "%s: %s %s failed (%s); retry %d of %d in %.0f ms",
                        what,
                        operation,
                        path,
                        detail,
                        attempt,
                        self.retry.max_attempts - 1,
                        delay * 1000,
                    )
                    self._sleep(delay)
                    attempt += 1
                    continue
                metrics.errors[operation].inc()
                cause = self.scrubber.cause(err)
                if is_transient(err):
                    raise RetriableRemoteStorageError(
                        f"{what}: {operation} {path} failed after {attempt} attempt(s): {detail}"
                    ) from cause
                raise RemoteStorageError(f"{what}: {operation} {path} failed: {detail}") from cause
            else:
                timer.update((time.perf_counter() - started) * 1000.0)
                return result


def _accepts(fs: Any, method: str, parameter: str) -> bool:
    """Whether ``fs.<method>`` (or its async twin) takes ``parameter`` by name."""
    for name in (f"_{method}", method):
        function = getattr(fs, name, None)
        if function is None:
            continue
        try:
            if parameter in inspect.signature(function).parameters:
                return True
        except (TypeError, ValueError):
            continue
    return False


def _is_local(fs: Any) -> bool:
    protocol = getattr(fs, "protocol", ())
    protocols = (protocol,) if isinstance(protocol, str) else tuple(protocol)
    return "file" in protocols or "local" in protocols


def _pread(path: str, start: int, end: int) -> bytes:
    """Bytes ``[start, end)`` of a local file (fewer at its end), without a file object."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        data = os.pread(descriptor, end - start, start)
        while len(data) < end - start:
            more = os.pread(descriptor, end - start - len(data), start + len(data))
            if not more:
                break
            data += more
        return data
    finally:
        os.close(descriptor)


def _write_local(path: str, data: bytes) -> None:
    """A local file holding exactly ``data`` (created or truncated), without a file object."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view) :]
    finally:
        os.close(descriptor)


def _abandon(handle: Any) -> None:
    """Give up on a half-written file without committing it (aborts a multipart upload)."""
    with contextlib.suppress(Exception):
        handle.discard()
    try:
        handle.closed = True
    except Exception:
        with contextlib.suppress(Exception):
            handle.close()
