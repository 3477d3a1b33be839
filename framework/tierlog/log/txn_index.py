"""The transaction index (``.txnindex``): the aborted transactions whose markers a segment holds.

A read_committed fetch asks it which aborted transactions overlap the fetched range, so the
consumer can drop their records. Each entry is 34 bytes (big-endian): version int16 (0),
producerId int64, firstOffset int64, lastOffset int64 (the ABORT marker's offset), and the
partition's last stable offset when the marker was written.

The file is created on the first append, as Kafka does: a segment without aborted transactions
has no ``.txnindex``, and the remote tier takes "no file" to mean "no aborted transactions".
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO, Self

import attrs

from ..errors import KafkaStorageError
from .checkpoint import fsync_directory

ABORTED_TXN_VERSION = 0
ENTRY_SIZE = 34
_ENTRY = struct.Struct(">hqqqq")
assert _ENTRY.size == ENTRY_SIZE


@attrs.frozen
class AbortedTxn:
    """One aborted transaction: its producer, its offsets, and the LSO when it was aborted."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            ABORTED_TXN_VERSION,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )

    @classmethod
    def decode(cls, data: bytes | memoryview, position: int = 0, *, source: str = "") -> AbortedTxn:
        """Reads the entry at ``position``; KafkaStorageError for a short or unknown entry."""
        where = f" in {source}" if source else ""
        if len(data) - position < ENTRY_SIZE:
            raise KafkaStorageError(
                f"truncated aborted transaction entry at byte {position}{where}: "
                f"{max(len(data) - position, 0)} of {ENTRY_SIZE} bytes"
            )
        version, producer_id, first_offset, last_offset, lso = _ENTRY.unpack_from(data, position)
        if version != ABORTED_TXN_VERSION:
            raise KafkaStorageError(
                f"unknown aborted transaction version {version} at byte {position}{where} "
                f"(expected {ABORTED_TXN_VERSION})"
            )
        return cls(producer_id, first_offset, last_offset, lso)


def _to_list(items: Iterable[AbortedTxn]) -> list[AbortedTxn]:
    return list(items)


@attrs.frozen
class TxnIndexSearchResult:
    """The aborted transactions found, and whether the search may stop at this segment."""

    aborted: list[AbortedTxn] = attrs.field(converter=_to_list)
    is_complete: bool


