"""The stream ``fetch_log_segment`` returns: segment bytes from a start to a stop position,
fetched lazily, one window at a time.

A window is what the caller asked for, extended to the next chunk border (so a caller reading
8 KiB at a time does not cost one request per read) and cut at the stop position. ``read()`` of
a whole known range is one window, returned without extra copies when it is a single piece.
"""

from __future__ import annotations

import io
from collections import deque
from typing import Any

from .fetcher import ChunkFetcher, OpenSegment, Piece


class SegmentReader(io.RawIOBase):
    """A readable, non-seekable binary stream over segment bytes ``[start, stop)``."""

    def __init__(self, fetcher: ChunkFetcher, segment: OpenSegment, start: int, stop: int) -> None:
        super().__init__()
        self._fetcher = fetcher
        self._segment = segment
        self._position = start
        self._stop = stop
        self._pending: deque[Piece] = deque()
        self._pending_bytes = 0

    @property
    def position(self) -> int:
        """Position in the segment of the next byte to be read."""
        return self._position

    def readable(self) -> bool:
        return True

    def _fill(self, want: int) -> None:
        start = self._position + self._pending_bytes
        if start >= self._stop:
            return
        chunk_size = self._segment.manifest.chunks.chunk_size
        stop = start + max(want, 1)
        border = -(-stop // chunk_size) * chunk_size  # the chunk border at or after stop
        stop = min(self._stop, border)
        for piece in self._fetcher.read(self._segment, start, stop):
            if len(piece):
                self._pending.append(piece)
                self._pending_bytes += len(piece)

    def _take(self, size: int) -> Piece:
        """Up to ``size`` pending bytes (one piece or part of it)."""
        piece = self._pending.popleft()
        if len(piece) > size:
            view = memoryview(piece)
            self._pending.appendleft(view[size:])
            piece = view[:size]
        self._pending_bytes -= len(piece)
        self._position += len(piece)
        return piece

    def readinto(self, buffer: Any) -> int:
        self._checkClosed()
        target = memoryview(buffer).cast("B")
        if not self._pending:
            self._fill(len(target))
        filled = 0
        while filled < len(target) and self._pending:
            piece = self._take(len(target) - filled)
            target[filled : filled + len(piece)] = piece
            filled += len(piece)
        return filled

    def read(self, size: int | None = -1) -> bytes:
        self._checkClosed()
        remaining = self._stop - self._position
        if size is None or size < 0 or size > remaining:
            size = remaining
        if size <= 0:
            return b""
        if self._pending_bytes < size:
            self._fill(size - self._pending_bytes)
        pending = self._pending
        if pending and len(pending[0]) >= size:
            piece = self._take(size)
            return piece if type(piece) is bytes else bytes(piece)
        parts = []
        taken = 0
        while taken < size and pending:
            piece = self._take(size - taken)
            parts.append(piece)
            taken += len(piece)
        return b"".join(parts)

    def readall(self) -> bytes:
        return self.read(-1)

    def close(self) -> None:
        self._pending.clear()
        self._pending_bytes = 0
        super().close()
