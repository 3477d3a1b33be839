"""What the offset index and the time index share: fixed-size big-endian entries in a file.

Both indexes are small next to their segment (one entry per ``index.interval.bytes`` of
records), so entries live in memory as two ``array.array`` columns, searched with ``bisect`` in C,
and reach the file only when the segment is flushed. The file therefore never holds an entry the
segment's flushed bytes do not back, it is always exactly ``entries * entry_size`` bytes (no
preallocation to trim at roll), and after an unclean stop recovery rebuilds the unflushed tail
from the ``.log`` anyway. ``segment.index.bytes`` still bounds the entry count: a full index
rolls the segment, as in Kafka.

Indexes of old segments are loaded on first use, so opening a log with many segments reads only
what it needs. Loading checks the file (size, monotonic entries) and raises
``KafkaStorageError`` naming the file when it is corrupt; the segment then rebuilds it.
"""

from __future__ import annotations

import contextlib
import os
import struct
from array import array
from pathlib import Path
from typing import ClassVar

from ..errors import KafkaStorageError


class IndexFile:
    """A sorted, append-only file of fixed-size entries with two integer columns.

    Subclasses name the layout (``ENTRY``), the array type codes of the two columns, and what
    the columns mean; this class keeps them in memory, loads, checks, truncates and persists them.
    """

    ENTRY: ClassVar[struct.Struct]
    KEY_TYPE: ClassVar[str]
    VALUE_TYPE: ClassVar[str]
    KIND: ClassVar[str]

    __slots__ = ("_keys", "_loaded", "_max_entries", "_path", "_values", "_written", "base_offset")

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self._path = path
        self.base_offset = base_offset
        self._max_entries = max(1, max_index_size // self.ENTRY.size)
        self._keys: array[int] = array(self.KEY_TYPE)
        self._values: array[int] = array(self.VALUE_TYPE)
        self._loaded = False
        #: Entries already in the file; later ones exist only in memory until ``flush``.
        self._written = 0

    # --- file -----------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    def create(self) -> None:
        """Creates an empty file (a new segment's index); replaces any stale one."""
        self._path.touch()
        os.truncate(self._path, 0)
        self._keys = array(self.KEY_TYPE)
        self._values = array(self.VALUE_TYPE)
        self._written = 0
        self._loaded = True

    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        try:
            data = self._path.read_bytes()
        except FileNotFoundError:
            data = b""
        except OSError as err:
            raise KafkaStorageError(f"cannot read {self.KIND} {self._path}: {err}") from err
        size = self.ENTRY.size
        if len(data) % size:
            raise KafkaStorageError(
                f"corrupt {self.KIND} {self._path}: {len(data)} bytes is not a multiple of "
                f"the {size}-byte entry size"
            )
        keys, values = self._decode(data)
        self._check(keys, values)
        self._keys, self._values = keys, values
        self._written = len(keys)
        self._loaded = True

    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        keys: array[int] = array(self.KEY_TYPE)
        values: array[int] = array(self.VALUE_TYPE)
        for key, value in self.ENTRY.iter_unpack(data):
            keys.append(key)
            values.append(value)
        return keys, values

    def _check(self, keys: array[int], values: array[int]) -> None:
        """Raises KafkaStorageError unless the columns are sorted as the format requires."""
        if keys and (keys[0] < self.min_key or values[0] < 0):
            raise KafkaStorageError(
                f"corrupt {self.KIND} {self._path}: first entry ({keys[0]}, {values[0]}) is "
                "below the segment's base"
            )
        for column, strict, label in (
            (keys, self.STRICT_KEYS, "keys"),
            (values, False, "values"),
        ):
            previous = column[:-1]
            following = column[1:]
            ordered = (
                all(a < b for a, b in zip(previous, following, strict=True))
                if strict
                else all(a <= b for a, b in zip(previous, following, strict=True))
            )
            if not ordered:
                raise KafkaStorageError(f"corrupt {self.KIND} {self._path}: {label} out of order")

    STRICT_KEYS: ClassVar[bool] = True

    @property
    def min_key(self) -> int:
        return 0

    def sanity_check(self, limit: int | None = None) -> None:
        """Loads the index if needed and checks it; KafkaStorageError names what is wrong.

        ``limit`` bounds the values column (a position must lie inside the log, an offset
        below the segment's end).
        """
        self._ensure_loaded()
        if limit is not None and self._values and self._values[-1] > limit:
            raise KafkaStorageError(
                f"corrupt {self.KIND} {self._path}: last entry points to {self._values[-1]}, "
                f"past the segment's end {limit}"
            )

    def quick_check(self, limit: int | None = None) -> None:
        """The checks a log makes at open without loading the entries: the file is a whole
        number of entries, and its last entry lies within the segment (Kafka's sanity check).

        The full ordering check runs when the entries are first loaded.
        """
        if self._loaded:
            self.sanity_check(limit)
            return
        size = self.ENTRY.size
        try:
            with open(self._path, "rb") as file:
                length = os.fstat(file.fileno()).st_size
                if length % size:
                    raise KafkaStorageError(
                        f"corrupt {self.KIND} {self._path}: {length} bytes is not a multiple "
                        f"of the {size}-byte entry size"
                    )
                last = os.pread(file.fileno(), size, length - size) if length else b""
        except FileNotFoundError:
            length, last = 0, b""
        except OSError as err:
            raise KafkaStorageError(f"cannot read {self.KIND} {self._path}: {err}") from err
        if last:
            key, value = self.ENTRY.unpack(last)
            if key < self.min_key or value < 0 or (limit is not None and value > limit):
                raise KafkaStorageError(
                    f"corrupt {self.KIND} {self._path}: last entry ({key}, {value}) lies "
                    "outside the segment"
                )
        self._written = length // size

    @property
    def is_loaded(self) -> bool:
        return self._loaded

    def unload(self) -> bool:
        """Drops the entries from memory if the file holds them all; they load again on use.

        The arrays are replaced, not emptied, so a reader bisecting them meanwhile is unharmed.
        """
        if not self._loaded or self._written != len(self._keys):
            return False
        self._keys = array(self.KEY_TYPE)
        self._values = array(self.VALUE_TYPE)
        self._loaded = False
        return True

    def flush(self, fsync: bool = True) -> None:
        """Writes the entries not yet in the file (and cuts entries truncated away)."""
        if not self._loaded:
            return
        count = len(self._keys)
        size = self.ENTRY.size
        if count == self._written and not fsync:
            return
        fd = os.open(self._path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            if count < self._written or os.fstat(fd).st_size != self._written * size:
                os.ftruncate(fd, min(count, self._written) * size)
                self._written = min(count, self._written)
            if count > self._written:
                pack = self.ENTRY.pack
                keys, values = self._keys, self._values
                data = b"".join(pack(keys[i], values[i]) for i in range(self._written, count))
                os.pwrite(fd, data, self._written * size)
                self._written = count
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def rename(self, path: Path) -> None:
        """Moves the file (when the segment is marked deleted); missing files are skipped."""
        with contextlib.suppress(FileNotFoundError):
            os.replace(self._path, path)
        self._path = path

    def delete(self) -> None:
        self._path.unlink(missing_ok=True)

    # --- entries --------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        """How many entries there are (from the file's size if they are not loaded)."""
        return len(self._keys) if self._loaded else self._written

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.ENTRY.size

    def resize(self, max_index_size: int) -> None:
        """Applies a new ``segment.index.bytes`` (takes effect for the fullness check)."""
        self._max_entries = max(1, max_index_size // self.ENTRY.size)

    def reset(self) -> None:
        """Drops every entry, in memory and (at the next flush) in the file; recovery rebuilds
        them. A corrupt file is never read again."""
        self._keys = array(self.KEY_TYPE)
        self._values = array(self.VALUE_TYPE)
        self._written = 0
        self._loaded = True

    def _truncate_entries(self, count: int) -> None:
        del self._keys[count:]
        del self._values[count:]

    def entry(self, n: int) -> tuple[int, int]:
        """The ``n``-th entry as stored (relative where the format is relative)."""
        self._ensure_loaded()
        return self._keys[n], self._values[n]

    def raw_entries(self) -> list[tuple[int, int]]:
        self._ensure_loaded()
        return list(zip(self._keys, self._values, strict=True))


def as_int32_columns(data: bytes) -> tuple[array[int], array[int]]:
    """Splits big-endian (int32, int32) entries into two native columns without a Python loop."""
    flat: array[int] = array("i")
    flat.frombytes(data)
    if flat.itemsize != 4:  # pragma: no cover - every platform CPython supports has 4-byte int
        raise RuntimeError("array type 'i' is not 32 bits here")
    if struct.pack("=i", 1) != struct.pack(">i", 1):
        flat.byteswap()
    return flat[0::2], flat[1::2]
