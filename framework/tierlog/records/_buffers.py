"""The buffer types the record code reads and writes, named once for type checking."""

from __future__ import annotations

import mmap
from typing import TypeAlias

#: Anything the record code can read from without copying.
ReadableBuffer: TypeAlias = bytes | bytearray | memoryview | mmap.mmap
#: Anything the in-place header rewrites can write into.
WritableBuffer: TypeAlias = bytearray | memoryview | mmap.mmap


def byte_view(buf: ReadableBuffer) -> memoryview:
    """A flat, byte-addressed view of ``buf`` (no copy)."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view
