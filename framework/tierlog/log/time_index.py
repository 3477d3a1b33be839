"""The time index (``.timeindex``): sparse map from timestamps to offsets in a segment.

Kafka's format: 12-byte big-endian entries, a timestamp (int64) and an offset relative to the
segment's base (int32). An entry ``(timestamp, offset)`` says no record before ``offset`` has a
timestamp above ``timestamp``; both columns only grow. A lookup gives the greatest entry at or
below a target timestamp, the place to start scanning for the first record at or after it.
"""

from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right
from typing import ClassVar, NamedTuple

from ..records import NO_TIMESTAMP
from .index_file import IndexFile


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(IndexFile):
    """A segment's ``.timeindex``; offsets in and out of it are absolute."""

    ENTRY: ClassVar[struct.Struct] = struct.Struct(">qi")
    KEY_TYPE: ClassVar[str] = "q"
    VALUE_TYPE: ClassVar[str] = "i"
    KIND: ClassVar[str] = "time index"
    STRICT_KEYS: ClassVar[bool] = False

    __slots__ = ()

    @property
    def min_key(self) -> int:
        return NO_TIMESTAMP

    @property
    def is_full(self) -> bool:
        """Full one entry early: a segment that becomes inactive appends its final entry."""
        return self.entries >= self._max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(-1, base_offset)`` when the index is empty."""
        self._ensure_loaded()
        if not self._keys:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._keys[-1], self.base_offset + self._values[-1])

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Adds ``(timestamp, offset)`` if the timestamp is newer than the last entry's.

        ValueError if the index is full (unless ``skip_full_check``) or the entry goes back in
        offset or time.
        """
        self._ensure_loaded()
        keys, values = self._keys, self._values
        relative = offset - self.base_offset
        if not skip_full_check and len(keys) >= self._max_entries - 1:
            raise ValueError(f"{self._path} is full ({self._max_entries} entries)")
        if relative < 0 or (values and relative < values[-1]):
            raise ValueError(f"offset {offset} goes back in {self._path}")
        last_timestamp = keys[-1] if keys else NO_TIMESTAMP
        if keys and timestamp < last_timestamp:
            raise ValueError(f"timestamp {timestamp} goes back in {self._path}")
        if timestamp > last_timestamp:
            keys.append(timestamp)
            values.append(relative)

    def append_trusted(self, timestamp: int, offset: int) -> bool:
        """``maybe_append`` for a caller that keeps timestamps and offsets in order and checked
        fullness already; returns whether the index is now full."""
        keys = self._keys
        if not keys or timestamp > keys[-1]:
            keys.append(timestamp)
            self._values.append(offset - self.base_offset)
        return len(keys) >= self._max_entries - 1

    def lookup(self, timestamp: int) -> TimestampOffset:
        """The greatest entry at or below ``timestamp``; ``(-1, base_offset)`` if none."""
        self._ensure_loaded()
        n = bisect_right(self._keys, timestamp) - 1
        if n < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._keys[n], self.base_offset + self._values[n])

    def truncate_to(self, offset: int) -> None:
        """Removes every entry pointing at ``offset`` or above."""
        self._ensure_loaded()
        relative = offset - self.base_offset
        self._truncate_entries(bisect_left(self._values, relative) if relative > 0 else 0)

    def entries_as_absolute(self) -> list[TimestampOffset]:
        self._ensure_loaded()
        base = self.base_offset
        return [
            TimestampOffset(key, base + value)
            for key, value in zip(self._keys, self._values, strict=True)
        ]
