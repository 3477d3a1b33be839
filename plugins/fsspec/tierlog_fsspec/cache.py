"""Size-bounded LRU caches of decoded chunks, in memory or on local disk.

Keys name one chunk of one upload (``<upload id>-<chunk>``), so a re-uploaded segment never
serves stale chunks: its new upload id simply misses. Reads take a byte range inside the chunk,
so a hit costs what the caller reads, not the whole chunk.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from typing import Protocol

from tierlog.metrics import Counter

#: Read-only shared mappings, populated at once on Linux (one system call instead of a page fault
#: per 4 KiB on the first hit).
_MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)


class ChunkCache(Protocol):
    """What the fetcher needs from a cache."""

    def read(self, key: str, start: int, end: int) -> bytes | memoryview | None:
        """Bytes ``[start, end)`` of a cached chunk, or None on a miss."""

    def put(self, key: str, data: bytes | memoryview) -> None: ...

    def __contains__(self, key: str) -> bool: ...

    @property
    def size_bytes(self) -> int: ...

    def __len__(self) -> int: ...

    def close(self) -> None: ...


class MemoryChunkCache:
    """Chunks held as bytes, least recently used evicted first."""

    def __init__(self, max_bytes: int, evictions: Counter | None = None) -> None:
        self.max_bytes = max_bytes
        self.evictions = evictions
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, bytes] = OrderedDict()
        self._size = 0

    def read(self, key: str, start: int, end: int) -> memoryview | None:
        with self._lock:
            data = self._entries.get(key)
            if data is None:
                return None
            self._entries.move_to_end(key)
        return memoryview(data)[start:end]

    def put(self, key: str, data: bytes | memoryview) -> None:
        if len(data) > self.max_bytes:
            return
        value = bytes(data)
        evicted = 0
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._size -= len(old)
            self._entries[key] = value
            self._size += len(value)
            while self._size > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self._size -= len(dropped)
                evicted += 1
        if evicted and self.evictions is not None:
            self.evictions.inc(evicted)

    def __contains__(self, key: str) -> bool:
        with self._lock:
            return key in self._entries

    @property
    def size_bytes(self) -> int:
        return self._size

    def __len__(self) -> int:
        return len(self._entries)

    def close(self) -> None:
        with self._lock:
            self._entries.clear()
            self._size = 0


class DiskChunkCache:
    """Chunks held as files in a private directory, least recently used evicted first.

    A chunk file is written under a temporary name and renamed into place, so a reader never
    sees half a chunk. Files are memory-mapped on first read: a hit is then a slice of the page
    cache, with no system call. An evicted chunk's file is unlinked at once; its mapping lives
    until the last reader holding a slice of it lets go.
    """

    def __init__(
        self, max_bytes: int, parent: str | None, evictions: Counter | None = None
    ) -> None:
        self.max_bytes = max_bytes
        self.evictions = evictions
        if parent is not None:
            os.makedirs(parent, exist_ok=True)
        self.directory = tempfile.mkdtemp(prefix="tierlog-fsspec-cache-", dir=parent)
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, int] = OrderedDict()
        self._maps: dict[str, mmap.mmap] = {}
        self._size = 0

    def _path(self, key: str) -> str:
        return os.path.join(self.directory, key)

    def read(self, key: str, start: int, end: int) -> memoryview | None:
        with self._lock:
            if key not in self._entries:
                return None
            self._entries.move_to_end(key)
            mapped = self._maps.get(key)
        if mapped is None:
            mapped = self._map(key)
            if mapped is None:
                return None
        return memoryview(mapped)[start:end]

    def _map(self, key: str) -> mmap.mmap | None:
        try:
            with open(self._path(key), "rb") as handle:
                mapped = mmap.mmap(handle.fileno(), 0, flags=_MAP_FLAGS, prot=mmap.PROT_READ)
        except (OSError, ValueError):  # evicted meanwhile, or empty
            return None
        with self._lock:
            if key not in self._entries:
                return None
            return self._maps.setdefault(key, mapped)

    def put(self, key: str, data: bytes | memoryview) -> None:
        if len(data) > self.max_bytes or not len(data):
            return
        handle, temporary = tempfile.mkstemp(dir=self.directory, prefix=".part-")
        try:
            with open(handle, "wb", closefd=True) as out:
                out.write(data)
            os.replace(temporary, self._path(key))
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            return
        doomed: list[str] = []
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._size -= old
                self._maps.pop(key, None)
            self._entries[key] = len(data)
            self._size += len(data)
            while self._size > self.max_bytes:
                victim, size = self._entries.popitem(last=False)
                self._size -= size
                self._maps.pop(victim, None)
                doomed.append(victim)
        for victim in doomed:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._path(victim))
        if doomed and self.evictions is not None:
            self.evictions.inc(len(doomed))

    def __contains__(self, key: str) -> bool:
        with self._lock:
            return key in self._entries

    @property
    def size_bytes(self) -> int:
        return self._size

    def __len__(self) -> int:
        return len(self._entries)

    def close(self) -> None:
        with self._lock:
            self._entries.clear()
            self._maps.clear()
            self._size = 0
        shutil.rmtree(self.directory, ignore_errors=True)
