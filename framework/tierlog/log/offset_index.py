"""The offset index (``.index``): sparse map from offsets to byte positions in a segment.

Kafka's format: 8-byte big-endian entries, the offset relative to the segment's base (int32)
and the position of a batch in the ``.log`` (int32). An entry ``(offset, position)`` says the
batch holding ``offset`` starts at or after ``position``; entries are strictly increasing, one
per ``index.interval.bytes`` of records. A lookup gives the greatest entry at or below the target,
from where the segment scans batch headers forward.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left, bisect_right
from typing import ClassVar, NamedTuple

from .index_file import IndexFile, as_int32_columns

_INT32_MAX = (1 << 31) - 1


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(IndexFile):
    """A segment's ``.index``; offsets in and out of it are absolute."""

    ENTRY: ClassVar[struct.Struct] = struct.Struct(">ii")
    KEY_TYPE: ClassVar[str] = "i"
    VALUE_TYPE: ClassVar[str] = "i"
    KIND: ClassVar[str] = "offset index"

    __slots__ = ()

    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        return as_int32_columns(data)

    @property
    def is_full(self) -> bool:
        return self.entries >= self._max_entries

    @property
    def last_offset(self) -> int:
        """The last indexed offset, or the base offset when the index is empty."""
        self._ensure_loaded()
        keys = self._keys
        return self.base_offset + keys[-1] if keys else self.base_offset

    def can_append_offset(self, offset: int) -> bool:
        """Whether ``offset`` can be stored relative to the base (fits in an int32)."""
        return 0 <= offset - self.base_offset <= _INT32_MAX

    def append(self, offset: int, position: int) -> None:
        """Adds an entry; ValueError if the index is full or the entry is not past the last."""
        self._ensure_loaded()
        keys = self._keys
        relative = offset - self.base_offset
        if len(keys) >= self._max_entries:
            raise ValueError(f"{self._path} is full ({self._max_entries} entries)")
        if not 0 <= relative <= _INT32_MAX:
            raise ValueError(f"offset {offset} does not fit in {self._path}")
        if keys and (relative <= keys[-1] or position < self._values[-1]):
            raise ValueError(
                f"entry ({offset}, {position}) does not follow the last entry "
                f"({self.base_offset + keys[-1]}, {self._values[-1]}) of {self._path}"
            )
        keys.append(relative)
        self._values.append(position)

    def append_trusted(self, offset: int, position: int) -> bool:
        """``append`` for a caller that guarantees the entry is valid (the segment's append
        path, which checked fullness and ordering already); returns whether it is now full."""
        keys = self._keys
        keys.append(offset - self.base_offset)
        self._values.append(position)
        return len(keys) >= self._max_entries

    def lookup(self, offset: int) -> OffsetPosition:
        """The greatest entry at or below ``offset``; ``(base_offset, 0)`` if there is none."""
        self._ensure_loaded()
        relative = offset - self.base_offset
        if relative > _INT32_MAX:
            relative = _INT32_MAX
        n = bisect_right(self._keys, relative) - 1
        if n < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._keys[n], self._values[n])

    def lookup_position(self, position: int, back: int = 0) -> int:
        """The greatest indexed position at or below ``position`` (0 if none): a batch start.

        ``back`` steps that many entries further back.
        """
        self._ensure_loaded()
        n = bisect_right(self._values, position) - 1 - back
        return self._values[n] if n >= 0 else 0

    def truncate_to(self, offset: int) -> None:
        """Removes every entry for ``offset`` and above."""
        self._ensure_loaded()
        relative = offset - self.base_offset
        self._truncate_entries(bisect_left(self._keys, relative) if relative > 0 else 0)

    def entries_as_absolute(self) -> list[OffsetPosition]:
        self._ensure_loaded()
        base = self.base_offset
        return [
            OffsetPosition(base + key, value)
            for key, value in zip(self._keys, self._values, strict=True)
        ]
