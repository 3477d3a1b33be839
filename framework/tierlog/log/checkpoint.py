"""Atomic writes of the small files a partition checkpoints.

A crash in the middle of rewriting ``leader-epoch-checkpoint`` or a producer snapshot must leave
either the old file or the new one, never a torn mix: the new content goes to ``<name>.tmp`` in the
same directory, is flushed to the device, and is renamed over the target, and the directory entry
is flushed too. Log loading may delete stray ``.tmp`` files a crash left behind.

Writers of one path must not race each other (every caller writes under its own lock).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ..errors import KafkaStorageError

#: Suffix of the file a checkpoint is written to before it is renamed into place.
TEMP_SUFFIX = ".tmp"


def write_atomically(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Replaces ``path`` with ``data`` so that readers see the old or the new content, whole.

    With ``fsync`` the content and the rename are durable when this returns. An I/O failure
    raises KafkaStorageError naming the file (the partition's log directory has failed), and
    the temporary file is removed.
    """
    path = Path(path)
    temp = path.with_name(path.name + TEMP_SUFFIX)
    try:
        with open(temp, "wb") as file:
            file.write(data)
            file.flush()
            if fsync:
                os.fsync(file.fileno())
        os.replace(temp, path)
        if fsync:
            fsync_directory(path.parent)
    except OSError as err:
        with contextlib.suppress(OSError):
            temp.unlink(missing_ok=True)
        raise KafkaStorageError(f"cannot write {path}: {err}") from err


def fsync_directory(directory: Path) -> None:
    """Flushes a directory's entries (a rename or a new file) to the device.

    Platforms that cannot open a directory (Windows) have nothing to flush; that is not an error.
    """
    try:
        fd = os.open(directory, os.O_RDONLY)
    except (PermissionError, IsADirectoryError):
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