class TransactionIndex:
    """The ``.txnindex`` of the segment starting at ``start_offset``.

    Thread-safe: fetch threads read it while the log appends to or truncates it.
    """

    def __init__(self, path: Path, start_offset: int) -> None:
        self._path = Path(path)
        self.start_offset = start_offset
        self._lock = threading.Lock()
        self._file: BinaryIO | None = None
        self._last_offset: int | None = None
        if self._path.exists():
            self._open()
            self._last_offset = self._peek_last_offset()

    @property
    def path(self) -> Path:
        return self._path

    @property
    def last_offset(self) -> int | None:
        """The last offset of the last aborted transaction appended, if any."""
        return self._last_offset

    # --- changes ---------------------------------------------------------------------------------

    def append(self, aborted: AbortedTxn) -> None:
        """Adds an aborted transaction; its last offset must be above every earlier one's."""
        with self._lock:
            if self._last_offset is not None and aborted.last_offset <= self._last_offset:
                raise ValueError(
                    f"the last offset of appended transactions must increase, but "
                    f"{aborted.last_offset} is not above {self._last_offset} in {self._path}"
                )
            file = self._file if self._file is not None else self._open()
            try:
                file.seek(0, os.SEEK_END)
                file.write(aborted.encode())
                file.flush()
            except OSError as err:
                raise KafkaStorageError(f"cannot append to {self._path}: {err}") from err
            self._last_offset = aborted.last_offset

    def truncate_to(self, offset: int) -> None:
        """Removes the transactions whose last offset is at or above ``offset``."""
        with self._lock:
            if self._file is None:
                return
            previous: int | None = None
            for aborted, position in self._read_entries():
                if aborted.last_offset >= offset:
                    self._truncate_file(position)
                    self._last_offset = previous
                    return
                previous = aborted.last_offset

    def reset(self) -> None:
        """Removes every entry (the file, if it exists, stays, empty)."""
        with self._lock:
            if self._file is not None:
                self._truncate_file(0)
            self._last_offset = None

    def flush(self) -> None:
        """Makes the appended entries durable."""
        with self._lock:
            if self._file is not None:
                try:
                    self._file.flush()
                    os.fsync(self._file.fileno())
                except OSError as err:
                    raise KafkaStorageError(f"cannot flush {self._path}: {err}") from err

    def close(self) -> None:
        """Closes the file; a later read or append opens it again."""
        with self._lock:
            self._close()

    def delete_if_exists(self) -> bool:
        """Closes and deletes the file; False if there was none."""
        with self._lock:
            self._close()
            self._last_offset = None
            try:
                self._path.unlink()
            except FileNotFoundError:
                return False
            except OSError as err:
                raise KafkaStorageError(f"cannot delete {self._path}: {err}") from err
            return True

    def rename_to(self, path: Path) -> None:
        """Renames the file (if there is one) to ``path``; later writes go there."""
        path = Path(path)
        with self._lock:
            try:
                if self._path.exists():
                    os.replace(self._path, path)
                    fsync_directory(path.parent)
            except OSError as err:
                raise KafkaStorageError(f"cannot rename {self._path} to {path}: {err}") from err
            finally:
                self._path = path

    def update_parent_dir(self, directory: Path) -> None:
        """Points at the same file name in ``directory`` (the partition directory was renamed)."""
        with self._lock:
            self._path = Path(directory) / self._path.name

    # --- queries ---------------------------------------------------------------------------------

    def all_aborted(self) -> list[AbortedTxn]:
        with self._lock:
            return [aborted for aborted, _ in self._read_entries()]

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> TxnIndexSearchResult:
        """The aborted transactions overlapping offsets ``[fetch_offset, upper_bound_offset)``.

        The search is complete (later segments need not be searched) once an entry's last
        stable offset reaches ``upper_bound_offset``: every transaction that could overlap the
        range had already started before that entry's marker was written.
        """
        found = []
        with self._lock:
            for aborted, _ in self._read_entries():
                if (
                    aborted.last_offset >= fetch_offset
                    and aborted.first_offset < upper_bound_offset
                ):
                    found.append(aborted)
                if aborted.last_stable_offset >= upper_bound_offset:
                    return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def is_empty(self) -> bool:
        with self._lock:
            return self._size() < ENTRY_SIZE

    def size_in_bytes(self) -> int:
        with self._lock:
            return self._size()

    def sanity_check(self) -> None:
        """Raises KafkaStorageError naming the file if it is obviously corrupt.

        Checks that the size is a whole number of entries, that every entry has version 0,
        and that no transaction ends before the segment starts.
        """
        with self._lock:
            size = self._size()
            if size % ENTRY_SIZE:
                raise KafkaStorageError(
                    f"corrupt transaction index {self._path}: size {size} is not a multiple "
                    f"of the {ENTRY_SIZE}-byte entry size"
                )
            for aborted, _ in self._read_entries():
                if aborted.last_offset < self.start_offset:
                    raise KafkaStorageError(
                        f"corrupt transaction index {self._path}: last offset of {aborted} is "
                        f"below the index start offset {self.start_offset}"
                    )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TransactionIndex(path={str(self._path)!r}, start_offset={self.start_offset})"

    # --- internals (called with the lock held) ---------------------------------------------------

    def _open(self) -> BinaryIO:
        try:
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
            self._file = os.fdopen(fd, "r+b")
        except OSError as err:
            raise KafkaStorageError(f"cannot open {self._path}: {err}") from err
        return self._file

    def _close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def _size(self) -> int:
        if self._file is None:
            if not self._path.exists():
                return 0
            self._open()
        assert self._file is not None
        try:
            return os.fstat(self._file.fileno()).st_size
        except OSError as err:
            raise KafkaStorageError(f"cannot stat {self._path}: {err}") from err

    def _read_entries(self) -> list[tuple[AbortedTxn, int]]:
        """Every whole entry with its byte position; a partial entry at the end is ignored."""
        if self._file is None:
            if not self._path.exists():
                return []
            self._open()
        assert self._file is not None
        try:
            self._file.seek(0)
            data = self._file.read()
        except OSError as err:
            raise KafkaStorageError(f"cannot read {self._path}: {err}") from err
        source = str(self._path)
        return [
            (AbortedTxn.decode(data, position, source=source), position)
            for position in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE)
        ]

    def _peek_last_offset(self) -> int | None:
        # Tolerates a corrupt file: recovery opens the index first and then sanity-checks it.
        size = self._size()
        if size < ENTRY_SIZE:
            return None
        assert self._file is not None
        try:
            self._file.seek((size // ENTRY_SIZE - 1) * ENTRY_SIZE)
            entry = self._file.read(ENTRY_SIZE)
        except OSError as err:
            raise KafkaStorageError(f"cannot read {self._path}: {err}") from err
        last_offset: int = _ENTRY.unpack(entry)[3]
        return last_offset

    def _truncate_file(self, size: int) -> None:
        assert self._file is not None
        try:
            self._file.flush()
            self._file.truncate(size)
        except OSError as err:
            raise KafkaStorageError(f"cannot truncate {self._path}: {err}") from err
