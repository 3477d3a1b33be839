"""The cleaning process of the cleaner crash test: it kills itself at one step of a clean.

Run as ``python cleaner_crash_worker.py LOG_DIR STEP NOW``: opens the compacted log, runs one
cleaning round at time ``NOW``, and sends itself SIGKILL the first time the cleaner reaches a
step whose name starts with ``STEP`` (``writing``, ``before-swap-rename``, ``after-swap-rename``,
``after-delete-rename``, ``after-live-rename``). Exits 3 if the round never reached it.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from tierlog.log import PartitionLog
from tierlog.log.cleaner import CleanerSettings, LogCleaner

CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": 2000,
    "min.cleanable.dirty.ratio": 0.0,
    "file.delete.delay.ms": 0,
}


def main() -> int:
    directory, step, now = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    plog = PartitionLog.open(directory, CONFIG, clock=lambda: now)

    def hook(reached: str) -> None:
        if reached.startswith(step):
            os.kill(os.getpid(), signal.SIGKILL)

    cleaner = LogCleaner(
        lambda: CleanerSettings(io_buffer_size=256), lambda: [plog], clock=lambda: now, hook=hook
    )
    cleaner.clean_once()
    return 3


if __name__ == "__main__":
    sys.exit(main())
