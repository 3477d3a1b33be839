"""A partition's copy slot across processes: who may upload its segments now.

The runtime's copy task and a bulk tiering job that runs beside the broker (the Spark ``tier``
job, in a process of its own) must never both upload a partition's segments, or one range would
be tiered twice. Each takes an exclusive ``flock`` on ``copy-slot.lock`` in the partition's
directory before it uploads anything, without waiting: the copy task skips a partition whose
slot another process holds and tries again after ``remote.log.manager.task.retry.backoff.ms``
(or its task interval, if shorter); the job refuses the partition or waits for the slot. The
OS drops the lock when its holder dies, even by SIGKILL, so a crashed job never blocks tiering.

A job that held the slot leaves a :class:`HandBack` note beside it: the leader epoch it tiered
under and the end offset of the last segment whose COPY_SEGMENT_FINISHED it published (and, while
it publishes one, the end offset of that segment). The runtime's in-memory tiered offset is stale
after such a job, and its metadata manager may not have consumed the job's events yet: it copies
nothing there until its metadata shows the partition tiered at least that far, then takes its
tiered offset from the metadata (see ``RemoteLogManager``). A note of an earlier leadership is
void: a new leadership reads its tiered offset from the metadata anyway.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Final

import attrs

from ..log.checkpoint import write_atomically

__all__ = ["NOTE_FILE_NAME", "SLOT_FILE_NAME", "CopySlot", "HandBack"]

SLOT_FILE_NAME: Final = "copy-slot.lock"
NOTE_FILE_NAME: Final = "copy-slot.json"


class CopySlot:
    """The held slot of one partition directory; :meth:`release` it when done."""

    def __init__(self, directory: Path, fd: int) -> None:
        self.directory = directory
        self._fd: int | None = fd

    @classmethod
    def try_acquire(cls, directory: Path) -> CopySlot | None:
        """The slot, or None at once if another holder (process or open file) has it.

        :raises OSError: the lock file cannot be opened (the directory is gone, for one).
        """
        fd = os.open(directory / SLOT_FILE_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        return cls(directory, fd)

    @classmethod
    def acquire(cls, directory: Path, timeout_s: float) -> CopySlot | None:
        """The slot, waiting up to ``timeout_s`` for its holder (a copy task's run, which is
        short, or another job, which is not) to let it go; None if it did not."""
        deadline = time.monotonic() + timeout_s
        while True:
            slot = cls.try_acquire(directory)
            if slot is not None or time.monotonic() >= deadline:
                return slot
            time.sleep(0.05)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Idempotent; the file stays (removing it could let two holders lock two files)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> CopySlot:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"CopySlot({str(self.directory)!r}, {'held' if self.held else 'released'})"


@attrs.frozen
class HandBack:
    """What a job that held the slot tells the runtime taking it back; see the module doc."""

    #: The partition's leader epoch while the job tiered.
    leader_epoch: int
    #: End offset of the last segment the job published COPY_SEGMENT_FINISHED for (-1: none).
    tiered_end: int
    #: End offset of a segment whose COPY_SEGMENT_FINISHED is being published, if one is.
    finishing_end: int | None = None

    @property
    def must_reach(self) -> int:
        """The tiered offset the runtime's metadata must show before it copies again."""
        return max(self.tiered_end, -1 if self.finishing_end is None else self.finishing_end)

    def write(self, directory: Path) -> None:
        data = {"leader_epoch": self.leader_epoch, "tiered_end": self.tiered_end}
        if self.finishing_end is not None:
            data["finishing_end"] = self.finishing_end
        write_atomically(directory / NOTE_FILE_NAME, json.dumps(data).encode(), fsync=False)

    @classmethod
    def read(cls, directory: Path) -> HandBack | None:
        """The note, None if there is none; an unreadable one asks for the most caution."""
        try:
            text = (directory / NOTE_FILE_NAME).read_text()
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
            finishing = data.get("finishing_end")
            return cls(
                int(data["leader_epoch"]),
                int(data["tiered_end"]),
                None if finishing is None else int(finishing),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            # Written atomically, so only a foreign file gets here: wait for nothing, but
            # still re-read the tiered offset from the metadata.
            return cls(-1, -1)

    @staticmethod
    def clear(directory: Path) -> None:
        (directory / NOTE_FILE_NAME).unlink(missing_ok=True)
