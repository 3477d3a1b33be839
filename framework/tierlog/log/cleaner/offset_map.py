"""The cleaner's map from key to the offset of its latest record in the dirty part of a log.

Kafka's ``SkimpyOffsetMap`` stores a 16-byte hash and an 8-byte offset per key in a fixed
buffer, so ``log.cleaner.dedupe.buffer.size`` bounds how many keys one cleaning round covers.
This map holds the keys themselves in a dict (exact, and faster in Python than hashing them)
but counts its capacity the same way, so the same settings bound a round as in Kafka: when the
map is full the round stops at a segment boundary and the next round carries on from there.
"""

from __future__ import annotations

#: What Kafka's map spends per key: an MD5 hash (16 bytes) and an offset (8 bytes).
BYTES_PER_ENTRY = 24


class OffsetMap:
    """Key -> latest offset, with a fixed capacity in keys."""

    __slots__ = ("_map", "capacity", "latest_offset")

    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        slots = max(int(memory // BYTES_PER_ENTRY), 1)
        #: The most distinct keys the map takes before it counts as full.
        self.capacity = max(int(slots * load_factor), 1)
        self._map: dict[bytes, int] = {}
        #: The last offset the map has seen (-1: none); records past it are not covered.
        self.latest_offset = -1

    @property
    def mapping(self) -> dict[bytes, int]:
        """The dict itself, for the cleaner's inner loops (they check ``capacity`` themselves)."""
        return self._map

    def put(self, key: bytes, offset: int) -> None:
        self._map[key] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, or -1 when the map does not hold it."""
        return self._map.get(key, -1)

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1

    @property
    def size(self) -> int:
        return len(self._map)

    @property
    def is_full(self) -> bool:
        return len(self._map) >= self.capacity

    @property
    def utilization(self) -> float:
        """Share of the capacity in use (Kafka's ``max-buffer-utilization-percent`` / 100)."""
        return len(self._map) / self.capacity

    def __contains__(self, key: object) -> bool:
        return key in self._map

    def __len__(self) -> int:
        return len(self._map)
