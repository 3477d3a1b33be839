"""Atomic writes of the small files a partition checkpoints.

A crash in the middle of rewriting ``leader-epoch-checkpoint`` or a producer snapshot must leave
either the old file or the new one, never a torn mix: the new content goes to ``<name>.tmp`` in the
same directory, is flushed to the device, and is renamed over the target, and the directory entry
is flushed too. Log loading may delete stray ``.tmp`` files a crash left behind.

Writers of one path must not race each other (every caller writes under its own lock).

``read_offset_checkpoint`` reads Kafka's offset checkpoints (high watermark, recovery point, log
start) for readers outside the log, such as offline readers of a broker's log dirs.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from ..errors import KafkaStorageError

log = logging.getLogger(__name__)

#: Suffix of the file a checkpoint is written to before it is renamed into place.
TEMP_SUFFIX = ".tmp"
#: The version line of Kafka's offset checkpoint files.
OFFSET_CHECKPOINT_VERSION = 0


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


def read_offset_checkpoint(path: Path, topic: str, partition: int) -> int | None:
    """The offset ``path`` records for ``topic``-``partition``, in Kafka's offset checkpoint text
    (version, count, ``<topic> <partition> <offset>`` lines), as readers outside the log (tools,
    offline readers) see it.

    None when the file is missing, has no entry for the partition, or cannot be trusted: an
    unreadable or malformed file is logged and ignored, as the log ignores it at load.
    """
    path = Path(path)
    try:
        lines = path.read_text("utf-8").splitlines()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        log.warning("cannot read %s, ignoring it: %s", path, err)
        return None
    try:
        if lines[0].strip() != str(OFFSET_CHECKPOINT_VERSION):
            raise ValueError(f"unknown version {lines[0]!r}")
        if len(lines) < 2 + int(lines[1]):
            raise ValueError(f"{lines[1]} entries declared, {len(lines) - 2} follow")
        for line in lines[2 : 2 + int(lines[1])]:
            entry_topic, entry_partition, offset = line.split()
            if entry_topic == topic and int(entry_partition) == partition:
                return int(offset)
    except (ValueError, IndexError) as err:
        log.warning("malformed checkpoint %s, ignoring it: %s", path, err)
    return None
