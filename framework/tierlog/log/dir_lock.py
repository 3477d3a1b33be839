"""One process per data directory: Kafka's ``.lock`` file in each log directory.

A broker holds an exclusive ``flock`` on ``<dir>/.lock`` for as long as it runs, so a second
process, or a second broker of the same process, started on that directory fails instead of
writing beside the first. ``flock`` locks belong to the open file description, so a second
open-and-lock conflicts inside one process too; the OS drops the lock when its holder dies,
even by SIGKILL, so a crashed broker never blocks its restart.

The holder writes its pid and host into the file so that the error can say who holds the
directory. Only the lock decides: the text is for people, may be stale after a crash, and a
directory whose file names a dead process is simply taken over. The file itself is never
removed, or two processes could each lock a different file of the same name.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path
from typing import Final

from ..errors import KafkaStorageError, LogDirLockedError

LOCK_FILE_NAME: Final = ".lock"
#: More than a pid and a host name ever take.
_HOLDER_BYTES: Final = 4096


class DirectoryLock:
    """The held lock of one directory; :meth:`release` it when the directory is closed."""

    def __init__(self, directory: Path, fd: int) -> None:
        self.directory = directory
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, directory: Path | str) -> DirectoryLock:
        """Create ``directory`` if needed and lock it, or fail without waiting.

        :raises LogDirLockedError: another process, or another lock in this one, holds it;
            the message names the directory and the holder.
        :raises KafkaStorageError: the directory or its lock file cannot be created or opened.
        """
        directory = Path(directory)
        path = directory / LOCK_FILE_NAME
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as err:
            raise KafkaStorageError(
                f"cannot lock directory {directory}: {err.strerror or err}"
            ) from err
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise LogDirLockedError(
                f"directory {directory} is in use: its lock {path} is held by {holder}; "
                "one broker per directory (stop the other one, or give this one another "
                "directory)"
            ) from None
        except OSError as err:
            os.close(fd)
            raise KafkaStorageError(
                f"cannot lock directory {directory}: {err.strerror or err}"
            ) from err
        lock = cls(directory, fd)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid={os.getpid()}\nhost={socket.gethostname()}\n".encode(), 0)
        except OSError:
            pass  # the lock is held; the holder's name is only for the error message
        return lock

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Give the directory up; idempotent. The file stays, emptied of the holder's name."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
        finally:
            os.close(fd)  # closing the only descriptor of the file description unlocks it

    def __repr__(self) -> str:
        state = "held" if self.held else "released"
        return f"DirectoryLock({str(self.directory)!r}, {state})"


def _holder(fd: int) -> str:
    """Who holds the lock, as its holder wrote it: ``pid N on host H``."""
    try:
        text = os.pread(fd, _HOLDER_BYTES, 0).decode("utf-8", errors="replace")
    except OSError:
        text = ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and line.isprintable():
            fields[name.strip()] = value.strip()
    pid, host = fields.get("pid", ""), fields.get("host", "")
    if not pid.isdigit():
        return "another process (it has not written its pid yet)"
    where = f" on host {host}" if host else ""
    this_process = int(pid) == os.getpid() and host == socket.gethostname()
    return f"pid {pid}{where}" + (" (this process)" if this_process else "")
