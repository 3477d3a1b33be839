"""Aborted transactions whose ABORT markers are still only on the brokers' disks.

A segment is tiered once the transactions in it are decided, but the marker that decided one may
sit in a segment not tiered yet. A broker serving a read_committed fetch then also searches its
local transaction indexes; the offline reader does the same with the ``.txnindex`` files in the
log dirs it reads metadata from. Files may be appended to as they are read: a partial last entry
is ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from pathlib import Path

from tierlog.errors import KafkaStorageError
from tierlog.log.txn_index import ENTRY_SIZE, AbortedTxn

__all__ = ["local_aborted_transactions"]

log = logging.getLogger(__name__)


def local_aborted_transactions(
    log_dirs: Iterable[str | Path], partitions: Collection[tuple[str, int]]
) -> dict[tuple[str, int], frozenset[AbortedTxn]]:
    """Per (topic, partition), the aborted transactions in its local transaction indexes under
    ``log_dirs`` (every replica found)."""
    found: dict[tuple[str, int], set[AbortedTxn]] = {key: set() for key in partitions}
    for log_dir in log_dirs:
        for topic, partition in partitions:
            directory = Path(log_dir) / f"{topic}-{partition}"
            if not directory.is_dir():
                continue
            for index in sorted(directory.glob("*.txnindex")):
                found[topic, partition].update(_entries(index))
    return {key: frozenset(entries) for key, entries in found.items()}


def _entries(path: Path) -> list[AbortedTxn]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:  # the segment was deleted since it was listed
        return []
    entries = []
    for position in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        try:
            entries.append(AbortedTxn.decode(data, position, source=str(path)))
        except KafkaStorageError as err:
            log.error("skipping the rest of %s: %s", path, err)
            break
    return entries
